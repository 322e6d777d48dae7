//go:build !purego

#include "textflag.h"
#include "dot_amd64.h"

// AVX2 dot products of the 1- to 3-bit i-quants (iqlow.go) with Q8_K
// activations. A group of 32 weights becomes one ymm of unsigned grid
// magnitudes (four 8-byte or eight 4-byte grid entries, gathered by index
// with VMOVQ/VPINSRQ or VMOVD/VPINSRD) and one ymm of ±1 signs (the 32 sign
// bits spread to bytes: VPSHUFB, VPAND, VPCMPEQB, VPOR 1). The signs go onto
// the activations (VPSIGNB), VPMADDUBSW multiplies them with the magnitudes
// and VPMADDWD with the group's odd scale 2s+1 (one per 16 weights in the
// lanes' halves where a group has two). The integer sums are exact; each
// block's int32 lanes are scaled by dx·dy with FMA, and the row's sum by the
// type's 1/8 or 1/4 at the end.
//
// IQ1_S and IQ1_M fold the shift δ = ±1/8 into the weights: 8·(grid + δ) is
// a byte in ±{1, 7, 9}, used as the magnitude |8g+δ| and the sign of 8g+δ,
// and the row's sum is multiplied by 1/8.

// Byte k of dword 0 of a lane goes to bytes 8k..8k+7 of the lane: the sign
// bits of 32 weights, bytes 0-1 in the low lane and 2-3 in the high one.
DATA dotIQSignShuf<>+0(SB)/8, $0x0000000000000000
DATA dotIQSignShuf<>+8(SB)/8, $0x0101010101010101
DATA dotIQSignShuf<>+16(SB)/8, $0x0202020202020202
DATA dotIQSignShuf<>+24(SB)/8, $0x0303030303030303
GLOBL dotIQSignShuf<>(SB), RODATA|NOPTR, $32

// Bit j of each 8-byte run: the mask that picks a byte's sign bit.
DATA dotIQSignBits<>+0(SB)/8, $0x8040201008040201
DATA dotIQSignBits<>+8(SB)/8, $0x8040201008040201
DATA dotIQSignBits<>+16(SB)/8, $0x8040201008040201
DATA dotIQSignBits<>+24(SB)/8, $0x8040201008040201
GLOBL dotIQSignBits<>(SB), RODATA|NOPTR, $32

// IQ1_M's δ bits: bit 3 and 7 of qh byte 0 for weights 0-7 and 8-15 (low
// lane), the same bits of byte 1 for weights 16-31 (high lane).
DATA dotIQ1MDeltaShuf<>+0(SB)/8, $0x0000000000000000
DATA dotIQ1MDeltaShuf<>+8(SB)/8, $0x0000000000000000
DATA dotIQ1MDeltaShuf<>+16(SB)/8, $0x0101010101010101
DATA dotIQ1MDeltaShuf<>+24(SB)/8, $0x0101010101010101
GLOBL dotIQ1MDeltaShuf<>(SB), RODATA|NOPTR, $32
DATA dotIQ1MDeltaBits<>+0(SB)/8, $0x0808080808080808
DATA dotIQ1MDeltaBits<>+8(SB)/8, $0x8080808080808080
DATA dotIQ1MDeltaBits<>+16(SB)/8, $0x0808080808080808
DATA dotIQ1MDeltaBits<>+24(SB)/8, $0x8080808080808080
GLOBL dotIQ1MDeltaBits<>(SB), RODATA|NOPTR, $32

// Each type's DEC macro decodes group g of the block at SI into the unsigned
// magnitudes Y2, the ±1 signs Y4 and the int16 scales Y5; the single-row
// kernels then run DOT32, the four-token tiles TILE4 with the same
// instructions per token, so that both give the same bits.

// IQSETUP loads the arguments and the constants every kernel uses: SI the
// weights, DI the activations, CX the blocks; Y0 the float sum, Y12 the
// block's int32 lanes, Y13 bytes of 1, Y14 the sign bits, Y15 the sign
// shuffle.
#define IQSETUP \
	MOVQ    x+0(FP), SI; \
	MOVQ    y+8(FP), DI; \
	MOVQ    nb+16(FP), CX; \
	VXORPS  Y0, Y0, Y0; \
	VPXOR   Y12, Y12, Y12; \
	BCAST8($0x01010101, X13, Y13); \
	VMOVDQU dotIQSignBits<>(SB), Y14; \
	VMOVDQU dotIQSignShuf<>(SB), Y15

// SIGNS spreads the 32 sign bits in R to ±1 bytes in Y (X its low half).
#define SIGNS(R, X, Y) \
	VMOVD        R, X; \
	VPBROADCASTD X, Y; \
	VPSHUFB      Y15, Y, Y; \
	VPAND        Y14, Y, Y; \
	VPCMPEQB     Y14, Y, Y; \
	VPOR         Y13, Y, Y

// DOT32 adds to the lanes of Y12 the products of 32 activations at off(DI)
// with the unsigned magnitudes in G and signs S, weighted by the int16
// scales in W. Y6 is scratch.
#define DOT32(off, G, S, W) \
	VMOVDQU    off(DI), Y6; \
	VPSIGNB    S, Y6, Y6; \
	VPMADDUBSW Y6, G, Y6; \
	VPMADDWD   W, Y6, Y6; \
	VPADDD     Y6, Y12, Y12

// SCALE1 broadcasts the int16 scale in R to Y (X its low half).
#define SCALE1(R, X, Y) \
	VMOVD        R, X; \
	VPBROADCASTW X, Y

// SCALE2 puts the int16 scale in R1 in the low lane of Y and R2 in the
// high lane; T is an xmm scratch.
#define SCALE2(R1, R2, X, Y, T) \
	VMOVD        R1, X; \
	VPBROADCASTW X, X; \
	VMOVD        R2, T; \
	VPBROADCASTW T, T; \
	VINSERTI128  $1, T, Y, Y

// GRID8 gathers the 8-byte entries of the table at R8 whose indices are in
// A, B, C and D into the four quadwords of Y (X its low half); T is an xmm
// scratch.
#define GRID8(A, B, C, D, X, Y, T) \
	VMOVQ       (R8)(A*8), X; \
	VPINSRQ     $1, (R8)(B*8), X, X; \
	VMOVQ       (R8)(C*8), T; \
	VPINSRQ     $1, (R8)(D*8), T, T; \
	VINSERTI128 $1, T, Y, Y

// BLOCKEND scales the block's int32 lanes by dx·dy (dx the f16 at 0(SI)
// unless DX is given in X1 by the caller: see BLOCKENDD) into Y0, and
// clears them.
#define BLOCKEND \
	MOVWLZX 0(SI), AX; \
	VMOVD   AX, X1; \
	BLOCKENDD

#define BLOCKENDD \
	VCVTPH2PS    X1, X1; \
	VMULSS       0(DI), X1, X1; \
	VBROADCASTSS X1, Y1; \
	VCVTDQ2PS    Y12, Y12; \
	VFMADD231PS  Y1, Y12, Y0; \
	VPXOR        Y12, Y12, Y12

// IQSUM leaves hsum(Y0)·f in X0, f a float32 bit pattern.
#define IQSUM(f) \
	HSUM(Y0, X0, X1); \
	MOVL         f, AX; \
	VMOVD        AX, X1; \
	VMULSS       X1, X0, X0

// SIGNS4 gathers the ±1 sign bytes of four 7-bit patterns (the table at R9,
// ksignsIQ2Bytes: eight bytes a pattern) whose indices are in A, B, C and D
// into the four quadwords of Y4; X3 is scratch.
#define SIGNS4(A, B, C, D) \
	VMOVQ       (R9)(A*8), X4; \
	VPINSRQ     $1, (R9)(B*8), X4, X4; \
	VMOVQ       (R9)(C*8), X3; \
	VPINSRQ     $1, (R9)(D*8), X3, X3; \
	VINSERTI128 $1, X3, Y4, Y4

// KSIGNS4 puts in Y4 the signs of the four 7-bit patterns at bits 0, 7, 14
// and 21 of R13; AX, R10, R11 and R12 are scratch.
#define KSIGNS4 \
	MOVL R13, AX; \
	ANDL $127, AX; \
	MOVL R13, R10; \
	SHRL $7, R10; \
	ANDL $127, R10; \
	MOVL R13, R11; \
	SHRL $14, R11; \
	ANDL $127, R11; \
	MOVL R13, R12; \
	SHRL $21, R12; \
	ANDL $127, R12; \
	SIGNS4(AX, R10, R11, R12)

// DECIQ2XXS decodes IQ2_XXS group g: indices at 2+8g, the u32 of signs and scale at 6+8g.
#define DECIQ2XXS(g) \
	MOVBQZX (2+8*g)(SI), AX; \
	MOVBQZX (3+8*g)(SI), R10; \
	MOVBQZX (4+8*g)(SI), R11; \
	MOVBQZX (5+8*g)(SI), R12; \
	GRID8(AX, R10, R11, R12, X2, Y2, X3); \
	MOVL    (6+8*g)(SI), R13; \
	KSIGNS4; \
	MOVL    R13, AX; \
	SHRL    $28, AX; \
	LEAL    1(AX)(AX*1), AX; \
	SCALE1(AX, X5, Y5)


// IQ2XS1 takes the 9-bit index of u16 l of IQ2_XS group g into I.
#define IQ2XS1(g, l, I) \
	MOVWLZX (2+8*g+2*l)(SI), I; \
	ANDL    $511, I

// IQ2XSS1 takes the 7-bit sign pattern of u16 l of IQ2_XS group g into I.
#define IQ2XSS1(g, l, I) \
	MOVWLZX (2+8*g+2*l)(SI), I; \
	SHRL    $9, I

// SCALES2 makes the two odd scales of the nibbles of the byte at off(SI)
// in the lanes of Y5 (low nibble: weights 0-15).
#define SCALES2(off) \
	MOVBLZX off(SI), R10; \
	MOVL    R10, R11; \
	ANDL    $15, R10; \
	SHRL    $4, R11; \
	LEAL    1(R10)(R10*1), R10; \
	LEAL    1(R11)(R11*1), R11; \
	SCALE2(R10, R11, X5, Y5, X3)

#define DECIQ2XS(g) \
	IQ2XS1(g, 0, AX); \
	IQ2XS1(g, 1, R10); \
	IQ2XS1(g, 2, R11); \
	IQ2XS1(g, 3, R12); \
	GRID8(AX, R10, R11, R12, X2, Y2, X3); \
	IQ2XSS1(g, 0, AX); \
	IQ2XSS1(g, 1, R10); \
	IQ2XSS1(g, 2, R11); \
	IQ2XSS1(g, 3, R12); \
	SIGNS4(AX, R10, R11, R12); \
	SCALES2(66+g)


// IQ2S1 makes in I the 10-bit index l of IQ2_S group g: qs[4g+l] and two
// bits of the group's qh byte (in R13) at 2l.
#define IQ2S1(g, l, I) \
	MOVBLZX (2+4*g+l)(SI), I; \
	MOVL    R13, BX; \
	SHLL    $(8-2*l), BX; \
	ANDL    $0x300, BX; \
	ORL     BX, I

#define DECIQ2S(g) \
	MOVBLZX (66+g)(SI), R13; \
	IQ2S1(g, 0, AX); \
	IQ2S1(g, 1, R10); \
	IQ2S1(g, 2, R11); \
	IQ2S1(g, 3, R12); \
	GRID8(AX, R10, R11, R12, X2, Y2, X3); \
	MOVL    (34+4*g)(SI), BX; \
	SIGNS(BX, X4, Y4); \
	SCALES2(74+g)


// GRID4 gathers eight 4-byte entries of the table at R8 into the dwords of
// Y2 (X2 its low half): IDX(k), a macro per type, leaves index k in AX. X3
// is scratch.
#define GRID4XXS(g) \
	IDXIQ3XXS(g, 0); \
	VMOVD       (R8)(AX*4), X2; \
	IDXIQ3XXS(g, 1); \
	VPINSRD     $1, (R8)(AX*4), X2, X2; \
	IDXIQ3XXS(g, 2); \
	VPINSRD     $2, (R8)(AX*4), X2, X2; \
	IDXIQ3XXS(g, 3); \
	VPINSRD     $3, (R8)(AX*4), X2, X2; \
	IDXIQ3XXS(g, 4); \
	VMOVD       (R8)(AX*4), X3; \
	IDXIQ3XXS(g, 5); \
	VPINSRD     $1, (R8)(AX*4), X3, X3; \
	IDXIQ3XXS(g, 6); \
	VPINSRD     $2, (R8)(AX*4), X3, X3; \
	IDXIQ3XXS(g, 7); \
	VPINSRD     $3, (R8)(AX*4), X3, X3; \
	VINSERTI128 $1, X3, Y2, Y2

#define GRID4S(g) \
	IDXIQ3S(g, 0); \
	VMOVD       (R8)(AX*4), X2; \
	IDXIQ3S(g, 1); \
	VPINSRD     $1, (R8)(AX*4), X2, X2; \
	IDXIQ3S(g, 2); \
	VPINSRD     $2, (R8)(AX*4), X2, X2; \
	IDXIQ3S(g, 3); \
	VPINSRD     $3, (R8)(AX*4), X2, X2; \
	IDXIQ3S(g, 4); \
	VMOVD       (R8)(AX*4), X3; \
	IDXIQ3S(g, 5); \
	VPINSRD     $1, (R8)(AX*4), X3, X3; \
	IDXIQ3S(g, 6); \
	VPINSRD     $2, (R8)(AX*4), X3, X3; \
	IDXIQ3S(g, 7); \
	VPINSRD     $3, (R8)(AX*4), X3, X3; \
	VINSERTI128 $1, X3, Y2, Y2

// IQ3_XXS: index k of group g is byte 2+8g+k.
#define IDXIQ3XXS(g, k) MOVBLZX (2+8*g+k)(SI), AX

// IQ3_S: index k of group g is byte 2+8g+k and bit k of the group's qh byte
// (R13) as bit 8.
#define IDXIQ3S(g, k) \
	MOVBLZX (2+8*g+k)(SI), AX; \
	MOVL    R13, BX; \
	SHLL    $(8-k), BX; \
	ANDL    $256, BX; \
	ORL     BX, AX

#define DECIQ3XXS(g) \
	GRID4XXS(g); \
	MOVL    (66+4*g)(SI), R13; \
	KSIGNS4; \
	MOVL    R13, AX; \
	SHRL    $28, AX; \
	LEAL    1(AX)(AX*1), AX; \
	SCALE1(AX, X5, Y5)


#define DECIQ3S(g) \
	MOVBLZX (66+g)(SI), R13; \
	GRID4S(g); \
	MOVL    (74+4*g)(SI), BX; \
	SIGNS(BX, X4, Y4); \
	MOVBLZX (106+g/2)(SI), AX; \
	SHRL    $(4*(g%2)), AX; \
	ANDL    $15, AX; \
	LEAL    1(AX)(AX*1), AX; \
	SCALE1(AX, X5, Y5)


// IQ1W turns the group's grid bytes (−1/0/+1) in Y2 and δ as ±1 bytes in
// Y4 into the magnitudes |8g+δ| in Y2 and the weights 8g+δ in Y4 (their
// signs); Y11 holds bytes of 8, Y3 is scratch.
#define IQ1W \
	VPSIGNB Y2, Y11, Y3; \
	VPADDB  Y4, Y3, Y4; \
	VPABSB  Y4, Y2

// IQ1S1 makes in I the 11-bit index l of IQ1_S group g: qs[4g+l] and
// three bits of the group's qh word (R13) at 3l.
#define IQ1S1(g, l, I) \
	MOVBLZX (2+4*g+l)(SI), I; \
	MOVL    R13, BX; \
	SHRL    $(3*l), BX; \
	ANDL    $7, BX; \
	SHLL    $8, BX; \
	ORL     BX, I

#define DECIQ1S(g) \
	MOVWLZX (34+2*g)(SI), R13; \
	IQ1S1(g, 0, AX); \
	IQ1S1(g, 1, R10); \
	IQ1S1(g, 2, R11); \
	IQ1S1(g, 3, R12); \
	GRID8(AX, R10, R11, R12, X2, Y2, X3); \
	MOVL    R13, AX; \
	SHRL    $15, AX; \
	NEGL    AX; \
	ORL     $1, AX; \
	VMOVD   AX, X4; \
	VPBROADCASTB X4, Y4; \
	MOVL    R13, AX; \
	SHRL    $12, AX; \
	ANDL    $7, AX; \
	LEAL    1(AX)(AX*1), AX; \
	SCALE1(AX, X5, Y5); \
	IQ1W


// IQ1M1 makes in I the 11-bit index l of IQ1_M group g: qs[4g+l] and bits
// 4l..4l+2 of the group's two qh bytes (R13).
#define IQ1M1(g, l, I) \
	MOVBLZX (4*g+l)(SI), I; \
	MOVL    R13, BX; \
	SHRL    $(4*l), BX; \
	ANDL    $7, BX; \
	SHLL    $8, BX; \
	ORL     BX, I

// DECIQ1M: the δ signs of group g are bits 3, 7 of its qh bytes (Y9, Y10
// spread them); its 3-bit scales are bits 6(g%2) and 6(g%2)+3 of scale word
// g/2.
#define DECIQ1M(g) \
	MOVWLZX (32+2*g)(SI), R13; \
	IQ1M1(g, 0, AX); \
	IQ1M1(g, 1, R10); \
	IQ1M1(g, 2, R11); \
	IQ1M1(g, 3, R12); \
	GRID8(AX, R10, R11, R12, X2, Y2, X3); \
	VMOVD        R13, X4; \
	VPBROADCASTW X4, Y4; \
	VPSHUFB      dotIQ1MDeltaShuf<>(SB), Y4, Y4; \
	VPAND        dotIQ1MDeltaBits<>(SB), Y4, Y4; \
	VPCMPEQB     dotIQ1MDeltaBits<>(SB), Y4, Y4; \
	VPOR         Y13, Y4, Y4; \
	MOVWLZX      (48+2*(g/2))(SI), R10; \
	SHRL         $(6*(g%2)), R10; \
	MOVL         R10, R11; \
	ANDL         $7, R10; \
	SHRL         $3, R11; \
	ANDL         $7, R11; \
	LEAL         1(R10)(R10*1), R10; \
	LEAL         1(R11)(R11*1), R11; \
	SCALE2(R10, R11, X5, Y5, X3); \
	IQ1W

// TILE4 adds the products of group g's decoded weights (Y2, Y4, Y5) with the
// activations at off of the four tokens (DI, DI+DX, DI+2DX, R14) to their
// int32 lanes in Y7-Y10; Y6 is scratch.
#define TILE4(off) \
	VMOVDQU    off(DI), Y6; \
	VPSIGNB    Y4, Y6, Y6; \
	VPMADDUBSW Y6, Y2, Y6; \
	VPMADDWD   Y5, Y6, Y6; \
	VPADDD     Y6, Y7, Y7; \
	VMOVDQU    off(DI)(DX*1), Y6; \
	VPSIGNB    Y4, Y6, Y6; \
	VPMADDUBSW Y6, Y2, Y6; \
	VPMADDWD   Y5, Y6, Y6; \
	VPADDD     Y6, Y8, Y8; \
	VMOVDQU    off(DI)(DX*2), Y6; \
	VPSIGNB    Y4, Y6, Y6; \
	VPMADDUBSW Y6, Y2, Y6; \
	VPMADDWD   Y5, Y6, Y6; \
	VPADDD     Y6, Y9, Y9; \
	VMOVDQU    off(R14), Y6; \
	VPSIGNB    Y4, Y6, Y6; \
	VPMADDUBSW Y6, Y2, Y6; \
	VPMADDWD   Y5, Y6, Y6; \
	VPADDD     Y6, Y10, Y10

// TOKEND is BLOCKENDD for one token of a tile: dx (a float) in X1, the
// token's Q8_K block at mem, its int32 lanes in V, its float sum at acc(SP).
#define TOKEND(mem, V, acc) \
	VMULSS       mem, X1, X3; \
	VBROADCASTSS X3, Y3; \
	VCVTDQ2PS    V, V; \
	VMOVUPS      acc(SP), Y6; \
	VFMADD231PS  Y3, V, Y6; \
	VMOVUPS      Y6, acc(SP); \
	VPXOR        V, V, V

// TILESETUP loads a tile's arguments: SI the weight row, DI and R14 the
// first and fourth token, DX their stride, CX the blocks; it clears the
// sums and loads the constants of IQSETUP.
#define TILESETUP \
	MOVQ    x+0(FP), SI; \
	MOVQ    y+8(FP), DI; \
	MOVQ    lda+16(FP), DX; \
	MOVQ    nb+24(FP), CX; \
	LEAQ    (DI)(DX*2), R14; \
	ADDQ    DX, R14; \
	VXORPS  Y0, Y0, Y0; \
	VMOVUPS Y0, 0(SP); \
	VMOVUPS Y0, 32(SP); \
	VMOVUPS Y0, 64(SP); \
	VMOVUPS Y0, 96(SP); \
	VPXOR   Y7, Y7, Y7; \
	VPXOR   Y8, Y8, Y8; \
	VPXOR   Y9, Y9, Y9; \
	VPXOR   Y10, Y10, Y10; \
	BCAST8($0x01010101, X13, Y13); \
	VMOVDQU dotIQSignBits<>(SB), Y14; \
	VMOVDQU dotIQSignShuf<>(SB), Y15

// TILERES stores hsum(acc(SP))·f at DX and advances DX by BX.
#define TILERES(acc, f) \
	VMOVUPS acc(SP), Y0; \
	IQSUM(f); \
	VMOVSS  X0, (DX); \
	ADDQ    BX, DX

// IQ1MD leaves in X1 IQ1_M's block scale d, an f16: the top nibbles of the
// four scale words at 48(SI). AX, BX are scratch.
#define IQ1MD \
	MOVWLZX 48(SI), AX; \
	SHRL    $12, AX; \
	MOVWLZX 50(SI), BX; \
	SHRL    $8, BX; \
	ANDL    $0xf0, BX; \
	ORL     BX, AX; \
	MOVWLZX 52(SI), BX; \
	SHRL    $4, BX; \
	ANDL    $0xf00, BX; \
	ORL     BX, AX; \
	MOVWLZX 54(SI), BX; \
	ANDL    $0xf000, BX; \
	ORL     BX, AX; \
	VMOVD   AX, X1

// GROUPS8 runs DEC(g) and STEP((4+32*g)) for the eight groups of a block:
// the single-row kernels with STEP = ROWSTEP, the tiles with TILE4.
#define GROUPS8(DEC, STEP) \
	DEC(0); STEP((4+32*0)); \
	DEC(1); STEP((4+32*1)); \
	DEC(2); STEP((4+32*2)); \
	DEC(3); STEP((4+32*3)); \
	DEC(4); STEP((4+32*4)); \
	DEC(5); STEP((4+32*5)); \
	DEC(6); STEP((4+32*6)); \
	DEC(7); STEP((4+32*7))

// ROWSTEP is DOT32 on the decoded group.
#define ROWSTEP(off) DOT32(off, Y2, Y4, Y5)

// TILENEXT ends a tile's block: dx (a float) in X1, the four tokens' sums
// updated, the pointers moved on by one block of size bytes.
#define TILENEXT(size) \
	TOKEND(0(DI), Y7, 0); \
	TOKEND(0(DI)(DX*1), Y8, 32); \
	TOKEND(0(DI)(DX*2), Y9, 64); \
	TOKEND(0(R14), Y10, 96); \
	ADDQ $size, SI; \
	ADDQ $292, DI; \
	ADDQ $292, R14

// TILEOUT stores the four tokens' results, each times f.
#define TILEOUT(f) \
	MOVQ out+32(FP), DX; \
	MOVQ ldo+40(FP), BX; \
	SHLQ $2, BX; \
	TILERES(0, f); \
	TILERES(32, f); \
	TILERES(64, f); \
	TILERES(96, f)

// func dotIQ2XXSQ8KAVX2(x, y *byte, nb int) float32
TEXT ·dotIQ2XXSQ8KAVX2(SB), NOSPLIT, $0-28
	IQSETUP
	LEAQ ·iq2xxsGrid(SB), R8
	LEAQ ·ksignsIQ2Bytes(SB), R9

iq2xxsloop:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	GROUPS8(DECIQ2XXS, ROWSTEP)
	BLOCKEND
	ADDQ $66, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq2xxsloop
	IQSUM($0x3e000000)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func gemmIQ2XXSQ8KAVX2(x, y *byte, lda, nb int, out *float32, ldo int)
TEXT ·gemmIQ2XXSQ8KAVX2(SB), 0, $128-48
	TILESETUP
	LEAQ ·iq2xxsGrid(SB), R8
	LEAQ ·ksignsIQ2Bytes(SB), R9

iq2xxstile:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	GROUPS8(DECIQ2XXS, TILE4)
	MOVWLZX 0(SI), AX
	VMOVD   AX, X1
	VCVTPH2PS X1, X1
	TILENEXT(66)
	DECQ CX
	JNZ  iq2xxstile
	TILEOUT($0x3e000000)
	VZEROUPPER
	RET

// func dotIQ2XSQ8KAVX2(x, y *byte, nb int) float32
TEXT ·dotIQ2XSQ8KAVX2(SB), NOSPLIT, $0-28
	IQSETUP
	LEAQ ·iq2xsGrid(SB), R8
	LEAQ ·ksignsIQ2Bytes(SB), R9

iq2xsloop:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	GROUPS8(DECIQ2XS, ROWSTEP)
	BLOCKEND
	ADDQ $74, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq2xsloop
	IQSUM($0x3e000000)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func gemmIQ2XSQ8KAVX2(x, y *byte, lda, nb int, out *float32, ldo int)
TEXT ·gemmIQ2XSQ8KAVX2(SB), 0, $128-48
	TILESETUP
	LEAQ ·iq2xsGrid(SB), R8
	LEAQ ·ksignsIQ2Bytes(SB), R9

iq2xstile:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	GROUPS8(DECIQ2XS, TILE4)
	MOVWLZX 0(SI), AX
	VMOVD   AX, X1
	VCVTPH2PS X1, X1
	TILENEXT(74)
	DECQ CX
	JNZ  iq2xstile
	TILEOUT($0x3e000000)
	VZEROUPPER
	RET

// func dotIQ2SQ8KAVX2(x, y *byte, nb int) float32
TEXT ·dotIQ2SQ8KAVX2(SB), NOSPLIT, $0-28
	IQSETUP
	LEAQ ·iq2sGrid(SB), R8

iq2sloop:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	GROUPS8(DECIQ2S, ROWSTEP)
	BLOCKEND
	ADDQ $82, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq2sloop
	IQSUM($0x3e000000)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func gemmIQ2SQ8KAVX2(x, y *byte, lda, nb int, out *float32, ldo int)
TEXT ·gemmIQ2SQ8KAVX2(SB), 0, $128-48
	TILESETUP
	LEAQ ·iq2sGrid(SB), R8

iq2stile:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	GROUPS8(DECIQ2S, TILE4)
	MOVWLZX 0(SI), AX
	VMOVD   AX, X1
	VCVTPH2PS X1, X1
	TILENEXT(82)
	DECQ CX
	JNZ  iq2stile
	TILEOUT($0x3e000000)
	VZEROUPPER
	RET

// func dotIQ3XXSQ8KAVX2(x, y *byte, nb int) float32
TEXT ·dotIQ3XXSQ8KAVX2(SB), NOSPLIT, $0-28
	IQSETUP
	LEAQ ·iq3xxsGrid(SB), R8
	LEAQ ·ksignsIQ2Bytes(SB), R9

iq3xxsloop:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	GROUPS8(DECIQ3XXS, ROWSTEP)
	BLOCKEND
	ADDQ $98, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq3xxsloop
	IQSUM($0x3e800000)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func gemmIQ3XXSQ8KAVX2(x, y *byte, lda, nb int, out *float32, ldo int)
TEXT ·gemmIQ3XXSQ8KAVX2(SB), 0, $128-48
	TILESETUP
	LEAQ ·iq3xxsGrid(SB), R8
	LEAQ ·ksignsIQ2Bytes(SB), R9

iq3xxstile:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	GROUPS8(DECIQ3XXS, TILE4)
	MOVWLZX 0(SI), AX
	VMOVD   AX, X1
	VCVTPH2PS X1, X1
	TILENEXT(98)
	DECQ CX
	JNZ  iq3xxstile
	TILEOUT($0x3e800000)
	VZEROUPPER
	RET

// func dotIQ3SQ8KAVX2(x, y *byte, nb int) float32
TEXT ·dotIQ3SQ8KAVX2(SB), NOSPLIT, $0-28
	IQSETUP
	LEAQ ·iq3sGrid(SB), R8

iq3sloop:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	GROUPS8(DECIQ3S, ROWSTEP)
	BLOCKEND
	ADDQ $110, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq3sloop
	IQSUM($0x3f800000)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func gemmIQ3SQ8KAVX2(x, y *byte, lda, nb int, out *float32, ldo int)
TEXT ·gemmIQ3SQ8KAVX2(SB), 0, $128-48
	TILESETUP
	LEAQ ·iq3sGrid(SB), R8

iq3stile:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	GROUPS8(DECIQ3S, TILE4)
	MOVWLZX 0(SI), AX
	VMOVD   AX, X1
	VCVTPH2PS X1, X1
	TILENEXT(110)
	DECQ CX
	JNZ  iq3stile
	TILEOUT($0x3f800000)
	VZEROUPPER
	RET

// func dotIQ1SQ8KAVX2(x, y *byte, nb int) float32
TEXT ·dotIQ1SQ8KAVX2(SB), NOSPLIT, $0-28
	IQSETUP
	BCAST8($0x08080808, X11, Y11)
	LEAQ ·iq1sGrid(SB), R8

iq1sloop:
	PREFETCHT0 (DOTPF+0)(SI)
	GROUPS8(DECIQ1S, ROWSTEP)
	BLOCKEND
	ADDQ $50, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq1sloop
	IQSUM($0x3e000000)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func gemmIQ1SQ8KAVX2(x, y *byte, lda, nb int, out *float32, ldo int)
TEXT ·gemmIQ1SQ8KAVX2(SB), 0, $128-48
	TILESETUP
	BCAST8($0x08080808, X11, Y11)
	LEAQ ·iq1sGrid(SB), R8

iq1stile:
	PREFETCHT0 (DOTPF+0)(SI)
	GROUPS8(DECIQ1S, TILE4)
	MOVWLZX 0(SI), AX
	VMOVD   AX, X1
	VCVTPH2PS X1, X1
	TILENEXT(50)
	DECQ CX
	JNZ  iq1stile
	TILEOUT($0x3e000000)
	VZEROUPPER
	RET

// func dotIQ1MQ8KAVX2(x, y *byte, nb int) float32
TEXT ·dotIQ1MQ8KAVX2(SB), NOSPLIT, $0-28
	IQSETUP
	BCAST8($0x08080808, X11, Y11)
	LEAQ ·iq1sGrid(SB), R8

iq1mloop:
	PREFETCHT0 (DOTPF+0)(SI)
	GROUPS8(DECIQ1M, ROWSTEP)
	IQ1MD
	BLOCKENDD
	ADDQ $56, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq1mloop
	IQSUM($0x3e000000)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func gemmIQ1MQ8KAVX2(x, y *byte, lda, nb int, out *float32, ldo int)
TEXT ·gemmIQ1MQ8KAVX2(SB), 0, $128-48
	TILESETUP
	BCAST8($0x08080808, X11, Y11)
	LEAQ ·iq1sGrid(SB), R8

iq1mtile:
	PREFETCHT0 (DOTPF+0)(SI)
	GROUPS8(DECIQ1M, TILE4)
	IQ1MD
	VCVTPH2PS X1, X1
	TILENEXT(56)
	DECQ CX
	JNZ  iq1mtile
	TILEOUT($0x3e000000)
	VZEROUPPER
	RET
