// Encodings of the arm64 vector instructions Go's assembler has no
// mnemonics for (register numbers as constants: SDOT(16, 4, 6) is
// SDOT V16.4S, V4.16B, V6.16B), and the 16-byte dot-product steps the
// NEON kernels are written with.

// SDOT Vd.4S, Vn.16B, Vm.16B (FEAT_DotProd): each int32 lane of d adds
// the four products of its bytes.
#define SDOT(d, n, m) WORD $(0x4e809400|((m)<<16)|((n)<<5)|(d))

// SMULL Vd.8H, Vn.8B, Vm.8B and SMULL2 (the upper eight bytes): int16
// products of int8 lanes.
#define SMULL(d, n, m) WORD $(0x0e20c000|((m)<<16)|((n)<<5)|(d))
#define SMULL2(d, n, m) WORD $(0x4e20c000|((m)<<16)|((n)<<5)|(d))

// SADALP Vd.4S, Vn.8H: adds the pair sums of n's int16 lanes to d's int32
// lanes.
#define SADALP(d, n) WORD $(0x4e606800|((n)<<5)|(d))

// DOT16DP and DOT16NEON add to the int32 lanes of acc the products of the
// sixteen int8 lanes of a and b, four to a lane: one SDOT, or without
// FEAT_DotProd two widening multiplies and two pairwise adds (V28, V29
// scratch). The lane sums differ, their total does not.
#define DOT16DP(acc, a, b) SDOT(acc, a, b)
#define DOT16NEON(acc, a, b) \
	SMULL(28, a, b); \
	SMULL2(29, a, b); \
	SADALP(acc, 28); \
	SADALP(acc, 29)

// Float and narrowing steps of the activation quantizer (4S lanes).
#define FABS4(d, n) WORD $(0x4ea0f800|((n)<<5)|(d))
#define FMAX4(d, n, m) WORD $(0x4e20f400|((m)<<16)|((n)<<5)|(d))
#define FMIN4(d, n, m) WORD $(0x4ea0f400|((m)<<16)|((n)<<5)|(d))
#define FMAXV4(d, n) WORD $(0x6e30f800|((n)<<5)|(d))
#define FMINV4(d, n) WORD $(0x6eb0f800|((n)<<5)|(d))
#define FADD4(d, n, m) WORD $(0x4e20d400|((m)<<16)|((n)<<5)|(d))
// FMULE4 multiplies by lane 0 of m: FMUL Vd.4S, Vn.4S, Vm.S[0].
#define FMULE4(d, n, m) WORD $(0x4f809000|((m)<<16)|((n)<<5)|(d))
#define SMIN4(d, n, m) WORD $(0x4ea06c00|((m)<<16)|((n)<<5)|(d))
// XTN keeps the low half of each lane: 4S to 4H (XTN2: into the upper
// half, 8H), 8H to 8B (XTN2B: 16B).
#define XTNH(d, n) WORD $(0x0e612800|((n)<<5)|(d))
#define XTN2H(d, n) WORD $(0x4e612800|((n)<<5)|(d))
#define XTNB(d, n) WORD $(0x0e212800|((n)<<5)|(d))
#define XTN2B(d, n) WORD $(0x4e212800|((n)<<5)|(d))
// SADDLV Hd, Vn.16B: the int16 sum of sixteen int8 lanes.
#define SADDLVB(d, n) WORD $(0x4e303800|((n)<<5)|(d))
#define FSUB4(d, n, m) WORD $(0x4ea0d400|((m)<<16)|((n)<<5)|(d))
// FCMGE4: all ones in the lanes where n >= m.
#define FCMGE4(d, n, m) WORD $(0x6e20e400|((m)<<16)|((n)<<5)|(d))
// FCVTZS4 converts to int32 toward zero, saturating (NaN to 0); SCVTF4
// converts int32 to float, rounding to nearest.
#define FCVTZS4(d, n) WORD $(0x4ea1b800|((n)<<5)|(d))
#define SCVTF4(d, n) WORD $(0x4e21d800|((n)<<5)|(d))
