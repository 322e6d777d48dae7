//go:build !purego

#include "textflag.h"

// AVX-512 activation quantizers (quantact_amd64.go). Each lane runs the
// reference quantizer's float32 operations on its element: the scales come
// from the same scalar divisions, so the bytes are the reference's.

// AMAXK folds the absolute values of the 16 floats at j*64(SI) into the
// running maximum Z0 (VMAXPS keeps Z0 where the new value is NaN, as the
// reference's a > amax does) and their NaN lanes into K7.
#define AMAXK(j) \
	VMOVUPS   (j*64)(SI), Z1; \
	VANDPS    Z31, Z1, Z2; \
	VMAXPS    Z0, Z2, Z0; \
	VCMPPS    $3, Z1, Z1, K1; \
	KORW      K1, K7, K7

// QUANTK writes the 16 quants of the floats at j*64(SI), scaled by Z4
// (iscale), and their sum: q = min(127, nearestInt(iscale·x)), where
// nearestInt adds 1.5·2²³ and keeps the low mantissa bits.
#define QUANTK(j) \
	VMULPS        (j*64)(SI), Z4, Z1; \
	VADDPS        Z30, Z1, Z1; \
	VPANDD        Z29, Z1, Z1; \
	VPSUBD        Z28, Z1, Z1; \
	VPMINSD       Z27, Z1, Z1; \
	VPMOVDB       Z1, (4+j*16)(DI); \
	VEXTRACTI64X4 $1, Z1, Y2; \
	VPADDD        Y2, Y1, Y1; \
	VEXTRACTI128  $1, Y1, X2; \
	VPADDD        X2, X1, X1; \
	VPSHUFD       $0x4E, X1, X2; \
	VPADDD        X2, X1, X1; \
	VPSHUFD       $0xB1, X1, X2; \
	VPADDD        X2, X1, X1; \
	VMOVD         X1, AX; \
	MOVW          AX, (260+j*2)(DI)

// HMAXY is HMAX for the eight floats of Y (X its low half).
#define HMAXY(Y, X, TX) \
	VEXTRACTF128  $1, Y, TX; \
	VMAXPS        TX, X, X; \
	VPERMILPS     $0x4E, X, TX; \
	VMAXPS        TX, X, X; \
	VPERMILPS     $0xB1, X, TX; \
	VMAXPS        TX, X, X

// HMAX leaves the largest of the 16 floats of Z (low half Y, X) in the
// low float of X, using T (a register of the same width as X) as scratch.
#define HMAX(Z, Y, X, TY, TX) \
	VEXTRACTF64X4 $1, Z, TY; \
	VMAXPS        TY, Y, Y; \
	HMAXY(Y, X, TX)

// func quantQ8KAVX512(x *float32, nb int, dst *byte) bool
TEXT ·quantQ8KAVX512(SB), NOSPLIT, $0-25
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ dst+16(FP), DI
	MOVL $0x7FFFFFFF, AX
	VPBROADCASTD AX, Z31
	MOVL $0x4B400000, AX // 12582912 = 1.5·2²³
	VPBROADCASTD AX, Z30
	MOVL $0x007FFFFF, AX
	VPBROADCASTD AX, Z29
	MOVL $0x00400000, AX
	VPBROADCASTD AX, Z28
	MOVL $127, AX
	VPBROADCASTD AX, Z27
	TESTQ CX, CX
	JZ    q8kok

q8kblock:
	VXORPS Z0, Z0, Z0
	KXORW  K7, K7, K7
	AMAXK(0)
	AMAXK(1)
	AMAXK(2)
	AMAXK(3)
	AMAXK(4)
	AMAXK(5)
	AMAXK(6)
	AMAXK(7)
	AMAXK(8)
	AMAXK(9)
	AMAXK(10)
	AMAXK(11)
	AMAXK(12)
	AMAXK(13)
	AMAXK(14)
	AMAXK(15)
	KORTESTW K7, K7
	JNZ      q8knan
	HMAX(Z0, Y0, X0, Y1, X1)
	VXORPS   X1, X1, X1
	VUCOMISS X1, X0
	JEQ      q8kzero

	// vmax: the first value whose magnitude is amax.
	VBROADCASTSS X0, Z0
	XORQ R8, R8

q8kfind:
	MOVQ    R8, R9
	SHLQ    $6, R9
	VANDPS  (SI)(R9*1), Z31, Z2
	VCMPPS  $0, Z0, Z2, K1
	KMOVW   K1, AX
	TESTL   AX, AX
	JNZ     q8kfound
	INCQ    R8
	CMPQ    R8, $16
	JB      q8kfind
	JMP     q8knan // unreachable: amax is one of the magnitudes

q8kfound:
	BSFL   AX, AX
	SHLQ   $4, R8
	ADDQ   AX, R8
	VMOVSS (SI)(R8*4), X3
	MOVL   $0xC2FE0000, AX // -127
	VMOVD  AX, X4
	VDIVSS X3, X4, X4      // iscale = -127/vmax
	MOVL   $0x3F800000, AX
	VMOVD  AX, X5
	VDIVSS X4, X5, X5      // d = 1/iscale
	VMOVSS X5, (DI)
	VBROADCASTSS X4, Z4
	QUANTK(0)
	QUANTK(1)
	QUANTK(2)
	QUANTK(3)
	QUANTK(4)
	QUANTK(5)
	QUANTK(6)
	QUANTK(7)
	QUANTK(8)
	QUANTK(9)
	QUANTK(10)
	QUANTK(11)
	QUANTK(12)
	QUANTK(13)
	QUANTK(14)
	QUANTK(15)

q8knext:
	ADDQ $1024, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q8kblock

q8kok:
	MOVB $1, ret+24(FP)
	VZEROUPPER
	RET

q8knan:
	MOVB $0, ret+24(FP)
	VZEROUPPER
	RET

q8kzero:
	VPXORD    Z1, Z1, Z1
	VMOVDQU64 Z1, (DI)
	VMOVDQU64 Z1, 64(DI)
	VMOVDQU64 Z1, 128(DI)
	VMOVDQU64 Z1, 192(DI)
	VMOVDQU64 Z1, 228(DI)
	JMP       q8knext

// ROUND0 writes the 16 quants of the floats in Z scaled by Z7 (id) to
// off(DI): q = trunc(x), then ±1 where x − q ≥ 0.5 or ≤ −0.5 (roundf,
// ties away from zero; x − q is exact).
#define ROUND0(Z, off) \
	VMULPS     Z7, Z, Z8; \
	VCVTTPS2DQ Z8, Z9; \
	VCVTDQ2PS  Z9, Z10; \
	VSUBPS     Z10, Z8, Z10; \
	VCMPPS     $0x0D, Z29, Z10, K1; \
	VCMPPS     $0x02, Z28, Z10, K2; \
	VPADDD     Z27, Z9, K1, Z9; \
	VPSUBD     Z27, Z9, K2, Z9; \
	VPMOVDB    Z9, off(DI)

// func quantQ8_0AVX512(x *float32, nb int, dst *byte, ds *float32) bool
TEXT ·quantQ8_0AVX512(SB), NOSPLIT, $0-33
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ dst+16(FP), DI
	MOVQ ds+24(FP), DX
	MOVL $0x7FFFFFFF, AX
	VPBROADCASTD AX, Z31
	MOVL $0x3F000000, AX // 0.5
	VPBROADCASTD AX, Z29
	MOVL $0xBF000000, AX // -0.5
	VPBROADCASTD AX, Z28
	MOVL $1, AX
	VPBROADCASTD AX, Z27
	TESTQ CX, CX
	JZ    q80ok

q80block:
	VMOVUPS  (SI), Z1
	VMOVUPS  64(SI), Z2
	VCMPPS   $3, Z1, Z1, K1
	VCMPPS   $3, Z2, Z2, K2
	KORTESTW K1, K2
	JNZ      q80nan
	VANDPS   Z31, Z1, Z3
	VANDPS   Z31, Z2, Z4
	VMAXPS   Z4, Z3, Z3
	HMAX(Z3, Y3, X3, Y4, X4)
	MOVL     $0x42FE0000, AX // 127
	VMOVD    AX, X5
	VDIVSS   X5, X3, X6      // d = amax/127
	VMOVSS   X6, (DX)
	VXORPS   X7, X7, X7
	VUCOMISS X7, X6
	JEQ      q80id           // id = 0 for d = 0
	MOVL     $0x3F800000, AX
	VMOVD    AX, X7
	VDIVSS   X6, X7, X7      // id = 1/d

q80id:
	VBROADCASTSS X7, Z7
	ROUND0(Z1, 2)
	ROUND0(Z2, 18)
	ADDQ $128, SI
	ADDQ $34, DI
	ADDQ $4, DX
	DECQ CX
	JNZ  q80block

q80ok:
	MOVB $1, ret+32(FP)
	VZEROUPPER
	RET

q80nan:
	MOVB $0, ret+32(FP)
	VZEROUPPER
	RET

// The AVX2 Q8_K quantizer: quantQ8KAVX512's steps on eight lanes. The
// int32 quants, cut to int8, are packed to bytes with saturating packs
// (exact for them) and a lane fix-up (VPERMD by q8kPerm).

DATA q8kPerm<>+0(SB)/4, $0
DATA q8kPerm<>+4(SB)/4, $4
DATA q8kPerm<>+8(SB)/4, $1
DATA q8kPerm<>+12(SB)/4, $5
DATA q8kPerm<>+16(SB)/4, $2
DATA q8kPerm<>+20(SB)/4, $6
DATA q8kPerm<>+24(SB)/4, $3
DATA q8kPerm<>+28(SB)/4, $7
GLOBL q8kPerm<>(SB), RODATA|NOPTR, $32

// AMAX2 folds the magnitudes of the 8 floats at j*32(SI) into Y0 and
// their NaN lanes into Y7.
#define AMAX2(j) \
	VMOVUPS (j*32)(SI), Y1; \
	VANDPS  Y15, Y1, Y2; \
	VMAXPS  Y0, Y2, Y0; \
	VCMPPS  $3, Y1, Y1, Y1; \
	VORPS   Y1, Y7, Y7

// QUANT2 leaves the int32 quants of the 8 floats at off(SI), scaled by Y4
// (iscale), in Q, each cut to its low byte and sign-extended as the
// reference's int8 conversion does (an infinite scale, from a subnormal
// maximum, gives values far out of range).
#define QUANT2(off, Q) \
	VMULPS  off(SI), Y4, Q; \
	VADDPS  Y14, Q, Q; \
	VPAND   Y13, Q, Q; \
	VPSUBD  Y12, Q, Q; \
	VPMINSD Y11, Q, Q; \
	VPSLLD  $24, Q, Q; \
	VPSRAD  $24, Q, Q

// QUANT32 writes the quants of the 32 floats of group k and the block sums
// of its two 16-element halves.
#define QUANT32(k) \
	QUANT2((k*128), Y0); \
	QUANT2((k*128+32), Y1); \
	QUANT2((k*128+64), Y2); \
	QUANT2((k*128+96), Y3); \
	VPADDD     Y1, Y0, Y5; \
	VPADDD     Y3, Y2, Y6; \
	VPACKSSDW  Y1, Y0, Y0; \
	VPACKSSDW  Y3, Y2, Y2; \
	VPACKSSWB  Y2, Y0, Y0; \
	VPERMD     Y0, Y10, Y0; \
	VMOVDQU    Y0, (4+k*32)(DI); \
	VPHADDD    Y6, Y5, Y5; \
	VPHADDD    Y5, Y5, Y5; \
	VEXTRACTI128 $1, Y5, X6; \
	VPADDD     X6, X5, X5; \
	VPACKSSDW  X5, X5, X5; \
	VMOVD      X5, (260+k*4)(DI)

// func quantQ8KAVX2(x *float32, nb int, dst *byte) bool
TEXT ·quantQ8KAVX2(SB), NOSPLIT, $0-25
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ dst+16(FP), DI
	MOVL $0x7FFFFFFF, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	MOVL $0x4B400000, AX // 12582912 = 1.5·2²³
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	MOVL $0x007FFFFF, AX
	VMOVD AX, X13
	VPBROADCASTD X13, Y13
	MOVL $0x00400000, AX
	VMOVD AX, X12
	VPBROADCASTD X12, Y12
	MOVL $127, AX
	VMOVD AX, X11
	VPBROADCASTD X11, Y11
	VMOVDQU q8kPerm<>(SB), Y10
	TESTQ CX, CX
	JZ    k2ok

k2block:
	VXORPS Y0, Y0, Y0
	VXORPS Y7, Y7, Y7
	AMAX2(0)
	AMAX2(1)
	AMAX2(2)
	AMAX2(3)
	AMAX2(4)
	AMAX2(5)
	AMAX2(6)
	AMAX2(7)
	AMAX2(8)
	AMAX2(9)
	AMAX2(10)
	AMAX2(11)
	AMAX2(12)
	AMAX2(13)
	AMAX2(14)
	AMAX2(15)
	AMAX2(16)
	AMAX2(17)
	AMAX2(18)
	AMAX2(19)
	AMAX2(20)
	AMAX2(21)
	AMAX2(22)
	AMAX2(23)
	AMAX2(24)
	AMAX2(25)
	AMAX2(26)
	AMAX2(27)
	AMAX2(28)
	AMAX2(29)
	AMAX2(30)
	AMAX2(31)
	VMOVMSKPS Y7, AX
	TESTL     AX, AX
	JNZ       k2nan
	HMAXY(Y0, X0, X1)
	VXORPS    X1, X1, X1
	VUCOMISS  X1, X0
	JEQ       k2zero

	// vmax: the first value whose magnitude is amax.
	VBROADCASTSS X0, Y0
	XORQ R8, R8

k2find:
	MOVQ      R8, R9
	SHLQ      $5, R9
	VANDPS    (SI)(R9*1), Y15, Y2
	VCMPPS    $0, Y0, Y2, Y2
	VMOVMSKPS Y2, AX
	TESTL     AX, AX
	JNZ       k2found
	INCQ      R8
	CMPQ      R8, $32
	JB        k2find
	JMP       k2nan // unreachable: amax is one of the magnitudes

k2found:
	BSFL   AX, AX
	SHLQ   $3, R8
	ADDQ   AX, R8
	VMOVSS (SI)(R8*4), X3
	MOVL   $0xC2FE0000, AX // -127
	VMOVD  AX, X4
	VDIVSS X3, X4, X4      // iscale = -127/vmax
	MOVL   $0x3F800000, AX
	VMOVD  AX, X5
	VDIVSS X4, X5, X5      // d = 1/iscale
	VMOVSS X5, (DI)
	VBROADCASTSS X4, Y4
	QUANT32(0)
	QUANT32(1)
	QUANT32(2)
	QUANT32(3)
	QUANT32(4)
	QUANT32(5)
	QUANT32(6)
	QUANT32(7)

k2next:
	ADDQ $1024, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  k2block

k2ok:
	MOVB $1, ret+24(FP)
	VZEROUPPER
	RET

k2nan:
	MOVB $0, ret+24(FP)
	VZEROUPPER
	RET

k2zero:
	VPXOR   Y1, Y1, Y1
	VMOVDQU Y1, (DI)
	VMOVDQU Y1, 32(DI)
	VMOVDQU Y1, 64(DI)
	VMOVDQU Y1, 96(DI)
	VMOVDQU Y1, 128(DI)
	VMOVDQU Y1, 160(DI)
	VMOVDQU Y1, 192(DI)
	VMOVDQU Y1, 224(DI)
	VMOVDQU Y1, 256(DI)
	VMOVQ   X1, 284(DI)
	JMP     k2next

// The AVX2 Q8_0 quantizer: quantQ8_0AVX512's steps on eight lanes. Each
// int32 quant is cut to its low byte and sign-extended (the AVX-512 one's
// VPMOVDB truncation, and what the reference's int8 conversion gives for
// the out-of-range values of an infinite block), then packed to bytes with
// saturating packs, exact for them, and the lane fix-up of q8kPerm.

// ROUND0Y leaves in Q the 8 quants of the floats at off(SI) times Y7 (id):
// q = trunc(x), then ±1 where x − q ≥ 0.5 or ≤ −0.5 (roundf, ties away
// from zero; x − q is exact). Y8-Y10 are scratch.
#define ROUND0Y(off, Q) \
	VMULPS     off(SI), Y7, Y8; \
	VCVTTPS2DQ Y8, Q; \
	VCVTDQ2PS  Q, Y9; \
	VSUBPS     Y9, Y8, Y9; \
	VCMPPS     $0x0D, Y13, Y9, Y10; \
	VPSUBD     Y10, Q, Q; \
	VCMPPS     $0x02, Y12, Y9, Y10; \
	VPADDD     Y10, Q, Q; \
	VPSLLD     $24, Q, Q; \
	VPSRAD     $24, Q, Q

// func quantQ8_0AVX2(x *float32, nb int, dst *byte, ds *float32) bool
TEXT ·quantQ8_0AVX2(SB), NOSPLIT, $0-33
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ dst+16(FP), DI
	MOVQ ds+24(FP), DX
	MOVL $0x7FFFFFFF, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	MOVL $0x3F000000, AX // 0.5
	VMOVD AX, X13
	VPBROADCASTD X13, Y13
	MOVL $0xBF000000, AX // -0.5
	VMOVD AX, X12
	VPBROADCASTD X12, Y12
	VMOVDQU q8kPerm<>(SB), Y11
	TESTQ CX, CX
	JZ    q802ok

q802block:
	VMOVUPS   (SI), Y0
	VMOVUPS   32(SI), Y1
	VMOVUPS   64(SI), Y2
	VMOVUPS   96(SI), Y3
	VCMPPS    $3, Y0, Y0, Y4
	VCMPPS    $3, Y1, Y1, Y5
	VORPS     Y5, Y4, Y4
	VCMPPS    $3, Y2, Y2, Y5
	VORPS     Y5, Y4, Y4
	VCMPPS    $3, Y3, Y3, Y5
	VORPS     Y5, Y4, Y4
	VMOVMSKPS Y4, AX
	TESTL     AX, AX
	JNZ       q802nan
	VANDPS    Y15, Y0, Y0
	VANDPS    Y15, Y1, Y1
	VANDPS    Y15, Y2, Y2
	VANDPS    Y15, Y3, Y3
	VMAXPS    Y1, Y0, Y0
	VMAXPS    Y3, Y2, Y2
	VMAXPS    Y2, Y0, Y0
	HMAXY(Y0, X0, X1)
	MOVL      $0x42FE0000, AX // 127
	VMOVD     AX, X5
	VDIVSS    X5, X0, X6      // d = amax/127
	VMOVSS    X6, (DX)
	VXORPS    X7, X7, X7
	VUCOMISS  X7, X6
	JEQ       q802id          // id = 0 for d = 0
	MOVL      $0x3F800000, AX
	VMOVD     AX, X7
	VDIVSS    X6, X7, X7      // id = 1/d

q802id:
	VBROADCASTSS X7, Y7
	ROUND0Y(0, Y0)
	ROUND0Y(32, Y1)
	ROUND0Y(64, Y2)
	ROUND0Y(96, Y3)
	VPACKSSDW Y1, Y0, Y0
	VPACKSSDW Y3, Y2, Y2
	VPACKSSWB Y2, Y0, Y0
	VPERMD    Y0, Y11, Y0
	VMOVDQU   Y0, 2(DI)
	ADDQ $128, SI
	ADDQ $34, DI
	ADDQ $4, DX
	DECQ CX
	JNZ  q802block

q802ok:
	MOVB $1, ret+32(FP)
	VZEROUPPER
	RET

q802nan:
	MOVB $0, ret+32(FP)
	VZEROUPPER
	RET
