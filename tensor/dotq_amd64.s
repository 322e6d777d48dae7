//go:build !purego

#include "textflag.h"
#include "dot_amd64.h"

// AVX2 dot products of 32-element blocks (Q8_0, Q4_0, Q5_0, IQ4_NL weights)
// with Q8_0 activations. Each block's weights are decoded to 32 signed bytes
// (Y2) and multiplied exactly with the activation bytes (|w| · sign(a, w)
// with VPMADDUBSW, then VPMADDWD against ones: eight int32 lane sums). Eight
// blocks at a time, the lane sums are reduced to one integer per block with
// a transposing VPHADDD tree and the scales dx, dy of the eight blocks are
// gathered and converted together, so every block's term sumi·dx·dy is
// formed exactly as the pure-Go twin forms it; only the order in which the
// terms are added differs. The nb%8 leading blocks take a one-block path.
// Activations must lie in [-127, 127], as Q8_0 quantization produces.
//
// Registers: SI weights, DI activations, CX blocks, Y0 accumulator, Y1-Y3
// scratch, Y4-Y11 the eight blocks' lane sums, Y12-Y15 constants.

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

// dotNibShift shifts the dwords of the high 128-bit lane right by 4.
DATA dotNibShift<>+0(SB)/8, $0
DATA dotNibShift<>+8(SB)/8, $0
DATA dotNibShift<>+16(SB)/8, $0x0000000400000004
DATA dotNibShift<>+24(SB)/8, $0x0000000400000004
GLOBL dotNibShift<>(SB), RODATA|NOPTR, $32

// NIBBLES loads 16 bytes at mem and leaves their low nibbles in the low lane
// of Y2 and their high nibbles in the high lane (element order of Q4_0):
// both lanes get the bytes, the high lane is shifted right by 4 bits.
#define NIBBLES(mem) \
	VBROADCASTI128 mem, Y2; \
	VPSRLVD dotNibShift<>(SB), Y2, Y2; \
	VPAND Y14, Y2, Y2

// Weight decoders: the signed weights of the block at SI+off into Y2.

// Q8_0: the bytes themselves.
#define Q80W(off) VMOVDQU off+2(SI), Y2

// Q4_0: nibble − 8.
#define Q40W(off) \
	NIBBLES(off+2(SI)); \
	VPSUBB Y13, Y2, Y2

// IQ4_NL: table[nibble].
#define IQNLW(off) \
	NIBBLES(off+2(SI)); \
	VPSHUFB Y2, Y12, Y2

// Q5_0: (nibble | bit j of qh << 4) − 16, computed as nibble | (0xF0 where
// the bit is clear).
#define Q50W(off) \
	NIBBLES(off+6(SI)); \
	VPBROADCASTD off+2(SI), Y1; \
	VPSHUFB dotBitSpread<>(SB), Y1, Y1; \
	VPAND dotBitMask<>(SB), Y1, Y1; \
	VPCMPEQB dotBitMask<>(SB), Y1, Y1; \
	VPANDN Y13, Y1, Y1; \
	VPOR Y1, Y2, Y2

// LANES leaves in V the eight int32 lane sums of the weights decoded by
// W(xoff) times the activations of the Q8_0 block at DI+yoff.
#define LANES(W, xoff, yoff, V) \
	W(xoff); \
	VMOVDQU yoff+2(DI), Y3; \
	VPSIGNB Y2, Y3, Y3; \
	VPABSB Y2, Y2; \
	VPMADDUBSW Y3, Y2, Y2; \
	VPMADDWD Y15, Y2, V

// LANESVNNI is LANES with AVX-512 VNNI: VPDPBUSD (EVEX on Y registers)
// replaces VPMADDUBSW and VPMADDWD.
#define LANESVNNI(W, xoff, yoff, V) \
	W(xoff); \
	VMOVDQU yoff+2(DI), Y3; \
	VPSIGNB Y2, Y3, Y3; \
	VPABSB Y2, Y2; \
	VPXOR V, V, V; \
	VPDPBUSD Y3, Y2, V

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

// Block terms from the integer block sums S and the scales DX, DY (floats):
// SDD forms sumi·(dx·dy) (Q8_0, Q5_0, IQ4_NL), SDXDY (sumi·dx)·dy (Q4_0).
#define SDD(DX, DY, S) \
	VMULPS    DY, DX, DX; \
	VCVTDQ2PS S, S; \
	VMULPS    DX, S, S

#define SDXDY(DX, DY, S) \
	VCVTDQ2PS S, S; \
	VMULPS    DX, S, S; \
	VMULPS    DY, S, S

// PROLOGUE loads the arguments: BX = nb%8 single blocks, CX = nb/8 steps.
#define PROLOGUE \
	MOVQ   x+0(FP), SI; \
	MOVQ   y+8(FP), DI; \
	MOVQ   nb+16(FP), CX; \
	VXORPS Y0, Y0, Y0; \
	ONES16(Y15); \
	MOVQ   CX, BX; \
	ANDQ   $7, BX; \
	SHRQ   $3, CX

// ONE adds the term of the block at SI, DI to X0 (upper half of Y0 still
// zero) and advances to the next block.
#define ONE(W, xs, TERM) \
	LANES(W, 0, 0, Y4); \
	VEXTRACTI128 $1, Y4, X5; \
	VPADDD       X5, X4, X4; \
	VPSHUFD      $0x4E, X4, X5; \
	VPADDD       X5, X4, X4; \
	VPSHUFD      $0xB1, X4, X5; \
	VPADDD       X5, X4, X4; \
	MOVWLZX      0(SI), AX; \
	VMOVD        AX, X2; \
	MOVWLZX      0(DI), AX; \
	VMOVD        AX, X3; \
	VCVTPH2PS    X2, X2; \
	VCVTPH2PS    X3, X3; \
	TERM(X2, X3, X4); \
	VADDSS       X4, X0, X0; \
	ADDQ         $xs, SI; \
	ADDQ         $34, DI

// EIGHT adds the terms of the eight blocks at SI, DI to Y0 and advances;
// L is LANES or LANESVNNI.
#define EIGHT(L, W, xs, TERM) \
	L(W, 0*xs, 0*34, Y4); \
	L(W, 1*xs, 1*34, Y5); \
	L(W, 2*xs, 2*34, Y6); \
	L(W, 3*xs, 3*34, Y7); \
	L(W, 4*xs, 4*34, Y8); \
	L(W, 5*xs, 5*34, Y9); \
	L(W, 6*xs, 6*34, Y10); \
	L(W, 7*xs, 7*34, Y11); \
	REDUCE8; \
	GATHER16(SI, 0, xs, X2); \
	GATHER16(DI, 0, 34, X3); \
	VCVTPH2PS X2, Y2; \
	VCVTPH2PS X3, Y3; \
	TERM(Y2, Y3, Y4); \
	VADDPS    Y4, Y0, Y0; \
	ADDQ      $(8*xs), SI; \
	ADDQ      $(8*34), DI

#define EPILOGUE \
	HSUM(Y0, X0, X1); \
	VMOVSS X0, ret+24(FP); \
	VZEROUPPER; \
	RET

// func dotQ80Q80AVX2(x, y *byte, nb int) float32
TEXT ·dotQ80Q80AVX2(SB), NOSPLIT, $0-28
	PROLOGUE
	TESTQ BX, BX
	JZ    q80eight
q80one:
	PREFETCHT0 (DOTPF+0)(SI)
	ONE(Q80W, 34, SDD)
	DECQ  BX
	JNZ   q80one
q80eight:
	TESTQ CX, CX
	JZ    q80done
q80loop:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	PREFETCHT0 (DOTPF+128)(SI)
	PREFETCHT0 (DOTPF+192)(SI)
	PREFETCHT0 (DOTPF+256)(SI)
	EIGHT(LANES, Q80W, 34, SDD)
	DECQ  CX
	JNZ   q80loop
q80done:
	EPILOGUE

// func dotQ40Q80AVX2(x, y *byte, nb int) float32
TEXT ·dotQ40Q80AVX2(SB), NOSPLIT, $0-28
	PROLOGUE
	BCAST8($0x0F0F0F0F, X14, Y14)
	BCAST8($0x08080808, X13, Y13)
	TESTQ BX, BX
	JZ    q40eight
q40one:
	PREFETCHT0 (DOTPF+0)(SI)
	ONE(Q40W, 18, SDXDY)
	DECQ  BX
	JNZ   q40one
q40eight:
	TESTQ CX, CX
	JZ    q40done
q40loop:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	PREFETCHT0 (DOTPF+128)(SI)
	EIGHT(LANES, Q40W, 18, SDXDY)
	DECQ  CX
	JNZ   q40loop
q40done:
	EPILOGUE

// func dotIQ4NLQ80AVX2(x, y *byte, nb int) float32
TEXT ·dotIQ4NLQ80AVX2(SB), NOSPLIT, $0-28
	PROLOGUE
	BCAST8($0x0F0F0F0F, X14, Y14)
	VMOVDQU dotIQ4NLTable<>(SB), Y12
	TESTQ BX, BX
	JZ    iqnleight
iqnlone:
	PREFETCHT0 (DOTPF+0)(SI)
	ONE(IQNLW, 18, SDD)
	DECQ  BX
	JNZ   iqnlone
iqnleight:
	TESTQ CX, CX
	JZ    iqnldone
iqnlloop:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	PREFETCHT0 (DOTPF+128)(SI)
	EIGHT(LANES, IQNLW, 18, SDD)
	DECQ  CX
	JNZ   iqnlloop
iqnldone:
	EPILOGUE

// func dotQ50Q80AVX2(x, y *byte, nb int) float32
TEXT ·dotQ50Q80AVX2(SB), NOSPLIT, $0-28
	PROLOGUE
	BCAST8($0x0F0F0F0F, X14, Y14)
	BCAST8($0xF0F0F0F0, X13, Y13)
	TESTQ BX, BX
	JZ    q50eight
q50one:
	PREFETCHT0 (DOTPF+0)(SI)
	ONE(Q50W, 22, SDD)
	DECQ  BX
	JNZ   q50one
q50eight:
	TESTQ CX, CX
	JZ    q50done
q50loop:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	PREFETCHT0 (DOTPF+128)(SI)
	EIGHT(LANES, Q50W, 22, SDD)
	DECQ  CX
	JNZ   q50loop
q50done:
	EPILOGUE

// func dotQ80Q80AVX512(x, y *byte, nb int) float32
TEXT ·dotQ80Q80AVX512(SB), NOSPLIT, $0-28
	PROLOGUE
	TESTQ BX, BX
	JZ    q80veight
q80vone:
	PREFETCHT0 (DOTPF+0)(SI)
	ONE(Q80W, 34, SDD)
	DECQ  BX
	JNZ   q80vone
q80veight:
	TESTQ CX, CX
	JZ    q80vdone
q80vloop:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	PREFETCHT0 (DOTPF+128)(SI)
	PREFETCHT0 (DOTPF+192)(SI)
	PREFETCHT0 (DOTPF+256)(SI)
	EIGHT(LANESVNNI, Q80W, 34, SDD)
	DECQ  CX
	JNZ   q80vloop
q80vdone:
	EPILOGUE

// func dotQ40Q80AVX512(x, y *byte, nb int) float32
TEXT ·dotQ40Q80AVX512(SB), NOSPLIT, $0-28
	PROLOGUE
	BCAST8($0x0F0F0F0F, X14, Y14)
	BCAST8($0x08080808, X13, Y13)
	TESTQ BX, BX
	JZ    q40veight
q40vone:
	PREFETCHT0 (DOTPF+0)(SI)
	ONE(Q40W, 18, SDXDY)
	DECQ  BX
	JNZ   q40vone
q40veight:
	TESTQ CX, CX
	JZ    q40vdone
q40vloop:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	PREFETCHT0 (DOTPF+128)(SI)
	EIGHT(LANESVNNI, Q40W, 18, SDXDY)
	DECQ  CX
	JNZ   q40vloop
q40vdone:
	EPILOGUE

// func dotIQ4NLQ80AVX512(x, y *byte, nb int) float32
TEXT ·dotIQ4NLQ80AVX512(SB), NOSPLIT, $0-28
	PROLOGUE
	BCAST8($0x0F0F0F0F, X14, Y14)
	VMOVDQU dotIQ4NLTable<>(SB), Y12
	TESTQ BX, BX
	JZ    iqnlveight
iqnlvone:
	PREFETCHT0 (DOTPF+0)(SI)
	ONE(IQNLW, 18, SDD)
	DECQ  BX
	JNZ   iqnlvone
iqnlveight:
	TESTQ CX, CX
	JZ    iqnlvdone
iqnlvloop:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	PREFETCHT0 (DOTPF+128)(SI)
	EIGHT(LANESVNNI, IQNLW, 18, SDD)
	DECQ  CX
	JNZ   iqnlvloop
iqnlvdone:
	EPILOGUE

// func dotQ50Q80AVX512(x, y *byte, nb int) float32
TEXT ·dotQ50Q80AVX512(SB), NOSPLIT, $0-28
	PROLOGUE
	BCAST8($0x0F0F0F0F, X14, Y14)
	BCAST8($0xF0F0F0F0, X13, Y13)
	TESTQ BX, BX
	JZ    q50veight
q50vone:
	PREFETCHT0 (DOTPF+0)(SI)
	ONE(Q50W, 22, SDD)
	DECQ  BX
	JNZ   q50vone
q50veight:
	TESTQ CX, CX
	JZ    q50vdone
q50vloop:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	PREFETCHT0 (DOTPF+128)(SI)
	EIGHT(LANESVNNI, Q50W, 22, SDD)
	DECQ  CX
	JNZ   q50vloop
q50vdone:
	EPILOGUE

// Q4_1 and Q5_1 weights with Q8_1 activations (36-byte blocks: d, s f16,
// 32 int8). The weights are unsigned, so VPMADDUBSW takes them directly;
// each block's term is (dx·dy)·sumi + mx·sy as in the twin.

// Q4_1: the nibbles.
#define Q41W(off) NIBBLES(off+4(SI))

// Q5_1: nibble | bit j of qh << 4. Y13 = 0x10 bytes.
#define Q51W(off) \
	NIBBLES(off+8(SI)); \
	VPBROADCASTD off+4(SI), Y1; \
	VPSHUFB dotBitSpread<>(SB), Y1, Y1; \
	VPAND dotBitMask<>(SB), Y1, Y1; \
	VPCMPEQB dotBitMask<>(SB), Y1, Y1; \
	VPAND Y13, Y1, Y1; \
	VPOR Y1, Y2, Y2

// LANES1 leaves in V the eight int32 lane sums of the unsigned weights
// decoded by W(xoff) times the activations of the Q8_1 block at DI+yoff.
#define LANES1(W, xoff, yoff, V) \
	W(xoff); \
	VPMADDUBSW yoff+4(DI), Y2, Y2; \
	VPMADDWD Y15, Y2, V

// ONE1 adds the term of the block at SI, DI to X0 and advances.
#define ONE1(W, xs) \
	LANES1(W, 0, 0, Y4); \
	VEXTRACTI128 $1, Y4, X5; \
	VPADDD       X5, X4, X4; \
	VPSHUFD      $0x4E, X4, X5; \
	VPADDD       X5, X4, X4; \
	VPSHUFD      $0xB1, X4, X5; \
	VPADDD       X5, X4, X4; \
	VMOVD        0(SI), X2; \
	VMOVD        0(DI), X3; \
	VCVTPH2PS    X2, X2; \
	VCVTPH2PS    X3, X3; \
	VMULPS       X3, X2, X3; \
	VCVTDQ2PS    X4, X4; \
	VMULSS       X3, X4, X4; \
	VMOVSHDUP    X3, X3; \
	VADDSS       X3, X4, X4; \
	VADDSS       X4, X0, X0; \
	ADDQ         $xs, SI; \
	ADDQ         $36, DI

// EIGHT1 adds the terms of the eight blocks at SI, DI to Y0 and advances.
#define EIGHT1(W, xs) \
	LANES1(W, 0*xs, 0*36, Y4); \
	LANES1(W, 1*xs, 1*36, Y5); \
	LANES1(W, 2*xs, 2*36, Y6); \
	LANES1(W, 3*xs, 3*36, Y7); \
	LANES1(W, 4*xs, 4*36, Y8); \
	LANES1(W, 5*xs, 5*36, Y9); \
	LANES1(W, 6*xs, 6*36, Y10); \
	LANES1(W, 7*xs, 7*36, Y11); \
	REDUCE8; \
	GATHER16(SI, 0, xs, X2); \
	GATHER16(DI, 0, 36, X3); \
	VCVTPH2PS X2, Y2; \
	VCVTPH2PS X3, Y3; \
	VMULPS    Y3, Y2, Y2; \
	VCVTDQ2PS Y4, Y4; \
	VMULPS    Y2, Y4, Y4; \
	GATHER16(SI, 2, xs, X2); \
	GATHER16(DI, 2, 36, X3); \
	VCVTPH2PS X2, Y2; \
	VCVTPH2PS X3, Y3; \
	VMULPS    Y3, Y2, Y2; \
	VADDPS    Y2, Y4, Y4; \
	VADDPS    Y4, Y0, Y0; \
	ADDQ      $(8*xs), SI; \
	ADDQ      $(8*36), DI

// func dotQ41Q81AVX2(x, y *byte, nb int) float32
TEXT ·dotQ41Q81AVX2(SB), NOSPLIT, $0-28
	PROLOGUE
	BCAST8($0x0F0F0F0F, X14, Y14)
	TESTQ BX, BX
	JZ    q41eight
q41one:
	PREFETCHT0 (DOTPF+0)(SI)
	ONE1(Q41W, 20)
	DECQ  BX
	JNZ   q41one
q41eight:
	TESTQ CX, CX
	JZ    q41done
q41loop:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	PREFETCHT0 (DOTPF+128)(SI)
	EIGHT1(Q41W, 20)
	DECQ  CX
	JNZ   q41loop
q41done:
	EPILOGUE

// func dotQ51Q81AVX2(x, y *byte, nb int) float32
TEXT ·dotQ51Q81AVX2(SB), NOSPLIT, $0-28
	PROLOGUE
	BCAST8($0x0F0F0F0F, X14, Y14)
	BCAST8($0x10101010, X13, Y13)
	TESTQ BX, BX
	JZ    q51eight
q51one:
	PREFETCHT0 (DOTPF+0)(SI)
	ONE1(Q51W, 24)
	DECQ  BX
	JNZ   q51one
q51eight:
	TESTQ CX, CX
	JZ    q51done
q51loop:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	PREFETCHT0 (DOTPF+128)(SI)
	EIGHT1(Q51W, 24)
	DECQ  CX
	JNZ   q51loop
q51done:
	EPILOGUE
