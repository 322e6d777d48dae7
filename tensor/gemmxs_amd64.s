//go:build !purego

#include "textflag.h"
#include "dot_amd64.h"

// Tile kernel of the IQ4_XS matrix product (Q8_K activations), AVX2: one
// weight row against four tokens (DI, R11, R12, R13). Per token it computes
// what the single-row kernel (dotIQ4XSQ8KAVX2, dotk_amd64.s) does: eight
// sub-block sums reduced to one lane each, times d·dy·(ls_j − 32), added to
// eight float lanes, so every result equals that kernel's bit for bit. Each
// weight block is decoded once into the frame: the codebook weights and
// their absolute values of sub-block j at 64j+32(SP) and 64j(SP), the
// scales ls_j − 32 as floats at 512(SP), d at 544(SP); the tokens'
// accumulators are at 576, 608, 640, 672(SP).
//
// func gemmIQ4XSQ8KAVX2(x, y *byte, lda, nb int, out *float32, ldo int)

DATA gemmXSTable<>+0(SB)/8, $0xF6EADDCFBFAD9881
DATA gemmXSTable<>+8(SB)/8, $0x7159453526190D01
DATA gemmXSTable<>+16(SB)/8, $0xF6EADDCFBFAD9881
DATA gemmXSTable<>+24(SB)/8, $0x7159453526190D01
GLOBL gemmXSTable<>(SB), RODATA|NOPTR, $32

// gemmXSShift: the shifts of scales_l (4j) and of scales_h (2j), sub-block j
// in dword j.
DATA gemmXSShift<>+0(SB)/8, $0x0000000400000000
DATA gemmXSShift<>+8(SB)/8, $0x0000000C00000008
DATA gemmXSShift<>+16(SB)/8, $0x0000001400000010
DATA gemmXSShift<>+24(SB)/8, $0x0000001C00000018
DATA gemmXSShift<>+32(SB)/8, $0x0000000200000000
DATA gemmXSShift<>+40(SB)/8, $0x0000000600000004
DATA gemmXSShift<>+48(SB)/8, $0x0000000A00000008
DATA gemmXSShift<>+56(SB)/8, $0x0000000E0000000C
GLOBL gemmXSShift<>(SB), RODATA|NOPTR, $64

DATA gemmXS32<>+0(SB)/8, $0x0000002000000020
DATA gemmXS32<>+8(SB)/8, $0x0000002000000020
DATA gemmXS32<>+16(SB)/8, $0x0000002000000020
DATA gemmXS32<>+24(SB)/8, $0x0000002000000020
GLOBL gemmXS32<>(SB), RODATA|NOPTR, $32

// DECXS decodes sub-block j of the block at SI into the frame.
#define DECXS(j) \
	VMOVDQU     (8+16*j)(SI), X2; \
	VPSRLW      $4, X2, X3; \
	VINSERTI128 $1, X3, Y2, Y2; \
	VPAND       Y14, Y2, Y2; \
	VPSHUFB     Y2, Y12, Y2; \
	VMOVDQU     Y2, (64*j+32)(SP); \
	VPABSB      Y2, Y2; \
	VMOVDQU     Y2, (64*j)(SP)

// LXS leaves in V the eight int32 lane sums of sub-block k times token P's
// activations (the single-row kernel's SUBXS).
#define LXS(P, k, V) \
	VMOVDQU    (4+32*k)(P), Y3; \
	VPSIGNB    (64*k+32)(SP), Y3, Y3; \
	VMOVDQU    (64*k)(SP), Y2; \
	VPMADDUBSW Y3, Y2, Y2; \
	VPMADDWD   Y15, Y2, V

// REDUCE8 turns the lane sums of the eight sub-blocks in Y4-Y11 into the
// eight sub-block sums in Y4. Clobbers Y5, Y6.
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

// TOKXS adds token P's block to its accumulator at acc(SP).
#define TOKXS(P, acc) \
	LXS(P, 0, Y4); \
	LXS(P, 1, Y5); \
	LXS(P, 2, Y6); \
	LXS(P, 3, Y7); \
	LXS(P, 4, Y8); \
	LXS(P, 5, Y9); \
	LXS(P, 6, Y10); \
	LXS(P, 7, Y11); \
	REDUCE8; \
	VMOVSS       544(SP), X3; \
	VMULSS       0(P), X3, X3; \
	VBROADCASTSS X3, Y3; \
	VMOVUPS      512(SP), Y2; \
	VMULPS       Y3, Y2, Y2; \
	VCVTDQ2PS    Y4, Y4; \
	VMULPS       Y4, Y2, Y2; \
	VMOVUPS      acc(SP), Y0; \
	VADDPS       Y2, Y0, Y0; \
	VMOVUPS      Y0, acc(SP)

// RESXS stores the sum of the accumulator's lanes at DX and advances DX.
#define RESXS(acc) \
	VMOVUPS acc(SP), Y0; \
	HSUM(Y0, X0, X1); \
	VMOVSS  X0, (DX); \
	ADDQ    BX, DX

TEXT ·gemmIQ4XSQ8KAVX2(SB), 0, $704-48
	MOVQ    x+0(FP), SI
	MOVQ    y+8(FP), DI
	MOVQ    lda+16(FP), AX
	MOVQ    nb+24(FP), CX
	LEAQ    (DI)(AX*1), R11
	LEAQ    (DI)(AX*2), R12
	LEAQ    (R11)(AX*2), R13
	VXORPS  Y0, Y0, Y0
	VMOVUPS Y0, 576(SP)
	VMOVUPS Y0, 608(SP)
	VMOVUPS Y0, 640(SP)
	VMOVUPS Y0, 672(SP)
	BCAST8($0x0F0F0F0F, X14, Y14)
	BCAST8($0x0000000F, X13, Y13)
	BCAST8($0x00000030, X1, Y1)
	ONES16(Y15)
	VMOVDQU gemmXSTable<>(SB), Y12

xsloop:
	DECXS(0)
	DECXS(1)
	DECXS(2)
	DECXS(3)
	DECXS(4)
	DECXS(5)
	DECXS(6)
	DECXS(7)

	// Scales ls_j − 32 as floats, d as a float.
	VPBROADCASTD 4(SI), Y2
	VPSRLVD      gemmXSShift<>+0(SB), Y2, Y2
	VPAND        Y13, Y2, Y2
	VPBROADCASTW 2(SI), Y3
	VPSRLVD      gemmXSShift<>+32(SB), Y3, Y3
	VPSLLD       $4, Y3, Y3
	VPAND        Y1, Y3, Y3
	VPOR         Y3, Y2, Y2
	VPSUBD       gemmXS32<>(SB), Y2, Y2
	VCVTDQ2PS    Y2, Y2
	VMOVUPS      Y2, 512(SP)
	MOVWLZX      0(SI), AX
	VMOVD        AX, X3
	VCVTPH2PS    X3, X3
	VMOVSS       X3, 544(SP)

	TOKXS(DI, 576)
	TOKXS(R11, 608)
	TOKXS(R12, 640)
	TOKXS(R13, 672)
	ADDQ $136, SI
	ADDQ $292, DI
	ADDQ $292, R11
	ADDQ $292, R12
	ADDQ $292, R13
	DECQ CX
	JNZ  xsloop

	MOVQ out+32(FP), DX
	MOVQ ldo+40(FP), BX
	SHLQ $2, BX
	RESXS(576)
	RESXS(608)
	RESXS(640)
	RESXS(672)
	VZEROUPPER
	RET
