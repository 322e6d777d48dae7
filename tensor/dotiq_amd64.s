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

// KSIGN4 makes in R12 the 32 sign bits of four 7-bit patterns at bits 0,
// 7, 14 and 21 of R13 (through the table at R9); AX is scratch.
#define KSIGN4 \
	MOVL    R13, AX; \
	ANDL    $127, AX; \
	MOVBLZX (R9)(AX*1), R12; \
	MOVL    R13, AX; \
	SHRL    $7, AX; \
	ANDL    $127, AX; \
	MOVBLZX (R9)(AX*1), AX; \
	SHLL    $8, AX; \
	ORL     AX, R12; \
	MOVL    R13, AX; \
	SHRL    $14, AX; \
	ANDL    $127, AX; \
	MOVBLZX (R9)(AX*1), AX; \
	SHLL    $16, AX; \
	ORL     AX, R12; \
	MOVL    R13, AX; \
	SHRL    $21, AX; \
	ANDL    $127, AX; \
	MOVBLZX (R9)(AX*1), AX; \
	SHLL    $24, AX; \
	ORL     AX, R12

// IQ2_XXS group g: indices at 2+8g, the u32 of signs and scale at 6+8g.
#define GROUPIQ2XXS(g) \
	MOVBQZX (2+8*g)(SI), AX; \
	MOVBQZX (3+8*g)(SI), R10; \
	MOVBQZX (4+8*g)(SI), R11; \
	MOVBQZX (5+8*g)(SI), R12; \
	GRID8(AX, R10, R11, R12, X2, Y2, X3); \
	MOVL    (6+8*g)(SI), R13; \
	KSIGN4; \
	SIGNS(R12, X4, Y4); \
	MOVL    R13, AX; \
	SHRL    $28, AX; \
	LEAL    1(AX)(AX*1), AX; \
	SCALE1(AX, X5, Y5); \
	DOT32((4+32*g), Y2, Y4, Y5)

// func dotIQ2XXSQ8KAVX2(x, y *byte, nb int) float32
TEXT ·dotIQ2XXSQ8KAVX2(SB), NOSPLIT, $0-28
	IQSETUP
	LEAQ ·iq2xxsGrid(SB), R8
	LEAQ ·ksignsIQ2(SB), R9

iq2xxsloop:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	GROUPIQ2XXS(0)
	GROUPIQ2XXS(1)
	GROUPIQ2XXS(2)
	GROUPIQ2XXS(3)
	GROUPIQ2XXS(4)
	GROUPIQ2XXS(5)
	GROUPIQ2XXS(6)
	GROUPIQ2XXS(7)
	BLOCKEND
	ADDQ $66, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq2xxsloop
	IQSUM($0x3e000000)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// IQ2XS1 takes u16 l of IQ2_XS group g: its 9-bit index into I and its
// sign byte into bits 8l..8l+7 of BX.
#define IQ2XS1(g, l, I) \
	MOVWLZX (2+8*g+2*l)(SI), R13; \
	MOVL    R13, I; \
	ANDL    $511, I; \
	SHRL    $9, R13; \
	MOVBLZX (R9)(R13*1), R13; \
	SHLL    $(8*l), R13; \
	ORL     R13, BX

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

#define GROUPIQ2XS(g) \
	XORL    BX, BX; \
	IQ2XS1(g, 0, AX); \
	IQ2XS1(g, 1, R10); \
	IQ2XS1(g, 2, R11); \
	IQ2XS1(g, 3, R12); \
	GRID8(AX, R10, R11, R12, X2, Y2, X3); \
	SIGNS(BX, X4, Y4); \
	SCALES2(66+g); \
	DOT32((4+32*g), Y2, Y4, Y5)

// func dotIQ2XSQ8KAVX2(x, y *byte, nb int) float32
TEXT ·dotIQ2XSQ8KAVX2(SB), NOSPLIT, $0-28
	IQSETUP
	LEAQ ·iq2xsGrid(SB), R8
	LEAQ ·ksignsIQ2(SB), R9

iq2xsloop:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	GROUPIQ2XS(0)
	GROUPIQ2XS(1)
	GROUPIQ2XS(2)
	GROUPIQ2XS(3)
	GROUPIQ2XS(4)
	GROUPIQ2XS(5)
	GROUPIQ2XS(6)
	GROUPIQ2XS(7)
	BLOCKEND
	ADDQ $74, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq2xsloop
	IQSUM($0x3e000000)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// IQ2S1 makes in I the 10-bit index l of IQ2_S group g: qs[4g+l] and two
// bits of the group's qh byte (in R13) at 2l.
#define IQ2S1(g, l, I) \
	MOVBLZX (2+4*g+l)(SI), I; \
	MOVL    R13, BX; \
	SHLL    $(8-2*l), BX; \
	ANDL    $0x300, BX; \
	ORL     BX, I

#define GROUPIQ2S(g) \
	MOVBLZX (66+g)(SI), R13; \
	IQ2S1(g, 0, AX); \
	IQ2S1(g, 1, R10); \
	IQ2S1(g, 2, R11); \
	IQ2S1(g, 3, R12); \
	GRID8(AX, R10, R11, R12, X2, Y2, X3); \
	MOVL    (34+4*g)(SI), BX; \
	SIGNS(BX, X4, Y4); \
	SCALES2(74+g); \
	DOT32((4+32*g), Y2, Y4, Y5)

// func dotIQ2SQ8KAVX2(x, y *byte, nb int) float32
TEXT ·dotIQ2SQ8KAVX2(SB), NOSPLIT, $0-28
	IQSETUP
	LEAQ ·iq2sGrid(SB), R8

iq2sloop:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	GROUPIQ2S(0)
	GROUPIQ2S(1)
	GROUPIQ2S(2)
	GROUPIQ2S(3)
	GROUPIQ2S(4)
	GROUPIQ2S(5)
	GROUPIQ2S(6)
	GROUPIQ2S(7)
	BLOCKEND
	ADDQ $82, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq2sloop
	IQSUM($0x3e000000)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// GRID4 gathers eight 4-byte entries of the table at R8 into the dwords of
// Y2 (X2 its low half): IDX(k), a macro per type, leaves index k in AX. X3
// is scratch.
#define GRID4XXS \
	IDXIQ3XXS(0); \
	VMOVD       (R8)(AX*4), X2; \
	IDXIQ3XXS(1); \
	VPINSRD     $1, (R8)(AX*4), X2, X2; \
	IDXIQ3XXS(2); \
	VPINSRD     $2, (R8)(AX*4), X2, X2; \
	IDXIQ3XXS(3); \
	VPINSRD     $3, (R8)(AX*4), X2, X2; \
	IDXIQ3XXS(4); \
	VMOVD       (R8)(AX*4), X3; \
	IDXIQ3XXS(5); \
	VPINSRD     $1, (R8)(AX*4), X3, X3; \
	IDXIQ3XXS(6); \
	VPINSRD     $2, (R8)(AX*4), X3, X3; \
	IDXIQ3XXS(7); \
	VPINSRD     $3, (R8)(AX*4), X3, X3; \
	VINSERTI128 $1, X3, Y2, Y2

#define GRID4S \
	IDXIQ3S(0); \
	VMOVD       (R8)(AX*4), X2; \
	IDXIQ3S(1); \
	VPINSRD     $1, (R8)(AX*4), X2, X2; \
	IDXIQ3S(2); \
	VPINSRD     $2, (R8)(AX*4), X2, X2; \
	IDXIQ3S(3); \
	VPINSRD     $3, (R8)(AX*4), X2, X2; \
	IDXIQ3S(4); \
	VMOVD       (R8)(AX*4), X3; \
	IDXIQ3S(5); \
	VPINSRD     $1, (R8)(AX*4), X3, X3; \
	IDXIQ3S(6); \
	VPINSRD     $2, (R8)(AX*4), X3, X3; \
	IDXIQ3S(7); \
	VPINSRD     $3, (R8)(AX*4), X3, X3; \
	VINSERTI128 $1, X3, Y2, Y2

// IQ3_XXS: index k of the group at DX (2+8g(SI)).
#define IDXIQ3XXS(k) MOVBLZX k(DX), AX

// IQ3_S: index k of the group is qs[k] (at DX) and bit k of the group's qh
// byte (R13) as bit 8.
#define IDXIQ3S(k) \
	MOVBLZX k(DX), AX; \
	MOVL    R13, BX; \
	SHLL    $(8-k), BX; \
	ANDL    $256, BX; \
	ORL     BX, AX

#define GROUPIQ3XXS(g) \
	LEAQ    (2+8*g)(SI), DX; \
	GRID4XXS; \
	MOVL    (66+4*g)(SI), R13; \
	KSIGN4; \
	SIGNS(R12, X4, Y4); \
	MOVL    R13, AX; \
	SHRL    $28, AX; \
	LEAL    1(AX)(AX*1), AX; \
	SCALE1(AX, X5, Y5); \
	DOT32((4+32*g), Y2, Y4, Y5)

// func dotIQ3XXSQ8KAVX2(x, y *byte, nb int) float32
TEXT ·dotIQ3XXSQ8KAVX2(SB), NOSPLIT, $0-28
	IQSETUP
	LEAQ ·iq3xxsGrid(SB), R8
	LEAQ ·ksignsIQ2(SB), R9

iq3xxsloop:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	GROUPIQ3XXS(0)
	GROUPIQ3XXS(1)
	GROUPIQ3XXS(2)
	GROUPIQ3XXS(3)
	GROUPIQ3XXS(4)
	GROUPIQ3XXS(5)
	GROUPIQ3XXS(6)
	GROUPIQ3XXS(7)
	BLOCKEND
	ADDQ $98, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq3xxsloop
	IQSUM($0x3e800000)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

#define GROUPIQ3S(g) \
	LEAQ    (2+8*g)(SI), DX; \
	MOVBLZX (66+g)(SI), R13; \
	GRID4S; \
	MOVL    (74+4*g)(SI), BX; \
	SIGNS(BX, X4, Y4); \
	MOVBLZX (106+g/2)(SI), AX; \
	SHRL    $(4*(g%2)), AX; \
	ANDL    $15, AX; \
	LEAL    1(AX)(AX*1), AX; \
	SCALE1(AX, X5, Y5); \
	DOT32((4+32*g), Y2, Y4, Y5)

// func dotIQ3SQ8KAVX2(x, y *byte, nb int) float32
TEXT ·dotIQ3SQ8KAVX2(SB), NOSPLIT, $0-28
	IQSETUP
	LEAQ ·iq3sGrid(SB), R8

iq3sloop:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	GROUPIQ3S(0)
	GROUPIQ3S(1)
	GROUPIQ3S(2)
	GROUPIQ3S(3)
	GROUPIQ3S(4)
	GROUPIQ3S(5)
	GROUPIQ3S(6)
	GROUPIQ3S(7)
	BLOCKEND
	ADDQ $110, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq3sloop
	IQSUM($0x3f800000)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// IQ1DOT adds the products of the group's 32 activations at off(DI) with
// 8·(grid + δ): grid bytes (−1/0/+1) in Y2, δ as ±1 bytes in Y4, the int16
// scales in Y5. Y11 holds bytes of 8; Y3, Y6 are scratch.
#define IQ1DOT(off) \
	VPSIGNB    Y2, Y11, Y3; \
	VPADDB     Y4, Y3, Y3; \
	VMOVDQU    off(DI), Y6; \
	VPSIGNB    Y3, Y6, Y6; \
	VPABSB     Y3, Y3; \
	VPMADDUBSW Y6, Y3, Y6; \
	VPMADDWD   Y5, Y6, Y6; \
	VPADDD     Y6, Y12, Y12

// IQ1S1 makes in I the 11-bit index l of IQ1_S group g: qs[4g+l] and
// three bits of the group's qh word (R13) at 3l.
#define IQ1S1(g, l, I) \
	MOVBLZX (2+4*g+l)(SI), I; \
	MOVL    R13, BX; \
	SHRL    $(3*l), BX; \
	ANDL    $7, BX; \
	SHLL    $8, BX; \
	ORL     BX, I

#define GROUPIQ1S(g) \
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
	IQ1DOT((4+32*g))

// func dotIQ1SQ8KAVX2(x, y *byte, nb int) float32
TEXT ·dotIQ1SQ8KAVX2(SB), NOSPLIT, $0-28
	IQSETUP
	BCAST8($0x08080808, X11, Y11)
	LEAQ ·iq1sGrid(SB), R8

iq1sloop:
	PREFETCHT0 (DOTPF+0)(SI)
	GROUPIQ1S(0)
	GROUPIQ1S(1)
	GROUPIQ1S(2)
	GROUPIQ1S(3)
	GROUPIQ1S(4)
	GROUPIQ1S(5)
	GROUPIQ1S(6)
	GROUPIQ1S(7)
	BLOCKEND
	ADDQ $50, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq1sloop
	IQSUM($0x3e000000)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// IQ1M1 makes in I the 11-bit index l of IQ1_M group g: qs[4g+l] and bits
// 4l..4l+2 of the group's two qh bytes (R13).
#define IQ1M1(g, l, I) \
	MOVBLZX (4*g+l)(SI), I; \
	MOVL    R13, BX; \
	SHRL    $(4*l), BX; \
	ANDL    $7, BX; \
	SHLL    $8, BX; \
	ORL     BX, I

// GROUPIQ1M: the δ signs of group g are bits 3, 7 of its qh bytes (Y9, Y10
// spread them); its 3-bit scales are bits 6(g%2) and 6(g%2)+3 of scale word
// g/2.
#define GROUPIQ1M(g) \
	MOVWLZX (32+2*g)(SI), R13; \
	IQ1M1(g, 0, AX); \
	IQ1M1(g, 1, R10); \
	IQ1M1(g, 2, R11); \
	IQ1M1(g, 3, R12); \
	GRID8(AX, R10, R11, R12, X2, Y2, X3); \
	VMOVD        R13, X4; \
	VPBROADCASTW X4, Y4; \
	VPSHUFB      Y9, Y4, Y4; \
	VPAND        Y10, Y4, Y4; \
	VPCMPEQB     Y10, Y4, Y4; \
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
	IQ1DOT((4+32*g))

// func dotIQ1MQ8KAVX2(x, y *byte, nb int) float32
TEXT ·dotIQ1MQ8KAVX2(SB), NOSPLIT, $0-28
	IQSETUP
	BCAST8($0x08080808, X11, Y11)
	VMOVDQU dotIQ1MDeltaShuf<>(SB), Y9
	VMOVDQU dotIQ1MDeltaBits<>(SB), Y10
	LEAQ    ·iq1sGrid(SB), R8

iq1mloop:
	PREFETCHT0 (DOTPF+0)(SI)
	GROUPIQ1M(0)
	GROUPIQ1M(1)
	GROUPIQ1M(2)
	GROUPIQ1M(3)
	GROUPIQ1M(4)
	GROUPIQ1M(5)
	GROUPIQ1M(6)
	GROUPIQ1M(7)

	// d: the top nibbles of the four scale words, an f16.
	MOVWLZX 48(SI), AX
	SHRL    $12, AX
	MOVWLZX 50(SI), BX
	SHRL    $8, BX
	ANDL    $0xf0, BX
	ORL     BX, AX
	MOVWLZX 52(SI), BX
	SHRL    $4, BX
	ANDL    $0xf00, BX
	ORL     BX, AX
	MOVWLZX 54(SI), BX
	ANDL    $0xf000, BX
	ORL     BX, AX
	VMOVD   AX, X1
	BLOCKENDD
	ADDQ $56, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iq1mloop
	IQSUM($0x3e000000)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET
