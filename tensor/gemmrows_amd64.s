//go:build !purego

#include "textflag.h"
#include "dot_amd64.h"

// Four weight rows at once for the short rows (nb < 8 blocks) of Q8_0 and
// Q5_0 weights, the one-block path of dotQ80Q80AVX512 and dotQ50Q80AVX512
// (dotq_amd64.s) on four rows: the lane sums of each row's block reduce to
// its integer sum, the term sumi·(dx·dy) is formed per row in a lane of X4,
// added to that row's lane of X0 in block order, and the dot kernel's final
// horizontal sum (the row's total plus zeros) becomes one addition of +0.
// So each row's result is the single-row kernel's, bit for bit. These rows
// are MLA's attn_k_b (192 wide: 6 blocks), where a call per row cost more
// than its arithmetic.
//
// Each call prefetches the four rows DOTPF bytes ahead (the next calls'),
// as the single-row kernels do as they go.
//
// Registers: SI, R8, R9, R10 the four rows, DI activations, CX blocks,
// X0 the four sums, Y12 the block's activations, Y13/Y14 Q5_0 constants.

// Q5_0 weights of the block at base: as Q50W in dotq_amd64.s.
#define Q50WB(base) \
	VBROADCASTI128 6(base), Y2; \
	VPSRLVD dotNibShift4<>(SB), Y2, Y2; \
	VPAND Y14, Y2, Y2; \
	VPBROADCASTD 2(base), Y1; \
	VPSHUFB dotBitSpread4<>(SB), Y1, Y1; \
	VPAND dotBitMask4<>(SB), Y1, Y1; \
	VPCMPEQB dotBitMask4<>(SB), Y1, Y1; \
	VPANDN Y13, Y1, Y1; \
	VPOR Y1, Y2, Y2

// Q8_0 weights of the block at base.
#define Q80WB(base) VMOVDQU 2(base), Y2

// ROWL leaves in V the eight int32 lane sums of the row's block at base
// times the activations Y12 (LANESVNNI).
#define ROWL(W, base, V) \
	W(base); \
	VPSIGNB Y2, Y12, Y3; \
	VPABSB Y2, Y2; \
	VPXOR V, V, V; \
	VPDPBUSD Y3, Y2, V

// DX4 gathers the f16 scales of the block of the four rows SI, R8, R9,
// R10 into the floats of X.
#define DX4(X) \
	MOVWLZX   0(SI), AX; \
	VMOVD     AX, X; \
	VPINSRW   $1, 0(R8), X, X; \
	VPINSRW   $2, 0(R9), X, X; \
	VPINSRW   $3, 0(R10), X, X; \
	VCVTPH2PS X, X

// NEXT4ROWS advances the four row pointers by a block of xs bytes.
#define NEXT4ROWS(xs) \
	ADDQ $xs, SI; \
	ADDQ $xs, R8; \
	ADDQ $xs, R9; \
	ADDQ $xs, R10

// PREFETCH4ROWS prefetches the bytes of the next four rows (DOTPF ahead of
// the four at SI, BX bytes apart), with P and END as scratch.
#define PREFETCH4ROWS(lbl, P, END) \
	LEAQ (R10)(BX*1), END; \
	MOVQ SI, P; \
lbl: \
	PREFETCHT0 DOTPF(P); \
	ADDQ       $64, P; \
	CMPQ       P, END; \
	JB         lbl

// BLOCK4 adds the four rows' terms of one block to X0 and advances.
#define BLOCK4(W, xs) \
	VMOVDQU      2(DI), Y12; \
	ROWL(W, SI, Y4); \
	ROWL(W, R8, Y5); \
	ROWL(W, R9, Y6); \
	ROWL(W, R10, Y7); \
	VPHADDD      Y5, Y4, Y4; \
	VPHADDD      Y7, Y6, Y6; \
	VPHADDD      Y6, Y4, Y4; \
	VEXTRACTI128 $1, Y4, X5; \
	VPADDD       X5, X4, X4; \
	DX4(X2); \
	VPBROADCASTW 0(DI), X3; \
	VCVTPH2PS    X3, X3; \
	VMULPS       X3, X2, X2; \
	VCVTDQ2PS    X4, X4; \
	VMULPS       X2, X4, X4; \
	VADDPS       X4, X0, X0; \
	NEXT4ROWS(xs); \
	ADDQ         $34, DI

#define ROWS4PROLOGUE \
	MOVQ   x+0(FP), SI; \
	MOVQ   ldw+8(FP), BX; \
	MOVQ   y+16(FP), DI; \
	MOVQ   nb+24(FP), CX; \
	MOVQ   out+32(FP), DX; \
	LEAQ   (SI)(BX*1), R8; \
	LEAQ   (R8)(BX*1), R9; \
	LEAQ   (R9)(BX*1), R10; \
	VXORPS X0, X0, X0

#define ROWS4EPILOGUE \
	VXORPS  X1, X1, X1; \
	VADDPS  X1, X0, X0; \
	VMOVUPS X0, (DX); \
	VZEROUPPER; \
	RET

DATA dotBitSpread4<>+0(SB)/8, $0x0000000000000000
DATA dotBitSpread4<>+8(SB)/8, $0x0101010101010101
DATA dotBitSpread4<>+16(SB)/8, $0x0202020202020202
DATA dotBitSpread4<>+24(SB)/8, $0x0303030303030303
GLOBL dotBitSpread4<>(SB), RODATA|NOPTR, $32

DATA dotBitMask4<>+0(SB)/8, $0x8040201008040201
DATA dotBitMask4<>+8(SB)/8, $0x8040201008040201
DATA dotBitMask4<>+16(SB)/8, $0x8040201008040201
DATA dotBitMask4<>+24(SB)/8, $0x8040201008040201
GLOBL dotBitMask4<>(SB), RODATA|NOPTR, $32

DATA dotNibShift4<>+0(SB)/8, $0
DATA dotNibShift4<>+8(SB)/8, $0
DATA dotNibShift4<>+16(SB)/8, $0x0000000400000004
DATA dotNibShift4<>+24(SB)/8, $0x0000000400000004
GLOBL dotNibShift4<>(SB), RODATA|NOPTR, $32

// Four rows against four tokens (DI, R11, R12, R13, lda apart): each row's
// block is decoded once for the four tokens, and the scales dx of the four
// rows gathered once. Per token the integer sums, the float terms and
// their order are BLOCK4's, so every result is rows4's, which is the
// single-row kernel's, bit for bit. A batched decode step multiplies
// every head's attn_k_b with all its tokens' queries.
//
// Registers: Y4-Y7 the four rows' weights, Y8-Y11 their magnitudes, Y16-Y19
// the lane sums of one token, X20-X23 the four tokens' sums (a row per
// lane), X0 the rows' dx.

// DECW decodes the block of the row at base into weights V and their
// magnitudes ABS.
#define DECW(W, base, V, ABS) \
	W(base); \
	VMOVDQA Y2, V; \
	VPABSB  Y2, ABS

// LANE44 leaves in V the lane sums of the row with weights WV (magnitudes
// ABS) times the activations in Y12.
#define LANE44(WV, ABS, V) \
	VPSIGNB  WV, Y12, Y3; \
	VPXORD   V, V, V; \
	VPDPBUSD Y3, ABS, V

// TOK44 adds token P's terms of the block to ACC: the four rows' integer
// sums (a row per lane), times dx·dy.
#define TOK44(P, ACC) \
	VMOVDQU      2(P), Y12; \
	LANE44(Y4, Y8, Y16); \
	LANE44(Y5, Y9, Y17); \
	LANE44(Y6, Y10, Y18); \
	LANE44(Y7, Y11, Y19); \
	VPUNPCKLDQ   Y17, Y16, Y24; \
	VPUNPCKHDQ   Y17, Y16, Y25; \
	VPADDD       Y25, Y24, Y24; \
	VPUNPCKLDQ   Y19, Y18, Y26; \
	VPUNPCKHDQ   Y19, Y18, Y27; \
	VPADDD       Y27, Y26, Y26; \
	VPUNPCKLQDQ  Y26, Y24, Y25; \
	VPUNPCKHQDQ  Y26, Y24, Y27; \
	VPADDD       Y27, Y25, Y25; \
	VEXTRACTI32X4 $1, Y25, X26; \
	VPADDD       X26, X25, X25; \
	VPBROADCASTW 0(P), X28; \
	VCVTPH2PS    X28, X28; \
	VMULPS       X28, X0, X29; \
	VCVTDQ2PS    X25, X25; \
	VMULPS       X29, X25, X25; \
	VADDPS       X25, ACC, ACC

// BLOCK44 adds the terms of one block of the four rows and four tokens.
#define BLOCK44(W, xs) \
	DECW(W, SI, Y4, Y8); \
	DECW(W, R8, Y5, Y9); \
	DECW(W, R9, Y6, Y10); \
	DECW(W, R10, Y7, Y11); \
	DX4(X0); \
	TOK44(DI, X20); \
	TOK44(R11, X21); \
	TOK44(R12, X22); \
	TOK44(R13, X23); \
	NEXT4ROWS(xs); \
	ADDQ $34, DI; \
	ADDQ $34, R11; \
	ADDQ $34, R12; \
	ADDQ $34, R13

// ROWS44PROLOGUE loads the row and token pointers and prefetches the next
// four rows (DOTPF ahead), as rows4 does.
#define ROWS44PROLOGUE(pf) \
	MOVQ   x+0(FP), SI; \
	MOVQ   ldw+8(FP), BX; \
	MOVQ   y+16(FP), DI; \
	MOVQ   lda+24(FP), AX; \
	MOVQ   nb+32(FP), CX; \
	LEAQ   (SI)(BX*1), R8; \
	LEAQ   (R8)(BX*1), R9; \
	LEAQ   (R9)(BX*1), R10; \
	LEAQ   (DI)(AX*1), R11; \
	LEAQ   (R11)(AX*1), R12; \
	LEAQ   (R12)(AX*1), R13; \
	VXORPS X20, X20, X20; \
	VXORPS X21, X21, X21; \
	VXORPS X22, X22, X22; \
	VXORPS X23, X23, X23; \
	PREFETCH4ROWS(pf, AX, DX)

// ROWS44EPILOGUE stores each token's four results (plus +0, as rows4).
#define ROWS44EPILOGUE \
	MOVQ    out+40(FP), DX; \
	MOVQ    ldo+48(FP), BX; \
	SHLQ    $2, BX; \
	VXORPS  X1, X1, X1; \
	VADDPS  X1, X20, X20; \
	VMOVUPS X20, (DX); \
	ADDQ    BX, DX; \
	VADDPS  X1, X21, X21; \
	VMOVUPS X21, (DX); \
	ADDQ    BX, DX; \
	VADDPS  X1, X22, X22; \
	VMOVUPS X22, (DX); \
	ADDQ    BX, DX; \
	VADDPS  X1, X23, X23; \
	VMOVUPS X23, (DX); \
	VZEROUPPER; \
	RET

// func rows4Q50Q80AVX512(x *byte, ldw int, y *byte, nb int, out *float32)
TEXT ·rows4Q50Q80AVX512(SB), NOSPLIT, $0-40
	ROWS4PROLOGUE
	BCAST8($0x0F0F0F0F, X14, Y14)
	BCAST8($0xF0F0F0F0, X13, Y13)

	PREFETCH4ROWS(q50r4pf, R12, R11)

q50r4loop:
	BLOCK4(Q50WB, 22)
	DECQ CX
	JNZ  q50r4loop
	ROWS4EPILOGUE

// func rows4Q80Q80AVX512(x *byte, ldw int, y *byte, nb int, out *float32)
TEXT ·rows4Q80Q80AVX512(SB), NOSPLIT, $0-40
	ROWS4PROLOGUE

	PREFETCH4ROWS(q80r4pf, R12, R11)

q80r4loop:
	BLOCK4(Q80WB, 34)
	DECQ CX
	JNZ  q80r4loop
	ROWS4EPILOGUE

// func rows4x4Q50Q80AVX512(x *byte, ldw int, y *byte, lda, nb int, out *float32, ldo int)
TEXT ·rows4x4Q50Q80AVX512(SB), NOSPLIT, $0-56
	ROWS44PROLOGUE(q50r44pf)
	BCAST8($0x0F0F0F0F, X14, Y14)
	BCAST8($0xF0F0F0F0, X13, Y13)

q50r44loop:
	BLOCK44(Q50WB, 22)
	DECQ CX
	JNZ  q50r44loop
	ROWS44EPILOGUE

// func rows4x4Q80Q80AVX512(x *byte, ldw int, y *byte, lda, nb int, out *float32, ldo int)
TEXT ·rows4x4Q80Q80AVX512(SB), NOSPLIT, $0-56
	ROWS44PROLOGUE(q80r44pf)

q80r44loop:
	BLOCK44(Q80WB, 34)
	DECQ CX
	JNZ  q80r44loop
	ROWS44EPILOGUE
