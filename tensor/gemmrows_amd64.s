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
	MOVWLZX      0(SI), AX; \
	VMOVD        AX, X2; \
	VPINSRW      $1, 0(R8), X2, X2; \
	VPINSRW      $2, 0(R9), X2, X2; \
	VPINSRW      $3, 0(R10), X2, X2; \
	VCVTPH2PS    X2, X2; \
	VPBROADCASTW 0(DI), X3; \
	VCVTPH2PS    X3, X3; \
	VMULPS       X3, X2, X2; \
	VCVTDQ2PS    X4, X4; \
	VMULPS       X2, X4, X4; \
	VADDPS       X4, X0, X0; \
	ADDQ         $xs, SI; \
	ADDQ         $xs, R8; \
	ADDQ         $xs, R9; \
	ADDQ         $xs, R10; \
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

// func rows4Q50Q80AVX512(x *byte, ldw int, y *byte, nb int, out *float32)
TEXT ·rows4Q50Q80AVX512(SB), NOSPLIT, $0-40
	ROWS4PROLOGUE
	BCAST8($0x0F0F0F0F, X14, Y14)
	BCAST8($0xF0F0F0F0, X13, Y13)

	// Prefetch the next four rows' bytes (DOTPF ahead of these).
	LEAQ (R10)(BX*1), R11
	MOVQ SI, R12

q50r4pf:
	PREFETCHT0 DOTPF(R12)
	ADDQ       $64, R12
	CMPQ       R12, R11
	JB         q50r4pf

q50r4loop:
	BLOCK4(Q50WB, 22)
	DECQ CX
	JNZ  q50r4loop
	ROWS4EPILOGUE

// func rows4Q80Q80AVX512(x *byte, ldw int, y *byte, nb int, out *float32)
TEXT ·rows4Q80Q80AVX512(SB), NOSPLIT, $0-40
	ROWS4PROLOGUE

	// Prefetch the next four rows' bytes (DOTPF ahead of these).
	LEAQ (R10)(BX*1), R11
	MOVQ SI, R12

q80r4pf:
	PREFETCHT0 DOTPF(R12)
	ADDQ       $64, R12
	CMPQ       R12, R11
	JB         q80r4pf

q80r4loop:
	BLOCK4(Q80WB, 34)
	DECQ CX
	JNZ  q80r4loop
	ROWS4EPILOGUE
