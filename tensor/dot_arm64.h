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
