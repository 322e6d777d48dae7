//go:build !purego

#include "textflag.h"
#include "dot_amd64.h"

// Sixteen-token Q4_K and Q6_K tiles with the tokens in the vector lanes:
// the batched products of a decode step of sixteen sequences (the output
// head, the projections, the shared experts) and of a prompt's prefill.
// The tiles of gemmk_amd64.s multiply in two steps (VPMADDUBSW, then
// VPDPWSSD with the sub-block scales): two multiply instructions per 64
// products. Here one VPDPBUSD multiplies four weight bytes, broadcast, with
// four values of each of the sixteen tokens, one token a lane, and each
// sub-block ends in one subtraction and one fused multiply-add for all
// sixteen (see MAGIC).
//
// The weights stay unsigned (Q6_K q in 0..63, Q4_K q in 0..15) and the
// activations signed, so nothing needs an offset of 128: Q6_K's −32 comes
// from the activations' block sums (packLanes16 stores MAGIC − 32·bsum
// per sub-block and token, where each sub-block's sum starts), Q4_K's min
// terms from their pair sums. A call computes four weight rows, which
// share each load of the activations: the loops are bound by their loads
// (two 512-bit ones a cycle, and a broadcast of the weight bytes per
// VPDPBUSD) about as much as by their vector operations, so four rows
// rather than two spread each load over more products. The sub-block sums
// are exact integers; their float sum rounds in a different order from the
// single-row kernels', so a tile of sixteen agrees with them within float
// rounding, not bit for bit, and each row's result does not depend on
// which of the four it is.
//
// The packed block (packLanes16, lanesBlock bytes): group g of values
// (elements 4g..4g+3) at 64g, token t's four bytes at 4t; the scales dy at
// LDY; MAGIC − 32·bsum (int32) of sub-block s at LB16 + 64s, token t at
// 4t; the pair sums of the 32-element sub-blocks 2j and 2j+1 (int16,
// int16) at LB32 + 64j, token t at 4t.

// MAGIC is the float 1.5·2²³: for |k| < 2²², the bits MAGIC + k are the
// float 1.5·2²³ + k exactly, so a sum of products that starts at MAGIC (or
// at MAGIC − 32·bsum, as packLanes16 stores Q6_K's) becomes a float with
// one subtraction of 1.5·2²³, which issues on either vector port, where a
// conversion takes the one port the integer multiplies need. The sums stay
// below 2²²: |Σ q·x| ≤ 16·63·128 plus 32·16·128 for a Q6_K sub-block,
// 32·15·128 for a Q4_K one.
#define MAGIC 0x4B400000

#define LDY 4096
#define LB16 4160
#define LB32 5184
#define LANESB 5440

// The frame: the weight bytes of rows A, B, C and D at 0, 256, 512 and
// 768; from 1024 each row's products d·sc of the sub-block scales, and for
// Q4_K its min pairs and dmin (see the kernels); at the end the results
// pass through 0-255.

// L4 multiplies the group of values at ao(DI) with the weight bytes of
// rows A-D at wa, 256+wa, 512+wa and 768+wa(SP), into Z16-Z19.
#define L4(ao, wa) \
	VMOVDQU64    ao(DI), Z0; \
	VPBROADCASTD wa(SP), Z2; \
	VPBROADCASTD (256+wa)(SP), Z3; \
	VPBROADCASTD (512+wa)(SP), Z4; \
	VPBROADCASTD (768+wa)(SP), Z5; \
	VPDPBUSD     Z0, Z2, Z16; \
	VPDPBUSD     Z0, Z3, Z17; \
	VPDPBUSD     Z0, Z4, Z18; \
	VPDPBUSD     Z0, Z5, Z19

// SUBFMA4 ends a sub-block of the four rows: the sums in Z16-Z19 to floats,
// times each row's d·sc at so + 32·row·stride(SP), into FA-FD.
#define SUBFMA4(sA, sB, sC, sD, FA, FB, FC, FD) \
	VSUBPS           Z15, Z16, Z16; \
	VSUBPS           Z15, Z17, Z17; \
	VSUBPS           Z15, Z18, Z18; \
	VSUBPS           Z15, Z19, Z19; \
	VFMADD231PS.BCST sA(SP), Z16, FA; \
	VFMADD231PS.BCST sB(SP), Z17, FB; \
	VFMADD231PS.BCST sC(SP), Z18, FC; \
	VFMADD231PS.BCST sD(SP), Z19, FD

// PF3 and PF4 prefetch the lines of the next four rows (BX = 4·ldw ahead)
// level with the block of the row at P: the calls take the rows of a chunk
// four by four, so each line comes a whole call (nb blocks) before it is
// needed, as the other quantized kernels fetch DOTPF bytes ahead
// (dot_amd64.h). Past the chunk's last row they fetch lines never read; a
// prefetch never faults.
#define PF3(P) \
	PREFETCHT0 0(P)(BX*1); \
	PREFETCHT0 64(P)(BX*1); \
	PREFETCHT0 128(P)(BX*1)

#define PF4(P) \
	PF3(P); \
	PREFETCHT0 192(P)(BX*1)

// LANESARGS loads rows A-D (SI, R9, R10, R11: ldw apart), 4·ldw (BX), the
// packed tile (DI) and the block count (CX), and zeroes the rows' float
// accumulators Z28-Z31.
#define LANESARGS \
	MOVQ   x+0(FP), SI; \
	MOVQ   ldw+8(FP), R8; \
	LEAQ   (SI)(R8*1), R9; \
	LEAQ   (R9)(R8*1), R10; \
	LEAQ   (R10)(R8*1), R11; \
	SHLQ   $2, R8; \
	MOVQ   R8, BX; \
	MOVQ   q+16(FP), DI; \
	MOVQ   nb+24(FP), CX; \
	VPXORD Z28, Z28, Z28; \
	VPXORD Z29, Z29, Z29; \
	VPXORD Z30, Z30, Z30; \
	VPXORD Z31, Z31, Z31

// LANESZERO zeroes the block's partial sums: Z20, Z21 of row A, Z22, Z23
// of B, Z24, Z25 of C, Z26, Z27 of D (even and odd sub-blocks).
#define LANESZERO \
	VPXORD Z20, Z20, Z20; \
	VPXORD Z21, Z21, Z21; \
	VPXORD Z22, Z22, Z22; \
	VPXORD Z23, Z23, Z23; \
	VPXORD Z24, Z24, Z24; \
	VPXORD Z25, Z25, Z25; \
	VPXORD Z26, Z26, Z26; \
	VPXORD Z27, Z27, Z27

// LANESEND adds each row's two partial sums times the tokens' dy into its
// accumulator, and advances the rows by ws bytes and the tile by a block.
#define LANESEND(ws) \
	VMOVUPS     LDY(DI), Z1; \
	VADDPS      Z21, Z20, Z20; \
	VFMADD231PS Z1, Z20, Z28; \
	VADDPS      Z23, Z22, Z22; \
	VFMADD231PS Z1, Z22, Z29; \
	VADDPS      Z25, Z24, Z24; \
	VFMADD231PS Z1, Z24, Z30; \
	VADDPS      Z27, Z26, Z26; \
	VFMADD231PS Z1, Z26, Z31; \
	ADDQ        $ws, SI; \
	ADDQ        $ws, R9; \
	ADDQ        $ws, R10; \
	ADDQ        $ws, R11; \
	ADDQ        $LANESB, DI

// LANESOUT stores the sixteen results of rows A-D (Z28-Z31): token t's four
// at out + t·ldo.
#define LANESOUT1(t) \
	MOVL (4*t)(SP), AX; \
	MOVL AX, (DX); \
	MOVL (64+4*t)(SP), AX; \
	MOVL AX, 4(DX); \
	MOVL (128+4*t)(SP), AX; \
	MOVL AX, 8(DX); \
	MOVL (192+4*t)(SP), AX; \
	MOVL AX, 12(DX); \
	ADDQ BX, DX

#define LANESOUT \
	MOVQ    out+32(FP), DX; \
	MOVQ    ldo+40(FP), BX; \
	SHLQ    $2, BX; \
	VMOVUPS Z28, 0(SP); \
	VMOVUPS Z29, 64(SP); \
	VMOVUPS Z30, 128(SP); \
	VMOVUPS Z31, 192(SP); \
	LANESOUT1(0); LANESOUT1(1); LANESOUT1(2); LANESOUT1(3); \
	LANESOUT1(4); LANESOUT1(5); LANESOUT1(6); LANESOUT1(7); \
	LANESOUT1(8); LANESOUT1(9); LANESOUT1(10); LANESOUT1(11); \
	LANESOUT1(12); LANESOUT1(13); LANESOUT1(14); LANESOUT1(15)

// F16BCAST broadcasts the float16 at mem, as a float32, to the lanes of V
// (X is V's low quarter).
#define F16BCAST(mem, X, V) \
	MOVWLZX      mem, AX; \
	VMOVD        AX, X; \
	VCVTPH2PS    X, X; \
	VBROADCASTSS X, V

// ---- Q6_K ----

// DECQ6HALF decodes half n of the Q6_K row at P (ql at 64n, qh at
// 128+32n) to the 128 bytes q (0..63) at wo(SP): elements l and 32+l take
// the low nibbles of ql[l] and ql[32+l] and bits 0-1 and 2-3 of qh[l],
// elements 64+l and 96+l the high nibbles and bits 4-5 and 6-7. With Z7 =
// [qh, qh>>2], the high elements' top bits are Z7 & 0x30 in place.
#define DECQ6HALF(P, qlo, qho, wo) \
	VMOVDQU64    qlo(P), Z6; \
	VMOVDQU      qho(P), Y7; \
	VPSRLW       $2, Y7, Y8; \
	VINSERTI64X4 $1, Y8, Z7, Z7; \
	VPANDD       Z14, Z6, Z8; \
	VPANDD       Z12, Z7, Z9; \
	VPSHUFB      Z9, Z11, Z9; \
	VPORD        Z9, Z8, Z8; \
	VPSRLW       $4, Z6, Z9; \
	VPANDD       Z14, Z9, Z9; \
	VPANDD       Z13, Z7, Z10; \
	VPORD        Z10, Z9, Z9; \
	VMOVDQU64    Z8, wo(SP); \
	VMOVDQU64    Z9, (wo+64)(SP)

// DECQ6 decodes the block of the row at P: its bytes to wo(SP), its
// sixteen products d·sc to so(SP).
#define DECQ6(P, wo, so) \
	DECQ6HALF(P, 0, 128, wo); \
	DECQ6HALF(P, 64, 160, wo+128); \
	VPMOVSXBD    192(P), Z0; \
	VCVTDQ2PS    Z0, Z0; \
	F16BCAST(208(P), X1, Z1); \
	VMULPS       Z1, Z0, Z0; \
	VMOVUPS      Z0, so(SP)

// SQ6 is sub-block s (sixteen elements, four groups) of the four rows:
// each row's integer sum starts at MAGIC − 32·bsum (loaded once, copied),
// takes four VPDPBUSD, and goes, as a float times d·sc (rows' at 1024,
// 1088, 1152 and 1216(SP)), into FA-FD.
#define SQ6(s, FA, FB, FC, FD) \
	VMOVDQU64 (LB16+64*s)(DI), Z16; \
	VMOVDQA64 Z16, Z17; \
	VMOVDQA64 Z16, Z18; \
	VMOVDQA64 Z16, Z19; \
	L4(256*s, 16*s); \
	L4(256*s+64, 16*s+4); \
	L4(256*s+128, 16*s+8); \
	L4(256*s+192, 16*s+12); \
	SUBFMA4(1024+4*s, 1088+4*s, 1152+4*s, 1216+4*s, FA, FB, FC, FD)

#define SQ6EVEN(s) SQ6(s, Z20, Z22, Z24, Z26)
#define SQ6ODD(s) SQ6(s, Z21, Z23, Z25, Z27)

// func gemmQ6KQ8KLanes16(x *byte, ldw int, q *byte, nb int, out *float32, ldo int)
TEXT ·gemmQ6KQ8KLanes16(SB), 0, $1280-48
	LANESARGS
	MOVL         $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z14
	MOVL         $0x03030303, AX
	VPBROADCASTD AX, Z12
	MOVL         $0x30303030, AX
	VPBROADCASTD AX, Z13
	MOVL         $0x30201000, AX
	VPBROADCASTD AX, Z11
	MOVL         $MAGIC, AX
	VPBROADCASTD AX, Z15

q6lanesloop:
	PF4(SI)
	PF4(R9)
	PF4(R10)
	PF4(R11)
	DECQ6(SI, 0, 1024)
	DECQ6(R9, 256, 1088)
	DECQ6(R10, 512, 1152)
	DECQ6(R11, 768, 1216)
	LANESZERO
	SQ6EVEN(0)
	SQ6ODD(1)
	SQ6EVEN(2)
	SQ6ODD(3)
	SQ6EVEN(4)
	SQ6ODD(5)
	SQ6EVEN(6)
	SQ6ODD(7)
	SQ6EVEN(8)
	SQ6ODD(9)
	SQ6EVEN(10)
	SQ6ODD(11)
	SQ6EVEN(12)
	SQ6ODD(13)
	SQ6EVEN(14)
	SQ6ODD(15)
	LANESEND(210)
	DECQ CX
	JNZ  q6lanesloop

	LANESOUT
	VZEROUPPER
	RET

// ---- Q4_K ----

// DECQ4 decodes the block of the row at P: its 256 nibbles to wo(SP)
// (the low nibbles of qs[0:64] at wo, elements 0-31 then 64-95; the high
// ones at wo+64, elements 32-63 then 96-127; qs[64:128] likewise at
// wo+128 and wo+192), the products d·sc of its eight scales to so(SP),
// its eight mins as int16 pairs to mo(SP) and dmin to dmo(SP). The scales
// and mins unpack in general registers (UNPACKK4: R12, R13; AX, DX, R8 and
// R14 scratch).
#define DECQ4(P, wo, so, mo, dmo) \
	VMOVDQU64    16(P), Z6; \
	VPANDD       Z14, Z6, Z8; \
	VPSRLW       $4, Z6, Z9; \
	VPANDD       Z14, Z9, Z9; \
	VMOVDQU64    Z8, wo(SP); \
	VMOVDQU64    Z9, (wo+64)(SP); \
	VMOVDQU64    80(P), Z6; \
	VPANDD       Z14, Z6, Z8; \
	VPSRLW       $4, Z6, Z9; \
	VPANDD       Z14, Z9, Z9; \
	VMOVDQU64    Z8, (wo+128)(SP); \
	VMOVDQU64    Z9, (wo+192)(SP); \
	UNPACKK4(P, R12, R13, AX, DX, R8, R14); \
	VMOVQ        R12, X0; \
	VPMOVZXBD    X0, Y0; \
	VCVTDQ2PS    Y0, Y0; \
	F16BCAST(0(P), X1, Y1); \
	VMULPS       Y1, Y0, Y0; \
	VMOVUPS      Y0, so(SP); \
	VMOVQ        R13, X0; \
	VPMOVZXBW    X0, X0; \
	VMOVDQU      X0, mo(SP); \
	MOVWLZX      2(P), AX; \
	VMOVD        AX, X1; \
	VCVTPH2PS    X1, X1; \
	VMOVSS       X1, dmo(SP)

// SQ4 is sub-block s (32 elements, eight groups; row A's weight bytes at
// w(SP)) of the four rows, into FA-FD (d·sc of rows A-D at 1024, 1056,
// 1088 and 1120(SP)).
#define SQ4(s, w, FA, FB, FC, FD) \
	VMOVDQA64 Z15, Z16; \
	VMOVDQA64 Z15, Z17; \
	VMOVDQA64 Z15, Z18; \
	VMOVDQA64 Z15, Z19; \
	L4(512*s, w); \
	L4(512*s+64, w+4); \
	L4(512*s+128, w+8); \
	L4(512*s+192, w+12); \
	L4(512*s+256, w+16); \
	L4(512*s+320, w+20); \
	L4(512*s+384, w+24); \
	L4(512*s+448, w+28); \
	SUBFMA4(1024+4*s, 1056+4*s, 1088+4*s, 1120+4*s, FA, FB, FC, FD)

#define SQ4EVEN(s, w) SQ4(s, w, Z20, Z22, Z24, Z26)
#define SQ4ODD(s, w) SQ4(s, w, Z21, Z23, Z25, Z27)

// MINPAIR adds the tokens' pair sums j times each row's min pair j (rows
// A-D at 1152, 1168, 1184 and 1200 + 4j(SP)) into Z16-Z19.
#define MINPAIR(j) \
	VMOVDQU64     (LB32+64*j)(DI), Z0; \
	VPDPWSSD.BCST (1152+4*j)(SP), Z0, Z16; \
	VPDPWSSD.BCST (1168+4*j)(SP), Z0, Z17; \
	VPDPWSSD.BCST (1184+4*j)(SP), Z0, Z18; \
	VPDPWSSD.BCST (1200+4*j)(SP), Z0, Z19

// MINQ4 subtracts the rows' min terms, dmin·Σ m·bsum32 (dmin of rows A-D
// at 1216, 1220, 1224 and 1228(SP)), from their even partial sums.
#define MINQ4 \
	VPXORD            Z16, Z16, Z16; \
	VPXORD            Z17, Z17, Z17; \
	VPXORD            Z18, Z18, Z18; \
	VPXORD            Z19, Z19, Z19; \
	MINPAIR(0); \
	MINPAIR(1); \
	MINPAIR(2); \
	MINPAIR(3); \
	VCVTDQ2PS         Z16, Z16; \
	VCVTDQ2PS         Z17, Z17; \
	VCVTDQ2PS         Z18, Z18; \
	VCVTDQ2PS         Z19, Z19; \
	VFNMADD231PS.BCST 1216(SP), Z16, Z20; \
	VFNMADD231PS.BCST 1220(SP), Z17, Z22; \
	VFNMADD231PS.BCST 1224(SP), Z18, Z24; \
	VFNMADD231PS.BCST 1228(SP), Z19, Z26

// func gemmQ4KQ8KLanes16(x *byte, ldw int, q *byte, nb int, out *float32, ldo int)
TEXT ·gemmQ4KQ8KLanes16(SB), 0, $1280-48
	LANESARGS
	MOVL         $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z14
	MOVL         $MAGIC, AX
	VPBROADCASTD AX, Z15

q4lanesloop:
	PF3(SI)
	PF3(R9)
	PF3(R10)
	PF3(R11)
	DECQ4(SI, 0, 1024, 1152, 1216)
	DECQ4(R9, 256, 1056, 1168, 1220)
	DECQ4(R10, 512, 1088, 1184, 1224)
	DECQ4(R11, 768, 1120, 1200, 1228)
	LANESZERO
	SQ4EVEN(0, 0)
	SQ4ODD(1, 64)
	SQ4EVEN(2, 32)
	SQ4ODD(3, 96)
	SQ4EVEN(4, 128)
	SQ4ODD(5, 192)
	SQ4EVEN(6, 160)
	SQ4ODD(7, 224)
	MINQ4
	LANESEND(144)
	DECQ CX
	JNZ  q4lanesloop

	LANESOUT
	VZEROUPPER
	RET

// func packLanesValues(q, act *byte, lda, nb int)
//
// For each of nb blocks and each quarter c of its 256 values, the 16x16
// transpose of the tokens' dwords 16c..16c+15 (token t's Q8_K block b at
// act + t·lda + 292·b): group 16c+i to q + LANESB·b + 1024c + 64i, token t
// at 4t. Four rounds of shuffles: dwords, qwords, then 128-bit lanes twice.
TEXT ·packLanesValues(SB), NOSPLIT, $0-32
	MOVQ q+0(FP), DI
	MOVQ act+8(FP), SI
	MOVQ lda+16(FP), BX
	MOVQ nb+24(FP), CX
	ADDQ $4, SI

packlanesblock:
	MOVQ $0, DX

packlanesquarter:
	LEAQ (SI)(DX*1), R10
	VMOVDQU32 (R10), Z0
	ADDQ BX, R10
	VMOVDQU32 (R10), Z1
	ADDQ BX, R10
	VMOVDQU32 (R10), Z2
	ADDQ BX, R10
	VMOVDQU32 (R10), Z3
	ADDQ BX, R10
	VMOVDQU32 (R10), Z4
	ADDQ BX, R10
	VMOVDQU32 (R10), Z5
	ADDQ BX, R10
	VMOVDQU32 (R10), Z6
	ADDQ BX, R10
	VMOVDQU32 (R10), Z7
	ADDQ BX, R10
	VMOVDQU32 (R10), Z8
	ADDQ BX, R10
	VMOVDQU32 (R10), Z9
	ADDQ BX, R10
	VMOVDQU32 (R10), Z10
	ADDQ BX, R10
	VMOVDQU32 (R10), Z11
	ADDQ BX, R10
	VMOVDQU32 (R10), Z12
	ADDQ BX, R10
	VMOVDQU32 (R10), Z13
	ADDQ BX, R10
	VMOVDQU32 (R10), Z14
	ADDQ BX, R10
	VMOVDQU32 (R10), Z15
	VPUNPCKLDQ Z1, Z0, Z16
	VPUNPCKHDQ Z1, Z0, Z17
	VPUNPCKLDQ Z3, Z2, Z18
	VPUNPCKHDQ Z3, Z2, Z19
	VPUNPCKLDQ Z5, Z4, Z20
	VPUNPCKHDQ Z5, Z4, Z21
	VPUNPCKLDQ Z7, Z6, Z22
	VPUNPCKHDQ Z7, Z6, Z23
	VPUNPCKLDQ Z9, Z8, Z24
	VPUNPCKHDQ Z9, Z8, Z25
	VPUNPCKLDQ Z11, Z10, Z26
	VPUNPCKHDQ Z11, Z10, Z27
	VPUNPCKLDQ Z13, Z12, Z28
	VPUNPCKHDQ Z13, Z12, Z29
	VPUNPCKLDQ Z15, Z14, Z30
	VPUNPCKHDQ Z15, Z14, Z31
	VPUNPCKLQDQ Z18, Z16, Z0
	VPUNPCKHQDQ Z18, Z16, Z1
	VPUNPCKLQDQ Z19, Z17, Z2
	VPUNPCKHQDQ Z19, Z17, Z3
	VPUNPCKLQDQ Z22, Z20, Z4
	VPUNPCKHQDQ Z22, Z20, Z5
	VPUNPCKLQDQ Z23, Z21, Z6
	VPUNPCKHQDQ Z23, Z21, Z7
	VPUNPCKLQDQ Z26, Z24, Z8
	VPUNPCKHQDQ Z26, Z24, Z9
	VPUNPCKLQDQ Z27, Z25, Z10
	VPUNPCKHQDQ Z27, Z25, Z11
	VPUNPCKLQDQ Z30, Z28, Z12
	VPUNPCKHQDQ Z30, Z28, Z13
	VPUNPCKLQDQ Z31, Z29, Z14
	VPUNPCKHQDQ Z31, Z29, Z15
	VSHUFI32X4 $0x88, Z4, Z0, Z16
	VSHUFI32X4 $0xDD, Z4, Z0, Z20
	VSHUFI32X4 $0x88, Z12, Z8, Z24
	VSHUFI32X4 $0xDD, Z12, Z8, Z28
	VSHUFI32X4 $0x88, Z5, Z1, Z17
	VSHUFI32X4 $0xDD, Z5, Z1, Z21
	VSHUFI32X4 $0x88, Z13, Z9, Z25
	VSHUFI32X4 $0xDD, Z13, Z9, Z29
	VSHUFI32X4 $0x88, Z6, Z2, Z18
	VSHUFI32X4 $0xDD, Z6, Z2, Z22
	VSHUFI32X4 $0x88, Z14, Z10, Z26
	VSHUFI32X4 $0xDD, Z14, Z10, Z30
	VSHUFI32X4 $0x88, Z7, Z3, Z19
	VSHUFI32X4 $0xDD, Z7, Z3, Z23
	VSHUFI32X4 $0x88, Z15, Z11, Z27
	VSHUFI32X4 $0xDD, Z15, Z11, Z31
	VSHUFI32X4 $0x88, Z24, Z16, Z0
	VSHUFI32X4 $0xDD, Z24, Z16, Z8
	VSHUFI32X4 $0x88, Z28, Z20, Z4
	VSHUFI32X4 $0xDD, Z28, Z20, Z12
	VSHUFI32X4 $0x88, Z25, Z17, Z1
	VSHUFI32X4 $0xDD, Z25, Z17, Z9
	VSHUFI32X4 $0x88, Z29, Z21, Z5
	VSHUFI32X4 $0xDD, Z29, Z21, Z13
	VSHUFI32X4 $0x88, Z26, Z18, Z2
	VSHUFI32X4 $0xDD, Z26, Z18, Z10
	VSHUFI32X4 $0x88, Z30, Z22, Z6
	VSHUFI32X4 $0xDD, Z30, Z22, Z14
	VSHUFI32X4 $0x88, Z27, Z19, Z3
	VSHUFI32X4 $0xDD, Z27, Z19, Z11
	VSHUFI32X4 $0x88, Z31, Z23, Z7
	VSHUFI32X4 $0xDD, Z31, Z23, Z15
	MOVQ DX, R11
	SHLQ $4, R11
	VMOVDQU32 Z0, 0(DI)(R11*1)
	VMOVDQU32 Z1, 64(DI)(R11*1)
	VMOVDQU32 Z2, 128(DI)(R11*1)
	VMOVDQU32 Z3, 192(DI)(R11*1)
	VMOVDQU32 Z4, 256(DI)(R11*1)
	VMOVDQU32 Z5, 320(DI)(R11*1)
	VMOVDQU32 Z6, 384(DI)(R11*1)
	VMOVDQU32 Z7, 448(DI)(R11*1)
	VMOVDQU32 Z8, 512(DI)(R11*1)
	VMOVDQU32 Z9, 576(DI)(R11*1)
	VMOVDQU32 Z10, 640(DI)(R11*1)
	VMOVDQU32 Z11, 704(DI)(R11*1)
	VMOVDQU32 Z12, 768(DI)(R11*1)
	VMOVDQU32 Z13, 832(DI)(R11*1)
	VMOVDQU32 Z14, 896(DI)(R11*1)
	VMOVDQU32 Z15, 960(DI)(R11*1)
	ADDQ $64, DX
	CMPQ DX, $256
	JNE  packlanesquarter
	ADDQ $292, SI
	ADDQ $LANESB, DI
	DECQ CX
	JNZ  packlanesblock
	VZEROUPPER
	RET
