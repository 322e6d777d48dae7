//go:build !purego

#include "textflag.h"

// Sixteen-token Q4_K and Q6_K tiles with the tokens in the vector lanes:
// the batched products of a decode step of sixteen sequences (the output
// head, the projections, the shared experts). The tiles of gemmk_amd64.s
// multiply in two steps (VPMADDUBSW, then VPDPWSSD with the sub-block
// scales), and 512-bit integer multiplies issue on one port, so they cost
// two of its cycles per 64 products. Here one VPDPBUSD multiplies four
// weight bytes, broadcast, with four values of each of the sixteen tokens,
// one token a lane: one cycle per 64 products, and each sub-block ends in
// one conversion to float and one fused multiply-add for all sixteen.
//
// The weights stay unsigned (Q6_K q in 0..63, Q4_K q in 0..15) and the
// activations signed, so nothing needs an offset of 128: Q6_K's −32 comes
// from the activations' block sums (packLanes16 stores MAGIC − 32·bsum
// per sub-block and token, where each sub-block's sum starts), Q4_K's min
// terms from their pair sums. Two weight rows share each load of the
// activations. The sub-block sums are exact integers; their float sum
// rounds in a different order from the single-row kernels', so a tile of
// sixteen agrees with them within float rounding, not bit for bit.
//
// The packed block (packLanes16, lanesBlock bytes): group g of values
// (elements 4g..4g+3) at 64g, token t's four bytes at 4t; the scales dy at
// LDY; MAGIC − 32·bsum (int32) of sub-block s at LB16 + 64s, token t at 4t; the
// pair sums of the 32-element sub-blocks 2j and 2j+1 (int16, int16) at
// LB32 + 64j, token t at 4t.

// MAGIC is the float 1.5·2²³: for |k| < 2²², the bits MAGIC + k are the
// float 1.5·2²³ + k exactly, so a sum of products that starts at MAGIC (or
// at MAGIC − 32·bsum, as packLanes16 stores Q6_K's) becomes a float with
// one subtraction of 1.5·2²³, which issues on either vector port, where a
// conversion takes the one port the integer multiplies need. The sums stay
// below 2²²: |Σ q·x| ≤ 16·63·127 plus 32·16·127 for a Q6_K sub-block,
// 32·15·127 for a Q4_K one.
#define MAGIC 0x4B400000

#define LDY 4096
#define LB16 4160
#define LB32 5184
#define LANESB 5440

// The frame: row A's weight bytes at 0, row B's at 256; then per row the
// products d·sc of the sub-block scales, and for Q4_K the min pairs and
// dmin (see the kernels).

// L2 multiplies the group of values at ao(DI) with the weight bytes at
// wa(SP) (row A, into A) and 256+wa(SP) (row B, into B).
#define L2(ao, wa, A, B) \
	VMOVDQU64    ao(DI), Z0; \
	VPBROADCASTD wa(SP), Z2; \
	VPBROADCASTD (256+wa)(SP), Z3; \
	VPDPBUSD     Z0, Z2, A; \
	VPDPBUSD     Z0, Z3, B

// PF4 and PF3 prefetch the lines of the next pair of rows (BX = 2·ldw
// ahead) level with the block of the row at P: the calls take the rows of a
// chunk two by two, so each line comes a whole call (nb blocks) before it
// is needed, as the other quantized kernels fetch DOTPF bytes ahead
// (dot_amd64.h). Past the chunk's last row they fetch lines never read; a
// prefetch never faults.
#define PF3(P) \
	PREFETCHT0 0(P)(BX*1); \
	PREFETCHT0 64(P)(BX*1); \
	PREFETCHT0 128(P)(BX*1)

#define PF4(P) \
	PF3(P); \
	PREFETCHT0 192(P)(BX*1)

// LANESOUT stores the sixteen results of rows A (Z28) and B (Z29): token
// t's pair at out + t·ldo.
#define LANESOUT1(t) \
	MOVL (4*t)(SP), AX; \
	MOVL AX, (DX); \
	MOVL (64+4*t)(SP), AX; \
	MOVL AX, 4(DX); \
	ADDQ BX, DX

#define LANESOUT \
	MOVQ    out+32(FP), DX; \
	MOVQ    ldo+40(FP), BX; \
	SHLQ    $2, BX; \
	VMOVUPS Z28, 0(SP); \
	VMOVUPS Z29, 64(SP); \
	LANESOUT1(0); LANESOUT1(1); LANESOUT1(2); LANESOUT1(3); \
	LANESOUT1(4); LANESOUT1(5); LANESOUT1(6); LANESOUT1(7); \
	LANESOUT1(8); LANESOUT1(9); LANESOUT1(10); LANESOUT1(11); \
	LANESOUT1(12); LANESOUT1(13); LANESOUT1(14); LANESOUT1(15)

// LANESARGS loads row A (SI), row B (R9 = SI + ldw), the packed tile (DI),
// the block count (CX) and 2·ldw (BX), and zeroes the rows' float accumulators.
#define LANESARGS \
	MOVQ   x+0(FP), SI; \
	MOVQ   ldw+8(FP), R9; \
	LEAQ   (R9)(R9*1), BX; \
	ADDQ   SI, R9; \
	MOVQ   q+16(FP), DI; \
	MOVQ   nb+24(FP), CX; \
	VPXORD Z28, Z28, Z28; \
	VPXORD Z29, Z29, Z29

// LANESEND adds a block's two partial sums of each row (Z20+Z21 for A,
// Z22+Z23 for B) times the tokens' dy into the row's accumulator.
#define LANESEND \
	VMOVUPS     LDY(DI), Z1; \
	VADDPS      Z21, Z20, Z20; \
	VFMADD231PS Z1, Z20, Z28; \
	VADDPS      Z23, Z22, Z22; \
	VFMADD231PS Z1, Z22, Z29

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

// SQ6 is sub-block s (sixteen elements, four groups) of both rows: each
// row's integer sums start at MAGIC − 32·bsum, take four VPDPBUSD, and go,
// as floats times d·sc, into FA (row A) and FB (row B). The start is loaded
// once and copied: the loop is bound by its loads (two 512-bit ones a
// cycle) about as much as by its vector operations, and the second load of
// the same line cost 5%.
#define SQ6(s, FA, FB) \
	VMOVDQU64        (LB16+64*s)(DI), Z16; \
	VMOVDQA64        Z16, Z17; \
	L2(256*s, 16*s, Z16, Z17); \
	L2(256*s+64, 16*s+4, Z16, Z17); \
	L2(256*s+128, 16*s+8, Z16, Z17); \
	L2(256*s+192, 16*s+12, Z16, Z17); \
	VSUBPS           Z15, Z16, Z16; \
	VSUBPS           Z15, Z17, Z17; \
	VFMADD231PS.BCST (512+4*s)(SP), Z16, FA; \
	VFMADD231PS.BCST (576+4*s)(SP), Z17, FB

// func gemmQ6KQ8KLanes16(x *byte, ldw int, q *byte, nb int, out *float32, ldo int)
TEXT ·gemmQ6KQ8KLanes16(SB), 0, $640-48
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
	DECQ6(SI, 0, 512)
	DECQ6(R9, 256, 576)
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23
	SQ6(0, Z20, Z22)
	SQ6(1, Z21, Z23)
	SQ6(2, Z20, Z22)
	SQ6(3, Z21, Z23)
	SQ6(4, Z20, Z22)
	SQ6(5, Z21, Z23)
	SQ6(6, Z20, Z22)
	SQ6(7, Z21, Z23)
	SQ6(8, Z20, Z22)
	SQ6(9, Z21, Z23)
	SQ6(10, Z20, Z22)
	SQ6(11, Z21, Z23)
	SQ6(12, Z20, Z22)
	SQ6(13, Z21, Z23)
	SQ6(14, Z20, Z22)
	SQ6(15, Z21, Z23)
	LANESEND
	ADDQ $210, SI
	ADDQ $210, R9
	ADDQ $LANESB, DI
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
// unpack in general registers: sc = a & 63 and m = b & 63 for sub-blocks
// 0-3, (c & 15) | (a>>6)<<4 and c>>4 | (b>>6)<<4 for 4-7, with a, b, c the
// three words of the packed scales.
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
	MOVL         4(P), AX; \
	MOVL         8(P), R10; \
	MOVL         12(P), R11; \
	MOVL         AX, R12; \
	ANDL         $0x3F3F3F3F, R12; \
	MOVL         R11, R13; \
	ANDL         $0x0F0F0F0F, R13; \
	SHRL         $2, AX; \
	ANDL         $0x30303030, AX; \
	ORL          AX, R13; \
	SHLQ         $32, R13; \
	ORQ          R12, R13; \
	VMOVQ        R13, X0; \
	VPMOVZXBD    X0, Y0; \
	VCVTDQ2PS    Y0, Y0; \
	F16BCAST(0(P), X1, Y1); \
	VMULPS       Y1, Y0, Y0; \
	VMOVUPS      Y0, so(SP); \
	MOVL         R10, R12; \
	ANDL         $0x3F3F3F3F, R12; \
	SHRL         $4, R11; \
	ANDL         $0x0F0F0F0F, R11; \
	SHRL         $2, R10; \
	ANDL         $0x30303030, R10; \
	ORL          R10, R11; \
	SHLQ         $32, R11; \
	ORQ          R12, R11; \
	VMOVQ        R11, X0; \
	VPMOVZXBW    X0, X0; \
	VMOVDQU      X0, mo(SP); \
	MOVWLZX      2(P), AX; \
	VMOVD        AX, X1; \
	VCVTPH2PS    X1, X1; \
	VMOVSS       X1, dmo(SP)

// SQ4 is sub-block s (32 elements, eight groups; its weight bytes at
// w(SP) for row A) of both rows, in two chains per row.
#define SQ4(s, w, FA, FB) \
	VMOVDQA64        Z15, Z16; \
	VMOVDQA64        Z15, Z17; \
	VPXORD           Z18, Z18, Z18; \
	VPXORD           Z19, Z19, Z19; \
	L2(512*s, w, Z16, Z17); \
	L2(512*s+64, w+4, Z18, Z19); \
	L2(512*s+128, w+8, Z16, Z17); \
	L2(512*s+192, w+12, Z18, Z19); \
	L2(512*s+256, w+16, Z16, Z17); \
	L2(512*s+320, w+20, Z18, Z19); \
	L2(512*s+384, w+24, Z16, Z17); \
	L2(512*s+448, w+28, Z18, Z19); \
	VPADDD           Z18, Z16, Z16; \
	VPADDD           Z19, Z17, Z17; \
	VSUBPS           Z15, Z16, Z16; \
	VSUBPS           Z15, Z17, Z17; \
	VFMADD231PS.BCST (512+4*s)(SP), Z16, FA; \
	VFMADD231PS.BCST (544+4*s)(SP), Z17, FB

// MINPAIR adds the pair sums j of the tokens times the min pair j of row A
// (576+4j(SP)) into Z24 and of row B (592+4j(SP)) into Z25.
#define MINPAIR(j) \
	VMOVDQU64     (LB32+64*j)(DI), Z0; \
	VPDPWSSD.BCST (576+4*j)(SP), Z0, Z24; \
	VPDPWSSD.BCST (592+4*j)(SP), Z0, Z25

// MINQ4 subtracts both rows' min terms, dmin·Σ m·bsum32, from FA and FB.
#define MINQ4(FA, FB) \
	VPXORD            Z24, Z24, Z24; \
	VPXORD            Z25, Z25, Z25; \
	MINPAIR(0); \
	MINPAIR(1); \
	MINPAIR(2); \
	MINPAIR(3); \
	VCVTDQ2PS         Z24, Z24; \
	VCVTDQ2PS         Z25, Z25; \
	VFNMADD231PS.BCST 608(SP), Z24, FA; \
	VFNMADD231PS.BCST 612(SP), Z25, FB

// func gemmQ4KQ8KLanes16(x *byte, ldw int, q *byte, nb int, out *float32, ldo int)
TEXT ·gemmQ4KQ8KLanes16(SB), 0, $640-48
	LANESARGS
	MOVL         $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z14
	MOVL         $MAGIC, AX
	VPBROADCASTD AX, Z15

q4lanesloop:
	PF3(SI)
	PF3(R9)
	DECQ4(SI, 0, 512, 576, 608)
	DECQ4(R9, 256, 544, 592, 612)
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23
	SQ4(0, 0, Z20, Z22)
	SQ4(1, 64, Z21, Z23)
	SQ4(2, 32, Z20, Z22)
	SQ4(3, 96, Z21, Z23)
	SQ4(4, 128, Z20, Z22)
	SQ4(5, 192, Z21, Z23)
	SQ4(6, 160, Z20, Z22)
	SQ4(7, 224, Z21, Z23)
	MINQ4(Z20, Z22)
	LANESEND
	ADDQ $144, SI
	ADDQ $144, R9
	ADDQ $LANESB, DI
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
