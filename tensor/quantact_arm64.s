//go:build !purego

#include "textflag.h"
#include "dot_arm64.h"

// func quantQ8KNEON(x *float32, nb int, dst *byte) bool
//
// quantQ8K's steps on four lanes, per block of 256: the maximum magnitude
// (FMAX propagates a NaN: the row goes back to the reference), the sign of
// its first occurrence from the largest and smallest value (a scan only
// when both signs reach it), iscale = −127/vmax, and each quant as the
// reference's nearestInt: the low mantissa bits of iscale·x + 1.5·2²³,
// less 2²², at most 127, cut to its low byte. R0 the values, R1 the blocks
// left, R2 the block written; V20 1.5·2²³, V21 0x7fffff, V22 0x400000,
// V23 127, F31 iscale.
TEXT ·quantQ8KNEON(SB), NOSPLIT, $0-25
	MOVD x+0(FP), R0
	MOVD nb+8(FP), R1
	MOVD dst+16(FP), R2
	MOVW $0x4b400000, R3
	VDUP R3, V20.S4
	MOVW $0x7fffff, R3
	VDUP R3, V21.S4
	MOVW $0x400000, R3
	VDUP R3, V22.S4
	MOVW $127, R3
	VDUP R3, V23.S4
	CBZ  R1, done

block:
	MOVD $0xff800000, R3
	VDUP R3, V17.S4 // running maximum: −inf
	MOVD $0x7f800000, R3
	VDUP R3, V18.S4 // running minimum: +inf
	VEOR V16.B16, V16.B16, V16.B16 // running maximum magnitude
	MOVD R0, R4
	MOVD $16, R5

amax:
	VLD1.P 64(R4), [V0.S4, V1.S4, V2.S4, V3.S4]
	FABS4(4, 0)
	FABS4(5, 1)
	FABS4(6, 2)
	FABS4(7, 3)
	FMAX4(16, 16, 4)
	FMAX4(16, 16, 5)
	FMAX4(16, 16, 6)
	FMAX4(16, 16, 7)
	FMAX4(17, 17, 0)
	FMAX4(17, 17, 1)
	FMAX4(17, 17, 2)
	FMAX4(17, 17, 3)
	FMIN4(18, 18, 0)
	FMIN4(18, 18, 1)
	FMIN4(18, 18, 2)
	FMIN4(18, 18, 3)
	SUBS $1, R5, R5
	BNE  amax
	FMAXV4(24, 16)
	FMAXV4(26, 17)
	FMINV4(27, 18)
	FCMPS F24, F24
	BVS   nan
	FCMPS $(0.0), F24
	BEQ   zero
	FNEGS F24, F28
	FCMPS F24, F26
	BNE   negative // no positive value reaches amax
	FCMPS F28, F27
	BNE   positive // no negative one does
	MOVD  R0, R4

scan:
	FMOVS.P 4(R4), F29
	FABSS   F29, F30
	FCMPS   F24, F30
	BNE     scan
	B       scaled

negative:
	FMOVS F28, F29
	B     scaled

positive:
	FMOVS F24, F29

scaled:
	MOVW  $0xc2fe0000, R3 // −127
	FMOVS R3, F30
	FDIVS F29, F30, F31   // iscale = −127/vmax
	MOVW  $0x3f800000, R3
	FMOVS R3, F1
	FDIVS F31, F1, F2     // d = 1/iscale
	FMOVS F2, (R2)
	MOVD  R0, R4
	ADD   $4, R2, R6
	ADD   $260, R2, R7
	MOVD  $16, R5

quants:
	VLD1.P 64(R4), [V0.S4, V1.S4, V2.S4, V3.S4]
	FMULE4(0, 0, 31)
	FMULE4(1, 1, 31)
	FMULE4(2, 2, 31)
	FMULE4(3, 3, 31)
	FADD4(0, 0, 20)
	FADD4(1, 1, 20)
	FADD4(2, 2, 20)
	FADD4(3, 3, 20)
	VAND V21.B16, V0.B16, V0.B16
	VAND V21.B16, V1.B16, V1.B16
	VAND V21.B16, V2.B16, V2.B16
	VAND V21.B16, V3.B16, V3.B16
	VSUB V22.S4, V0.S4, V0.S4
	VSUB V22.S4, V1.S4, V1.S4
	VSUB V22.S4, V2.S4, V2.S4
	VSUB V22.S4, V3.S4, V3.S4
	SMIN4(0, 0, 23)
	SMIN4(1, 1, 23)
	SMIN4(2, 2, 23)
	SMIN4(3, 3, 23)
	XTNH(4, 0)
	XTN2H(4, 1)
	XTNH(5, 2)
	XTN2H(5, 3)
	XTNB(6, 4)
	XTN2B(6, 5)
	VST1.P [V6.B16], 16(R6)
	SADDLVB(7, 6)
	VMOV   V7.H[0], R8
	MOVH   R8, (R7)
	ADD    $2, R7
	SUBS   $1, R5, R5
	BNE    quants
	B      next

zero:
	MOVD R2, R4
	MOVD $18, R5

zeroloop:
	STP.P (ZR, ZR), 16(R4)
	SUBS  $1, R5, R5
	BNE   zeroloop
	MOVW  ZR, (R4)

next:
	ADD  $1024, R0
	ADD  $292, R2
	SUBS $1, R1, R1
	BNE  block

done:
	MOVD $1, R3
	MOVB R3, ret+24(FP)
	RET

nan:
	MOVB ZR, ret+24(FP)
	RET

// func quantQ8_0NEON(x *float32, nb int, dst *byte, ds *float32) bool
//
// quantBlock32's steps on four lanes, per block of 32: d = amax/127 (to
// ds, rounded to f16 by the caller), id = 1/d (0 for d = 0), and each
// quant as roundAway(x·id) compiled for arm64 does it: the conversion
// toward zero (saturating), then ±1 where the remainder x − trunc(x)
// reaches ±0.5 (a wrapping add, as Go's int32), cut to its low byte.
// V20 0.5, V21 −0.5, F27 127, F28 1, F26 id.

// Q80RA rounds the lanes of register number in to register number out,
// also named vout (V9, V10 scratch).
#define Q80RA(in, out, vout) \
	FCVTZS4(out, in); \
	SCVTF4(9, out); \
	FSUB4(9, in, 9); \
	FCMGE4(10, 9, 20); \
	VSUB V10.S4, vout, vout; \
	FCMGE4(10, 21, 9); \
	VADD V10.S4, vout, vout

TEXT ·quantQ8_0NEON(SB), NOSPLIT, $0-33
	MOVD  x+0(FP), R0
	MOVD  nb+8(FP), R1
	MOVD  dst+16(FP), R2
	MOVD  ds+24(FP), R3
	MOVW  $0x3f000000, R4
	VDUP  R4, V20.S4
	MOVW  $0xbf000000, R4
	VDUP  R4, V21.S4
	MOVW  $0x42fe0000, R4
	FMOVS R4, F27
	MOVW  $0x3f800000, R4
	FMOVS R4, F28
	CBZ   R1, q80done

q80block:
	VLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 64(R0), [V4.S4, V5.S4, V6.S4, V7.S4]
	FABS4(12, 0)
	FABS4(13, 1)
	FABS4(14, 2)
	FABS4(15, 3)
	FABS4(16, 4)
	FABS4(17, 5)
	FABS4(18, 6)
	FABS4(19, 7)
	FMAX4(12, 12, 13)
	FMAX4(14, 14, 15)
	FMAX4(16, 16, 17)
	FMAX4(18, 18, 19)
	FMAX4(12, 12, 14)
	FMAX4(16, 16, 18)
	FMAX4(12, 12, 16)
	FMAXV4(24, 12)
	FCMPS  F24, F24
	BVS    q80nan
	FDIVS  F27, F24, F25 // d = amax/127
	FMOVS.P F25, 4(R3)
	VEOR   V26.B16, V26.B16, V26.B16
	FCMPS  $(0.0), F25
	BEQ    q80scale
	FDIVS  F25, F28, F26 // id = 1/d

q80scale:
	FMULE4(0, 0, 26)
	FMULE4(1, 1, 26)
	FMULE4(2, 2, 26)
	FMULE4(3, 3, 26)
	FMULE4(4, 4, 26)
	FMULE4(5, 5, 26)
	FMULE4(6, 6, 26)
	FMULE4(7, 7, 26)
	Q80RA(0, 12, V12.S4)
	Q80RA(1, 13, V13.S4)
	Q80RA(2, 14, V14.S4)
	Q80RA(3, 15, V15.S4)
	Q80RA(4, 16, V16.S4)
	Q80RA(5, 17, V17.S4)
	Q80RA(6, 18, V18.S4)
	Q80RA(7, 19, V19.S4)
	XTNH(0, 12)
	XTN2H(0, 13)
	XTNH(1, 14)
	XTN2H(1, 15)
	XTNH(2, 16)
	XTN2H(2, 17)
	XTNH(3, 18)
	XTN2H(3, 19)
	XTNB(4, 0)
	XTN2B(4, 1)
	XTNB(5, 2)
	XTN2B(5, 3)
	ADD  $2, R2, R5
	VST1 [V4.B16, V5.B16], (R5)
	ADD  $34, R2
	SUBS $1, R1, R1
	BNE  q80block

q80done:
	MOVD $1, R4
	MOVB R4, ret+32(FP)
	RET

q80nan:
	MOVB ZR, ret+32(FP)
	RET
