//go:build !purego

#include "textflag.h"
#include "dot_amd64.h"

// Tile kernels of the matrix products of 32-element blocks (Q8_0, Q4_0,
// Q5_0, IQ4_NL weights) with Q8_0 activations: one weight row against four
// tokens (DI, R11, R12, R13). Per token they compute exactly what the
// single-row kernels (dotq_amd64.s) do: the nb%8 leading blocks one at a
// time into the low float lane, then groups of eight blocks whose integer
// sums are reduced to one lane per block and scaled by dx·dy as the twin
// does, so every result equals that kernel's bit for bit. Each group of
// eight weight blocks is decoded once, with its eight dx, and every token
// multiplies its activations with it: into the frame with AVX2 (below),
// into registers with AVX-512 (TILE32Z further down).
//
// AVX2 frame: |w| of block k at 64k(SP), w at 64k+32(SP) (k < 8), dx at
// 512(SP), the tokens' eight-lane float accumulators at 544, 576, 608,
// 640(SP).
//
// func gemm*(x, y *byte, lda, nb int, out *float32, ldo int)

// The nibble table of IQ4_NL, in both 128-bit lanes.
DATA gemmIQ4NLTable<>+0(SB)/8, $0xF6EADDCFBFAD9881
DATA gemmIQ4NLTable<>+8(SB)/8, $0x7159453526190D01
DATA gemmIQ4NLTable<>+16(SB)/8, $0xF6EADDCFBFAD9881
DATA gemmIQ4NLTable<>+24(SB)/8, $0x7159453526190D01
GLOBL gemmIQ4NLTable<>(SB), RODATA|NOPTR, $32

// gemmBitSpread copies byte k/8 of a broadcast dword to byte k.
DATA gemmBitSpread<>+0(SB)/8, $0x0000000000000000
DATA gemmBitSpread<>+8(SB)/8, $0x0101010101010101
DATA gemmBitSpread<>+16(SB)/8, $0x0202020202020202
DATA gemmBitSpread<>+24(SB)/8, $0x0303030303030303
GLOBL gemmBitSpread<>(SB), RODATA|NOPTR, $32

// gemmBitMask selects bit k%8 in byte k.
DATA gemmBitMask<>+0(SB)/8, $0x8040201008040201
DATA gemmBitMask<>+8(SB)/8, $0x8040201008040201
DATA gemmBitMask<>+16(SB)/8, $0x8040201008040201
DATA gemmBitMask<>+24(SB)/8, $0x8040201008040201
GLOBL gemmBitMask<>(SB), RODATA|NOPTR, $32

// gemmNibShift shifts the dwords of the high 128-bit lane right by 4.
DATA gemmNibShift<>+0(SB)/8, $0
DATA gemmNibShift<>+8(SB)/8, $0
DATA gemmNibShift<>+16(SB)/8, $0x0000000400000004
DATA gemmNibShift<>+24(SB)/8, $0x0000000400000004
GLOBL gemmNibShift<>(SB), RODATA|NOPTR, $32

// NIBBLES loads 16 bytes at mem: low nibbles to the low lane of Y2, high
// nibbles to the high lane (Y14 = 0x0F bytes).
#define NIBBLES(mem) \
	VBROADCASTI128 mem, Y2; \
	VPSRLVD gemmNibShift<>(SB), Y2, Y2; \
	VPAND Y14, Y2, Y2

// Weight decoders: the signed weights of the block at SI+off into Y2, as
// the single-row kernels decode them.

// Q8_0: the bytes themselves.
#define Q80W(off) VMOVDQU off+2(SI), Y2

// Q4_0: nibble − 8 (Y13 = 8 bytes).
#define Q40W(off) \
	NIBBLES(off+2(SI)); \
	VPSUBB Y13, Y2, Y2

// IQ4_NL: table[nibble] (Y12 = table).
#define IQNLW(off) \
	NIBBLES(off+2(SI)); \
	VPSHUFB Y2, Y12, Y2

// Q5_0: nibble | (0xF0 where bit j of qh is clear) (Y13 = 0xF0 bytes).
#define Q50W(off) \
	NIBBLES(off+6(SI)); \
	VPBROADCASTD off+2(SI), Y1; \
	VPSHUFB gemmBitSpread<>(SB), Y1, Y1; \
	VPAND gemmBitMask<>(SB), Y1, Y1; \
	VPCMPEQB gemmBitMask<>(SB), Y1, Y1; \
	VPANDN Y13, Y1, Y1; \
	VPOR Y1, Y2, Y2

// Block terms from the integer block sums S and the scales DX, DY (floats),
// as the single-row kernels form them: SDD sumi·(dx·dy), SDXDY (sumi·dx)·dy.
#define SDD(DX, DY, S) \
	VMULPS    DY, DX, DX; \
	VCVTDQ2PS S, S; \
	VMULPS    DX, S, S

#define SDXDY(DX, DY, S) \
	VCVTDQ2PS S, S; \
	VMULPS    DX, S, S; \
	VMULPS    DY, S, S

// GATHER16 collects the f16 values at offset off of eight blocks of size s
// from base into X.
#define GATHER16(base, off, s, X) \
	MOVWLZX off(base), AX; \
	VMOVD   AX, X; \
	VPINSRW $1, (off+1*s)(base), X, X; \
	VPINSRW $2, (off+2*s)(base), X, X; \
	VPINSRW $3, (off+3*s)(base), X, X; \
	VPINSRW $4, (off+4*s)(base), X, X; \
	VPINSRW $5, (off+5*s)(base), X, X; \
	VPINSRW $6, (off+6*s)(base), X, X; \
	VPINSRW $7, (off+7*s)(base), X, X

// REDUCE8 turns the lane sums of eight blocks in Y4-Y11 into the eight
// block sums in Y4. Clobbers Y5, Y6.
#define REDUCE8 \
	VPHADDD    Y5, Y4, Y4; \
	VPHADDD    Y7, Y6, Y6; \
	VPHADDD    Y9, Y8, Y8; \
	VPHADDD    Y11, Y10, Y10; \
	VPHADDD    Y6, Y4, Y4; \
	VPHADDD    Y10, Y8, Y8; \
	VPERM2I128 $0x20, Y8, Y4, Y5; \
	VPERM2I128 $0x31, Y8, Y4, Y6; \
	VPADDD     Y6, Y5, Y4

// ONET adds the term of the weight block at SI and token P's block to X0
// (its upper lanes zero), as the single-row kernels' ONE, and advances both.
#define ONET(W, xs, TERM, P) \
	W(0); \
	VMOVDQU      2(P), Y3; \
	VPSIGNB      Y2, Y3, Y3; \
	VPABSB       Y2, Y2; \
	VPMADDUBSW   Y3, Y2, Y2; \
	VPMADDWD     Y15, Y2, Y4; \
	VEXTRACTI128 $1, Y4, X5; \
	VPADDD       X5, X4, X4; \
	VPSHUFD      $0x4E, X4, X5; \
	VPADDD       X5, X4, X4; \
	VPSHUFD      $0xB1, X4, X5; \
	VPADDD       X5, X4, X4; \
	MOVWLZX      0(SI), AX; \
	VMOVD        AX, X2; \
	MOVWLZX      0(P), AX; \
	VMOVD        AX, X3; \
	VCVTPH2PS    X2, X2; \
	VCVTPH2PS    X3, X3; \
	TERM(X2, X3, X4); \
	VADDSS       X4, X0, X0; \
	ADDQ         $xs, SI; \
	ADDQ         $34, P

// LEAD runs token P over the BX leading blocks of the row into its
// accumulator at acc(SP); SI ends after them.
#define LEAD(W, xs, TERM, P, acc, lbl) \
	MOVQ   x+0(FP), SI; \
	VXORPS Y0, Y0, Y0; \
	MOVQ   BX, R8; \
lbl: \
	ONET(W, xs, TERM, P); \
	DECQ   R8; \
	JNZ    lbl; \
	VMOVUPS Y0, acc(SP)

// DECODE8 writes the eight weight blocks at SI to the frame: w, |w| and dx.
#define DECODE8(W, xs) \
	W(0*xs); VMOVDQU Y2, 32(SP); VPABSB Y2, Y2; VMOVDQU Y2, 0(SP); \
	W(1*xs); VMOVDQU Y2, 96(SP); VPABSB Y2, Y2; VMOVDQU Y2, 64(SP); \
	W(2*xs); VMOVDQU Y2, 160(SP); VPABSB Y2, Y2; VMOVDQU Y2, 128(SP); \
	W(3*xs); VMOVDQU Y2, 224(SP); VPABSB Y2, Y2; VMOVDQU Y2, 192(SP); \
	W(4*xs); VMOVDQU Y2, 288(SP); VPABSB Y2, Y2; VMOVDQU Y2, 256(SP); \
	W(5*xs); VMOVDQU Y2, 352(SP); VPABSB Y2, Y2; VMOVDQU Y2, 320(SP); \
	W(6*xs); VMOVDQU Y2, 416(SP); VPABSB Y2, Y2; VMOVDQU Y2, 384(SP); \
	W(7*xs); VMOVDQU Y2, 480(SP); VPABSB Y2, Y2; VMOVDQU Y2, 448(SP); \
	GATHER16(SI, 0, xs, X2); \
	VCVTPH2PS X2, Y2; \
	VMOVUPS Y2, 512(SP)

// LANEST leaves in V the eight int32 lane sums of decoded block k times
// token P's block k (the single-row kernels' LANES).
#define LANEST(P, k, V) \
	VMOVDQU    (k*34+2)(P), Y3; \
	VPSIGNB    (64*k+32)(SP), Y3, Y3; \
	VMOVDQU    (64*k)(SP), Y2; \
	VPMADDUBSW Y3, Y2, Y2; \
	VPMADDWD   Y15, Y2, V

// TOKEN8 adds the terms of token P's eight blocks to its accumulator.
#define TOKEN8(L, TERM, P, acc) \
	L(P, 0, Y4); \
	L(P, 1, Y5); \
	L(P, 2, Y6); \
	L(P, 3, Y7); \
	L(P, 4, Y8); \
	L(P, 5, Y9); \
	L(P, 6, Y10); \
	L(P, 7, Y11); \
	REDUCE8; \
	GATHER16(P, 0, 34, X3); \
	VCVTPH2PS X3, Y3; \
	VMOVUPS   512(SP), Y2; \
	TERM(Y2, Y3, Y4); \
	VMOVUPS   acc(SP), Y0; \
	VADDPS    Y4, Y0, Y0; \
	VMOVUPS   Y0, acc(SP)

// RES32 stores the sum of the accumulator's lanes at DX and advances DX.
#define RES32(acc) \
	VMOVUPS acc(SP), Y0; \
	HSUM(Y0, X0, X1); \
	VMOVSS  X0, (DX); \
	ADDQ    BX, DX

// TILE32 is the body of an AVX2 kernel: W decodes, xs is the weight block
// size, TERM forms block terms, L computes lane sums; the rest are labels.
#define TILE32(W, xs, TERM, L, l0, l1, l2, l3, groups, loop, done) \
	MOVQ    x+0(FP), SI; \
	MOVQ    y+8(FP), DI; \
	MOVQ    lda+16(FP), AX; \
	MOVQ    nb+24(FP), CX; \
	LEAQ    (DI)(AX*1), R11; \
	LEAQ    (DI)(AX*2), R12; \
	LEAQ    (R11)(AX*2), R13; \
	MOVQ    CX, BX; \
	ANDQ    $7, BX; \
	SHRQ    $3, CX; \
	ONES16(Y15); \
	VXORPS  Y0, Y0, Y0; \
	VMOVUPS Y0, 544(SP); \
	VMOVUPS Y0, 576(SP); \
	VMOVUPS Y0, 608(SP); \
	VMOVUPS Y0, 640(SP); \
	TESTQ   BX, BX; \
	JZ      groups; \
	LEAD(W, xs, TERM, DI, 544, l0); \
	LEAD(W, xs, TERM, R11, 576, l1); \
	LEAD(W, xs, TERM, R12, 608, l2); \
	LEAD(W, xs, TERM, R13, 640, l3); \
groups: \
	TESTQ   CX, CX; \
	JZ      done; \
loop: \
	DECODE8(W, xs); \
	TOKEN8(L, TERM, DI, 544); \
	TOKEN8(L, TERM, R11, 576); \
	TOKEN8(L, TERM, R12, 608); \
	TOKEN8(L, TERM, R13, 640); \
	ADDQ    $(8*xs), SI; \
	ADDQ    $272, DI; \
	ADDQ    $272, R11; \
	ADDQ    $272, R12; \
	ADDQ    $272, R13; \
	DECQ    CX; \
	JNZ     loop; \
done: \
	MOVQ    out+32(FP), DX; \
	MOVQ    ldo+40(FP), BX; \
	SHLQ    $2, BX; \
	RES32(544); \
	RES32(576); \
	RES32(608); \
	RES32(640); \
	VZEROUPPER; \
	RET

// AVX-512 VNNI: the eight blocks of a group are paired (k, k+4) in 512-bit
// registers: |w| in Z16-Z19, the signs of w in K1-K4, dx in Y28. Per token
// the activation pairs are negated where w < 0 (VPSIGNB's effect; where
// w = 0 the product is zero either way), multiplied with VPDPBUSD into
// Z20-Z23 and reduced by an unpack tree to the eight block sums, lane k =
// block k; dy comes from a gather. The integer sums equal the single-row
// kernel's and every float operation is the same. Accumulators Y8-Y11.

// gemmDyIdx holds the byte offsets of the eight d of a group of Q8_0 blocks.
DATA gemmDyIdx<>+0(SB)/8, $0x0000002200000000
DATA gemmDyIdx<>+8(SB)/8, $0x0000006600000044
DATA gemmDyIdx<>+16(SB)/8, $0x000000AA00000088
DATA gemmDyIdx<>+24(SB)/8, $0x000000EE000000CC
GLOBL gemmDyIdx<>(SB), RODATA|NOPTR, $32

// PAIRZ decodes weight blocks k and k+4 into |w| (ABS) and their signs (K).
#define PAIRZ(W, xs, k, K, ABS) \
	W(k*xs); \
	VMOVDQA      Y2, Y6; \
	W((k+4)*xs); \
	VINSERTI64X4 $1, Y2, Z6, Z6; \
	VPMOVB2M     Z6, K; \
	VPABSB       Z6, ABS

// DECZ decodes the group of eight weight blocks at SI.
#define DECZ(W, xs) \
	PAIRZ(W, xs, 0, K1, Z16); \
	PAIRZ(W, xs, 1, K2, Z17); \
	PAIRZ(W, xs, 2, K3, Z18); \
	PAIRZ(W, xs, 3, K4, Z19); \
	GATHER16(SI, 0, xs, X2); \
	VCVTPH2PS X2, Y28

// LANEZ leaves in V the lanes of the block pair (k, k+4) of token P.
#define LANEZ(P, k, K, ABS, V) \
	VMOVDQU      (k*34+2)(P), Y3; \
	VINSERTI64X4 $1, (k*34+138)(P), Z3, Z3; \
	VPSUBB       Z3, Z31, K, Z3; \
	VPXORD       V, V, V; \
	VPDPBUSD     Z3, ABS, V

// TOKZ adds the terms of token P's eight blocks to ACC.
#define TOKZ(TERM, P, ACC) \
	LANEZ(P, 0, K1, Z16, Z20); \
	LANEZ(P, 1, K2, Z17, Z21); \
	LANEZ(P, 2, K3, Z18, Z22); \
	LANEZ(P, 3, K4, Z19, Z23); \
	VPUNPCKLDQ  Z21, Z20, Z24; \
	VPUNPCKHDQ  Z21, Z20, Z25; \
	VPADDD      Z25, Z24, Z24; \
	VPUNPCKLDQ  Z23, Z22, Z26; \
	VPUNPCKHDQ  Z23, Z22, Z27; \
	VPADDD      Z27, Z26, Z26; \
	VPUNPCKLQDQ Z26, Z24, Z25; \
	VPUNPCKHQDQ Z26, Z24, Z27; \
	VPADDD      Z27, Z25, Z25; \
	VSHUFI32X4  $0xB1, Z25, Z25, Z27; \
	VPADDD      Z27, Z25, Z25; \
	VSHUFI32X4  $0x08, Z25, Z25, Z25; \
	KXNORW      K5, K5, K5; \
	VPGATHERDD  (P)(Y30*1), K5, Y26; \
	VPMOVDW     Y26, X26; \
	VCVTPH2PS   X26, Y26; \
	VMOVAPS     Y28, Y27; \
	TERM(Y27, Y26, Y25); \
	VADDPS      Y25, ACC, ACC

// LEADZ runs token P over the BX leading blocks of the row into ACC.
#define LEADZ(W, xs, TERM, P, ACC, lbl) \
	MOVQ   x+0(FP), SI; \
	VXORPS Y0, Y0, Y0; \
	MOVQ   BX, R8; \
lbl: \
	ONET(W, xs, TERM, P); \
	DECQ   R8; \
	JNZ    lbl; \
	VMOVAPS Y0, ACC

// RESZ stores the sum of ACC's lanes at DX and advances DX.
#define RESZ(ACC) \
	VMOVAPS ACC, Y0; \
	HSUM(Y0, X0, X1); \
	VMOVSS  X0, (DX); \
	ADDQ    BX, DX

// TILE32Z is the body of an AVX-512 kernel (see TILE32).
#define TILE32Z(W, xs, TERM, l0, l1, l2, l3, groups, loop, done) \
	MOVQ    x+0(FP), SI; \
	MOVQ    y+8(FP), DI; \
	MOVQ    lda+16(FP), AX; \
	MOVQ    nb+24(FP), CX; \
	LEAQ    (DI)(AX*1), R11; \
	LEAQ    (DI)(AX*2), R12; \
	LEAQ    (R11)(AX*2), R13; \
	MOVQ    CX, BX; \
	ANDQ    $7, BX; \
	SHRQ    $3, CX; \
	ONES16(Y15); \
	VPXORD  Z31, Z31, Z31; \
	VMOVDQU32 gemmDyIdx<>(SB), Y30; \
	VXORPS  Y8, Y8, Y8; \
	VXORPS  Y9, Y9, Y9; \
	VXORPS  Y10, Y10, Y10; \
	VXORPS  Y11, Y11, Y11; \
	TESTQ   BX, BX; \
	JZ      groups; \
	LEADZ(W, xs, TERM, DI, Y8, l0); \
	LEADZ(W, xs, TERM, R11, Y9, l1); \
	LEADZ(W, xs, TERM, R12, Y10, l2); \
	LEADZ(W, xs, TERM, R13, Y11, l3); \
groups: \
	TESTQ   CX, CX; \
	JZ      done; \
loop: \
	DECZ(W, xs); \
	TOKZ(TERM, DI, Y8); \
	TOKZ(TERM, R11, Y9); \
	TOKZ(TERM, R12, Y10); \
	TOKZ(TERM, R13, Y11); \
	ADDQ    $(8*xs), SI; \
	ADDQ    $272, DI; \
	ADDQ    $272, R11; \
	ADDQ    $272, R12; \
	ADDQ    $272, R13; \
	DECQ    CX; \
	JNZ     loop; \
done: \
	MOVQ    out+32(FP), DX; \
	MOVQ    ldo+40(FP), BX; \
	SHLQ    $2, BX; \
	RESZ(Y8); \
	RESZ(Y9); \
	RESZ(Y10); \
	RESZ(Y11); \
	VZEROUPPER; \
	RET

// func gemmQ80Q80AVX2(x, y *byte, lda, nb int, out *float32, ldo int)
TEXT ·gemmQ80Q80AVX2(SB), 0, $672-48
	TILE32(Q80W, 34, SDD, LANEST, q80a, q80b, q80c, q80d, q80g, q80l, q80e)

// func gemmQ80Q80AVX512(x, y *byte, lda, nb int, out *float32, ldo int)
TEXT ·gemmQ80Q80AVX512(SB), NOSPLIT, $0-48
	TILE32Z(Q80W, 34, SDD, q80va, q80vb, q80vc, q80vd, q80vg, q80vl, q80ve)

// func gemmQ40Q80AVX2(x, y *byte, lda, nb int, out *float32, ldo int)
TEXT ·gemmQ40Q80AVX2(SB), 0, $672-48
	BCAST8($0x0F0F0F0F, X14, Y14)
	BCAST8($0x08080808, X13, Y13)
	TILE32(Q40W, 18, SDXDY, LANEST, q40a, q40b, q40c, q40d, q40g, q40l, q40e)

// func gemmQ40Q80AVX512(x, y *byte, lda, nb int, out *float32, ldo int)
TEXT ·gemmQ40Q80AVX512(SB), NOSPLIT, $0-48
	BCAST8($0x0F0F0F0F, X14, Y14)
	BCAST8($0x08080808, X13, Y13)
	TILE32Z(Q40W, 18, SDXDY, q40va, q40vb, q40vc, q40vd, q40vg, q40vl, q40ve)

// func gemmQ50Q80AVX2(x, y *byte, lda, nb int, out *float32, ldo int)
TEXT ·gemmQ50Q80AVX2(SB), 0, $672-48
	BCAST8($0x0F0F0F0F, X14, Y14)
	BCAST8($0xF0F0F0F0, X13, Y13)
	TILE32(Q50W, 22, SDD, LANEST, q50a, q50b, q50c, q50d, q50g, q50l, q50e)

// func gemmQ50Q80AVX512(x, y *byte, lda, nb int, out *float32, ldo int)
TEXT ·gemmQ50Q80AVX512(SB), NOSPLIT, $0-48
	BCAST8($0x0F0F0F0F, X14, Y14)
	BCAST8($0xF0F0F0F0, X13, Y13)
	TILE32Z(Q50W, 22, SDD, q50va, q50vb, q50vc, q50vd, q50vg, q50vl, q50ve)

// func gemmIQ4NLQ80AVX2(x, y *byte, lda, nb int, out *float32, ldo int)
TEXT ·gemmIQ4NLQ80AVX2(SB), 0, $672-48
	BCAST8($0x0F0F0F0F, X14, Y14)
	VMOVDQU gemmIQ4NLTable<>(SB), Y12
	TILE32(IQNLW, 18, SDD, LANEST, iqnla, iqnlb, iqnlc, iqnld, iqnlg, iqnll, iqnle)

// func gemmIQ4NLQ80AVX512(x, y *byte, lda, nb int, out *float32, ldo int)
TEXT ·gemmIQ4NLQ80AVX512(SB), NOSPLIT, $0-48
	BCAST8($0x0F0F0F0F, X14, Y14)
	VMOVDQU gemmIQ4NLTable<>(SB), Y12
	TILE32Z(IQNLW, 18, SDD, iqnlva, iqnlvb, iqnlvc, iqnlvd, iqnlvg, iqnlvl, iqnlve)
