//go:build !purego

#include "textflag.h"
#include "dot_amd64.h"

// AVX2 dot products of 32-element blocks (Q8_0, Q4_0, Q5_0, IQ4_NL weights)
// with Q8_0 activations. Each block's weights are decoded to 32 signed bytes
// in Y2, multiplied exactly with the activation bytes (|w| · sign(a, w) with
// VPMADDUBSW, then VPMADDWD against ones: eight int32 lane sums), and the
// lanes are scaled by the block's dx·dy and accumulated with FMA. Activations
// must lie in [-127, 127], as Q8_0 quantization produces.
//
// Registers: SI weights, DI activations, CX blocks left, Y0/Y1 accumulators,
// Y2-Y6 scratch, Y9-Y15 constants.

// The nibble table of IQ4_NL, in both 128-bit lanes.
DATA dotIQ4NLTable<>+0(SB)/8, $0xF6EADDCFBFAD9881
DATA dotIQ4NLTable<>+8(SB)/8, $0x7159453526190D01
DATA dotIQ4NLTable<>+16(SB)/8, $0xF6EADDCFBFAD9881
DATA dotIQ4NLTable<>+24(SB)/8, $0x7159453526190D01
GLOBL dotIQ4NLTable<>(SB), RODATA|NOPTR, $32

// dotBitSpread copies byte k/8 of a broadcast dword to byte k.
DATA dotBitSpread<>+0(SB)/8, $0x0000000000000000
DATA dotBitSpread<>+8(SB)/8, $0x0101010101010101
DATA dotBitSpread<>+16(SB)/8, $0x0202020202020202
DATA dotBitSpread<>+24(SB)/8, $0x0303030303030303
GLOBL dotBitSpread<>(SB), RODATA|NOPTR, $32

// dotBitMask selects bit k%8 in byte k.
DATA dotBitMask<>+0(SB)/8, $0x8040201008040201
DATA dotBitMask<>+8(SB)/8, $0x8040201008040201
DATA dotBitMask<>+16(SB)/8, $0x8040201008040201
DATA dotBitMask<>+24(SB)/8, $0x8040201008040201
GLOBL dotBitMask<>(SB), RODATA|NOPTR, $32

// SDOT multiplies the signed weight bytes in Y2 with the 32 activation bytes
// at amem, scales the eight int32 lane sums by f16(xd)·f16(yd) and adds them
// to acc. Clobbers Y2-Y5, AX, DX.
#define SDOT(amem, xd, yd, acc) \
	VMOVDQU amem, Y3; \
	VPSIGNB Y2, Y3, Y3; \
	VPABSB Y2, Y2; \
	VPMADDUBSW Y3, Y2, Y2; \
	VPMADDWD Y15, Y2, Y2; \
	VCVTDQ2PS Y2, Y2; \
	MOVWLZX xd, AX; \
	MOVWLZX yd, DX; \
	SHLL $16, DX; \
	ORL DX, AX; \
	VMOVD AX, X4; \
	VCVTPH2PS X4, X4; \
	VMOVSHDUP X4, X5; \
	VMULSS X5, X4, X4; \
	VBROADCASTSS X4, Y4; \
	VFMADD231PS Y4, Y2, acc

// NIBBLES loads 16 bytes at mem and leaves their low nibbles in the low lane
// of Y2 and their high nibbles in the high lane (element order of Q4_0).
#define NIBBLES(mem) \
	VMOVDQU mem, X2; \
	VPSRLW $4, X2, X3; \
	VINSERTI128 $1, X3, Y2, Y2; \
	VPAND Y14, Y2, Y2

// Q8_0 weights: the bytes themselves.
#define Q80W(off) VMOVDQU off+2(SI), Y2

// Q4_0 weights: nibble − 8.
#define Q40W(off) \
	NIBBLES(off+2(SI)); \
	VPSUBB Y13, Y2, Y2

// IQ4_NL weights: table[nibble].
#define IQNLW(off) \
	NIBBLES(off+2(SI)); \
	VPSHUFB Y2, Y12, Y2

// Q5_0 weights: (nibble | bit j of qh << 4) − 16, computed as
// nibble | (0xF0 where the bit is clear).
#define Q50W(off) \
	NIBBLES(off+6(SI)); \
	VPBROADCASTD off+2(SI), Y6; \
	VPSHUFB Y11, Y6, Y6; \
	VPAND Y10, Y6, Y6; \
	VPCMPEQB Y10, Y6, Y6; \
	VPANDN Y9, Y6, Y6; \
	VPOR Y6, Y2, Y2

#define PROLOGUE \
	MOVQ x+0(FP), SI; \
	MOVQ y+8(FP), DI; \
	MOVQ nb+16(FP), CX; \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	ONES16(Y15)

// func dotQ80Q80AVX2(x, y *byte, nb int) float32
TEXT ·dotQ80Q80AVX2(SB), NOSPLIT, $0-28
	PROLOGUE
q80loop:
	CMPQ CX, $2
	JLT  q80tail
	Q80W(0)
	SDOT(2(DI), 0(SI), 0(DI), Y0)
	Q80W(34)
	SDOT(36(DI), 34(SI), 34(DI), Y1)
	ADDQ $(68), SI
	ADDQ $68, DI
	SUBQ $2, CX
	JMP  q80loop

q80tail:
	TESTQ CX, CX
	JZ    q80done
	Q80W(0)
	SDOT(2(DI), 0(SI), 0(DI), Y0)

q80done:
	VADDPS Y1, Y0, Y0
	HSUM(Y0, X0, X1)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func dotQ40Q80AVX2(x, y *byte, nb int) float32
TEXT ·dotQ40Q80AVX2(SB), NOSPLIT, $0-28
	PROLOGUE
	BCAST8($0x0F0F0F0F, X14, Y14)
	BCAST8($0x08080808, X13, Y13)
q40loop:
	CMPQ CX, $2
	JLT  q40tail
	Q40W(0)
	SDOT(2(DI), 0(SI), 0(DI), Y0)
	Q40W(18)
	SDOT(36(DI), 18(SI), 34(DI), Y1)
	ADDQ $(36), SI
	ADDQ $68, DI
	SUBQ $2, CX
	JMP  q40loop

q40tail:
	TESTQ CX, CX
	JZ    q40done
	Q40W(0)
	SDOT(2(DI), 0(SI), 0(DI), Y0)

q40done:
	VADDPS Y1, Y0, Y0
	HSUM(Y0, X0, X1)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func dotIQ4NLQ80AVX2(x, y *byte, nb int) float32
TEXT ·dotIQ4NLQ80AVX2(SB), NOSPLIT, $0-28
	PROLOGUE
	BCAST8($0x0F0F0F0F, X14, Y14)
	VMOVDQU dotIQ4NLTable<>(SB), Y12
iqnlloop:
	CMPQ CX, $2
	JLT  iqnltail
	IQNLW(0)
	SDOT(2(DI), 0(SI), 0(DI), Y0)
	IQNLW(18)
	SDOT(36(DI), 18(SI), 34(DI), Y1)
	ADDQ $(36), SI
	ADDQ $68, DI
	SUBQ $2, CX
	JMP  iqnlloop

iqnltail:
	TESTQ CX, CX
	JZ    iqnldone
	IQNLW(0)
	SDOT(2(DI), 0(SI), 0(DI), Y0)

iqnldone:
	VADDPS Y1, Y0, Y0
	HSUM(Y0, X0, X1)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func dotQ50Q80AVX2(x, y *byte, nb int) float32
TEXT ·dotQ50Q80AVX2(SB), NOSPLIT, $0-28
	PROLOGUE
	BCAST8($0x0F0F0F0F, X14, Y14)
	BCAST8($0xF0F0F0F0, X9, Y9)
	VMOVDQU dotBitSpread<>(SB), Y11
	VMOVDQU dotBitMask<>(SB), Y10
q50loop:
	CMPQ CX, $2
	JLT  q50tail
	Q50W(0)
	SDOT(2(DI), 0(SI), 0(DI), Y0)
	Q50W(22)
	SDOT(36(DI), 22(SI), 34(DI), Y1)
	ADDQ $(44), SI
	ADDQ $68, DI
	SUBQ $2, CX
	JMP  q50loop

q50tail:
	TESTQ CX, CX
	JZ    q50done
	Q50W(0)
	SDOT(2(DI), 0(SI), 0(DI), Y0)

q50done:
	VADDPS Y1, Y0, Y0
	HSUM(Y0, X0, X1)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET
