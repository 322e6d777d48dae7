//go:build !purego

#include "textflag.h"
#include "dot_amd64.h"

// Tile kernels of the K-quant matrix products: one Q4_K, Q5_K or Q6_K
// weight row against the Q8_K activations of four tokens (DI, R11, R12,
// R13) or two (DI, R11), or of eight or sixteen tokens packed into aligned
// memory (the kernels at the end, AVX-512). Each weight block
// is decoded once (nibbles, high bits, sub-block scales and their
// shuffles) and multiplied with every token's block.
// Per token the kernels keep exactly the integer lanes and the float
// operations of the single-row kernel of the same instruction set
// (dotk_amd64.s, dotk512_amd64.s): the same elements meet in each int32
// lane, the same products are fused into the same accumulators in the same
// order, and the same horizontal sums end them, so every result equals
// that kernel's bit for bit. Only integer additions are reordered (the
// Q6_K offset −32 is subtracted first instead of last), which is exact.
// The AVX-512 Q4_K and Q6_K tiles prefetch their weight lines DOTPF ahead
// as the single-row kernels do (no change to the arithmetic): the experts of
// a batched decode step (a few tokens each) stream their rows from memory.
//
// func gemm*(x, y *byte, lda, nb int, out *float32, ldo int)
// func gemm*p(x, q *byte, nb int, out *float32, ldo int)

// gemmShufK4 + 32k broadcasts int16 k of each 128-bit lane (Q4_K scales).
DATA gemmShufK4<>+0(SB)/8, $0x0100010001000100
DATA gemmShufK4<>+8(SB)/8, $0x0100010001000100
DATA gemmShufK4<>+16(SB)/8, $0x0100010001000100
DATA gemmShufK4<>+24(SB)/8, $0x0100010001000100
DATA gemmShufK4<>+32(SB)/8, $0x0302030203020302
DATA gemmShufK4<>+40(SB)/8, $0x0302030203020302
DATA gemmShufK4<>+48(SB)/8, $0x0302030203020302
DATA gemmShufK4<>+56(SB)/8, $0x0302030203020302
DATA gemmShufK4<>+64(SB)/8, $0x0504050405040504
DATA gemmShufK4<>+72(SB)/8, $0x0504050405040504
DATA gemmShufK4<>+80(SB)/8, $0x0504050405040504
DATA gemmShufK4<>+88(SB)/8, $0x0504050405040504
DATA gemmShufK4<>+96(SB)/8, $0x0706070607060706
DATA gemmShufK4<>+104(SB)/8, $0x0706070607060706
DATA gemmShufK4<>+112(SB)/8, $0x0706070607060706
DATA gemmShufK4<>+120(SB)/8, $0x0706070607060706
DATA gemmShufK4<>+128(SB)/8, $0x0908090809080908
DATA gemmShufK4<>+136(SB)/8, $0x0908090809080908
DATA gemmShufK4<>+144(SB)/8, $0x0908090809080908
DATA gemmShufK4<>+152(SB)/8, $0x0908090809080908
DATA gemmShufK4<>+160(SB)/8, $0x0B0A0B0A0B0A0B0A
DATA gemmShufK4<>+168(SB)/8, $0x0B0A0B0A0B0A0B0A
DATA gemmShufK4<>+176(SB)/8, $0x0B0A0B0A0B0A0B0A
DATA gemmShufK4<>+184(SB)/8, $0x0B0A0B0A0B0A0B0A
DATA gemmShufK4<>+192(SB)/8, $0x0D0C0D0C0D0C0D0C
DATA gemmShufK4<>+200(SB)/8, $0x0D0C0D0C0D0C0D0C
DATA gemmShufK4<>+208(SB)/8, $0x0D0C0D0C0D0C0D0C
DATA gemmShufK4<>+216(SB)/8, $0x0D0C0D0C0D0C0D0C
DATA gemmShufK4<>+224(SB)/8, $0x0F0E0F0E0F0E0F0E
DATA gemmShufK4<>+232(SB)/8, $0x0F0E0F0E0F0E0F0E
DATA gemmShufK4<>+240(SB)/8, $0x0F0E0F0E0F0E0F0E
DATA gemmShufK4<>+248(SB)/8, $0x0F0E0F0E0F0E0F0E
GLOBL gemmShufK4<>(SB), RODATA|NOPTR, $256

// gemmShufQ6 + 16k picks int16 k of a 128-bit lane (Q6_K scales).
DATA gemmShufQ6<>+0(SB)/8, $0x0100010001000100
DATA gemmShufQ6<>+8(SB)/8, $0x0100010001000100
DATA gemmShufQ6<>+16(SB)/8, $0x0302030203020302
DATA gemmShufQ6<>+24(SB)/8, $0x0302030203020302
DATA gemmShufQ6<>+32(SB)/8, $0x0504050405040504
DATA gemmShufQ6<>+40(SB)/8, $0x0504050405040504
DATA gemmShufQ6<>+48(SB)/8, $0x0706070607060706
DATA gemmShufQ6<>+56(SB)/8, $0x0706070607060706
DATA gemmShufQ6<>+64(SB)/8, $0x0908090809080908
DATA gemmShufQ6<>+72(SB)/8, $0x0908090809080908
DATA gemmShufQ6<>+80(SB)/8, $0x0B0A0B0A0B0A0B0A
DATA gemmShufQ6<>+88(SB)/8, $0x0B0A0B0A0B0A0B0A
DATA gemmShufQ6<>+96(SB)/8, $0x0D0C0D0C0D0C0D0C
DATA gemmShufQ6<>+104(SB)/8, $0x0D0C0D0C0D0C0D0C
DATA gemmShufQ6<>+112(SB)/8, $0x0F0E0F0E0F0E0F0E
DATA gemmShufQ6<>+120(SB)/8, $0x0F0E0F0E0F0E0F0E
GLOBL gemmShufQ6<>(SB), RODATA|NOPTR, $128

// gemmBit0 is a byte mask of bit 0 (Q5_K high bits).
DATA gemmBit0<>+0(SB)/8, $0x0101010101010101
DATA gemmBit0<>+8(SB)/8, $0x0101010101010101
DATA gemmBit0<>+16(SB)/8, $0x0101010101010101
DATA gemmBit0<>+24(SB)/8, $0x0101010101010101
GLOBL gemmBit0<>(SB), RODATA|NOPTR, $32

// ARGS loads x to SI, the four tokens' activation pointers to DI, R11, R12,
// R13 and nb to CX.
#define ARGS \
	MOVQ x+0(FP), SI; \
	MOVQ y+8(FP), DI; \
	MOVQ lda+16(FP), AX; \
	MOVQ nb+24(FP), CX; \
	LEAQ (DI)(AX*1), R11; \
	LEAQ (DI)(AX*2), R12; \
	LEAQ (R11)(AX*2), R13

// NEXT advances to the next block of the weight row (xs bytes) and of the
// four activation rows.
#define NEXT(xs) \
	ADDQ $xs, SI; \
	ADDQ $292, DI; \
	ADDQ $292, R11; \
	ADDQ $292, R12; \
	ADDQ $292, R13

// OUTS points DX at out and BX holds the output stride in bytes.
#define OUTS \
	MOVQ out+32(FP), DX; \
	MOVQ ldo+40(FP), BX; \
	SHLQ $2, BX

// SCALES6 unpacks the 6-bit scales and mins of the Q4_K block at SI into
// bytes: R8 the eight scales, R9 the eight mins. Clobbers AX, BX, DX, R10.
#define SCALES6 \
	UNPACKK4(SI, R8, R9, AX, BX, DX, R10)

// MINS4 forms token P's min term of the block as the single-row kernels'
// MINSK4: MACC (four float lanes) += dmin·dy · Σ m_j·(bsums[2j]+bsums[2j+1]),
// with X4 = (d, dmin) of the block and X9 its int16 mins; leaves d·dy in the
// low float of X1. Clobbers X0, X7.
#define MINS4(P, MACC) \
	VMOVDQU      260(P), X0; \
	VPHADDW      276(P), X0, X0; \
	VPMADDWD     X9, X0, X0; \
	VCVTDQ2PS    X0, X0; \
	VBROADCASTSS 0(P), X1; \
	VMULPS       X1, X4, X1; \
	VMOVSHDUP    X1, X7; \
	VBROADCASTSS X7, X7; \
	VFMADD231PS  X7, X0, MACC

// Q4_K, AVX2. Per token: int32 block lanes in Y10-Y13; float accumulators
// (eight lanes, as Y0 of the single-row kernel) at 0, 32, 64, 96(SP), min
// accumulators (four lanes, its X1) at 128, 144, 160, 176(SP).

// TOK4 adds token P's products with the decoded weights Y2 (low nibbles,
// activations at ylo) and Y3 (high nibbles, at yhi), weighted by the scale
// words in Y5 and Y6, to the int32 lanes in A.
#define TOK4(P, A, ylo, yhi) \
	VPMADDUBSW ylo(P), Y2, Y0; \
	VPMADDWD   Y5, Y0, Y0; \
	VPADDD     Y0, A, A; \
	VPMADDUBSW yhi(P), Y3, Y1; \
	VPMADDWD   Y6, Y1, Y1; \
	VPADDD     Y1, A, A

// CHUNK4 decodes the 64 weights of chunk c (quants at qoff) and adds them,
// times each token's activations, to the four tokens' lanes.
#define CHUNK4(qoff, ylo, yhi, slo, shi) \
	VMOVDQU qoff(SI), Y2; \
	VPSRLW  $4, Y2, Y3; \
	VPAND   Y14, Y2, Y2; \
	VPAND   Y14, Y3, Y3; \
	VPSHUFB slo, Y8, Y5; \
	VPSHUFB shi, Y8, Y6; \
	TOK4(DI, Y10, ylo, yhi); \
	TOK4(R11, Y11, ylo, yhi); \
	TOK4(R12, Y12, ylo, yhi); \
	TOK4(R13, Y13, ylo, yhi)

// END4 adds token P's block (lanes A) to its accumulators at acc and
// macc(SP).
#define END4(P, A, acc, macc) \
	VMOVUPS      macc(SP), X15; \
	MINS4(P, X15); \
	VMOVUPS      X15, macc(SP); \
	VBROADCASTSS X1, Y1; \
	VCVTDQ2PS    A, A; \
	VMOVUPS      acc(SP), Y0; \
	VFMADD231PS  Y1, A, Y0; \
	VMOVUPS      Y0, acc(SP)

// RES4 stores hsum(acc) − hsum(macc) at DX, as the single-row kernel's KEND,
// and advances DX to the next token's output.
#define RES4(acc, macc) \
	VMOVUPS   acc(SP), Y0; \
	VMOVUPS   macc(SP), X1; \
	KSUB; \
	VMOVSS    X0, (DX); \
	ADDQ      BX, DX

// BLOCKQ6KP starts a Q6_K block of the packed kernels: prefetch, and the
// sixteen scales times −32 as int16 in Y15.
#define BLOCKQ6KP \
	PREFETCHT0 (DOTPF+0)(SI); \
	PREFETCHT0 (DOTPF+64)(SI); \
	PREFETCHT0 (DOTPF+128)(SI); \
	PREFETCHT0 (DOTPF+192)(SI); \
	VPMOVSXBW  192(SI), Y15; \
	VPSLLW     $5, Y15, Y15; \
	VPXOR      X0, X0, X0; \
	VPSUBW     Y15, Y0, Y15

// CORR8P starts the lanes of the eight tokens of the packed tile at P at
// −[32·Σ scale_s·bsums[s], 0]: the scales times −32 (Y15) times their block
// sums, the same integers as the single-row kernel's offset term.
#define CORR8P(P, A0, A1, A2, A3, A4, A5, A6, A7) \
	VPMADDWD 2048(P), Y15, A0; \
	VPMADDWD 2080(P), Y15, A1; \
	VPMADDWD 2112(P), Y15, A2; \
	VPMADDWD 2144(P), Y15, A3; \
	VPMADDWD 2176(P), Y15, A4; \
	VPMADDWD 2208(P), Y15, A5; \
	VPMADDWD 2240(P), Y15, A6; \
	VPMADDWD 2272(P), Y15, A7

// ENDS16 ends the block for the sixteen tokens (E16Q6).
#define ENDS16 \
	E16Q6(0, Z16) \
	E16Q6(1, Z17) \
	E16Q6(2, Z18) \
	E16Q6(3, Z19) \
	E16Q6(4, Z20) \
	E16Q6(5, Z21) \
	E16Q6(6, Z22) \
	E16Q6(7, Z23) \
	E16Q6(8, Z24) \
	E16Q6(9, Z25) \
	E16Q6(10, Z26) \
	E16Q6(11, Z27) \
	E16Q6(12, Z28) \
	E16Q6(13, Z29) \
	E16Q6(14, Z30) \
	E16Q6(15, Z31)

// DD16 forms the sixteen products d·dy at 0(SP) from the packed dy of both
// tiles, with d broadcast in D.
#define DD16(D) \
	VMULPS  2432(R14), D, Y0; \
	VMOVUPS Y0, 0(SP); \
	VMULPS  2432(DI), D, Y0; \
	VMOVUPS Y0, 32(SP)

// CLEAR16 zeroes the sixteen float accumulators at 64(SP) (loop label lbl).
#define CLEAR16(lbl) \
	VPXORD  Z0, Z0, Z0; \
	LEAQ    64(SP), AX; \
	MOVQ    $16, BX; \
lbl: \
	VMOVUPS Z0, (AX); \
	ADDQ    $64, AX; \
	DECQ    BX; \
	JNZ     lbl

// func gemmQ4KQ8KAVX2(x, y *byte, lda, nb int, out *float32, ldo int)
TEXT ·gemmQ4KQ8KAVX2(SB), NOSPLIT, $192-48
	ARGS
	VXORPS  Y0, Y0, Y0
	VMOVUPS Y0, 0(SP)
	VMOVUPS Y0, 32(SP)
	VMOVUPS Y0, 64(SP)
	VMOVUPS Y0, 96(SP)
	VMOVUPS Y0, 128(SP)
	VMOVUPS Y0, 160(SP)
	BCAST8($0x0F0F0F0F, X14, Y14)

q4kloop:
	SCALES6
	VMOVQ       R8, X8
	VPMOVZXBW   X8, X8
	VINSERTI128 $1, X8, Y8, Y8
	VMOVQ       R9, X9
	VPMOVZXBW   X9, X9
	VMOVD       0(SI), X4
	VCVTPH2PS   X4, X4
	VPXOR       Y10, Y10, Y10
	VPXOR       Y11, Y11, Y11
	VPXOR       Y12, Y12, Y12
	VPXOR       Y13, Y13, Y13
	CHUNK4(16, 4, 36, gemmShufK4<>+0(SB), gemmShufK4<>+32(SB))
	CHUNK4(48, 68, 100, gemmShufK4<>+64(SB), gemmShufK4<>+96(SB))
	CHUNK4(80, 132, 164, gemmShufK4<>+128(SB), gemmShufK4<>+160(SB))
	CHUNK4(112, 196, 228, gemmShufK4<>+192(SB), gemmShufK4<>+224(SB))
	END4(DI, Y10, 0, 128)
	END4(R11, Y11, 32, 144)
	END4(R12, Y12, 64, 160)
	END4(R13, Y13, 96, 176)
	NEXT(144)
	DECQ CX
	JNZ  q4kloop

	OUTS
	RES4(0, 128)
	RES4(32, 144)
	RES4(64, 160)
	RES4(96, 176)
	VZEROUPPER
	RET

// Q5_K, AVX2: as Q4_K, with the fifth bit of each weight taken from qh
// (Y7, consumed bit by bit as the single-row kernel's HIQ5K does).

// CHUNK5 decodes the 64 weights of chunk c (quants at qoff, two bits of qh
// from Y7) and adds them, times each token's activations, to the lanes.
#define CHUNK5(qoff, ylo, yhi, slo, shi) \
	VMOVDQU qoff(SI), Y2; \
	VPSRLW  $4, Y2, Y3; \
	VPAND   Y14, Y2, Y2; \
	VPAND   Y14, Y3, Y3; \
	VPAND   gemmBit0<>(SB), Y7, Y5; \
	VPSLLW  $4, Y5, Y5; \
	VPOR    Y5, Y2, Y2; \
	VPSRLW  $1, Y7, Y7; \
	VPAND   gemmBit0<>(SB), Y7, Y5; \
	VPSLLW  $4, Y5, Y5; \
	VPOR    Y5, Y3, Y3; \
	VPSRLW  $1, Y7, Y7; \
	VPSHUFB slo, Y8, Y5; \
	VPSHUFB shi, Y8, Y6; \
	TOK4(DI, Y10, ylo, yhi); \
	TOK4(R11, Y11, ylo, yhi); \
	TOK4(R12, Y12, ylo, yhi); \
	TOK4(R13, Y13, ylo, yhi)

// func gemmQ5KQ8KAVX2(x, y *byte, lda, nb int, out *float32, ldo int)
TEXT ·gemmQ5KQ8KAVX2(SB), NOSPLIT, $192-48
	ARGS
	VXORPS  Y0, Y0, Y0
	VMOVUPS Y0, 0(SP)
	VMOVUPS Y0, 32(SP)
	VMOVUPS Y0, 64(SP)
	VMOVUPS Y0, 96(SP)
	VMOVUPS Y0, 128(SP)
	VMOVUPS Y0, 160(SP)
	BCAST8($0x0F0F0F0F, X14, Y14)

q5kloop:
	SCALES6
	VMOVQ       R8, X8
	VPMOVZXBW   X8, X8
	VINSERTI128 $1, X8, Y8, Y8
	VMOVQ       R9, X9
	VPMOVZXBW   X9, X9
	VMOVD       0(SI), X4
	VCVTPH2PS   X4, X4
	VPXOR       Y10, Y10, Y10
	VPXOR       Y11, Y11, Y11
	VPXOR       Y12, Y12, Y12
	VPXOR       Y13, Y13, Y13
	VMOVDQU     16(SI), Y7
	CHUNK5(48, 4, 36, gemmShufK4<>+0(SB), gemmShufK4<>+32(SB))
	CHUNK5(80, 68, 100, gemmShufK4<>+64(SB), gemmShufK4<>+96(SB))
	CHUNK5(112, 132, 164, gemmShufK4<>+128(SB), gemmShufK4<>+160(SB))
	CHUNK5(144, 196, 228, gemmShufK4<>+192(SB), gemmShufK4<>+224(SB))
	END4(DI, Y10, 0, 128)
	END4(R11, Y11, 32, 144)
	END4(R12, Y12, 64, 160)
	END4(R13, Y13, 96, 176)
	NEXT(176)
	DECQ CX
	JNZ  q5kloop

	OUTS
	RES4(0, 128)
	RES4(32, 144)
	RES4(64, 160)
	RES4(96, 176)
	VZEROUPPER
	RET

// Q4_K, AVX-512. Per token: int32 block lanes in Z10-Z13, float
// accumulators (sixteen lanes, as Z0 of the single-row kernel) in Z16-Z19,
// min accumulators (its X1) in X20-X23.

// TOK4Z adds token P's products with the 64 decoded weights in Z2, weighted
// by the scale words in Z3, to the lanes in A (first chunk: OP = VPMADDWD
// sets them; then VPDPWSSD adds), using T as scratch.
#define TOK4Z(P, A, T, yoff, OP) \
	VPMADDUBSW yoff(P), Z2, T; \
	OP         Z3, T, A

// CHUNKQ4Z decodes chunk c: 32 quant bytes at qoff, low nibbles then high
// nibbles, as the single-row kernel's CHUNKK4, with the scale words of
// the mask smem, and multiplies it with each token's activations at yoff
// (TOKS: the tokens of the kernel).
#define CHUNKQ4Z(TOKS, qoff, yoff, smem, OP) \
	VMOVDQU      qoff(SI), Y2; \
	VPSRLW       $4, Y2, Y3; \
	VINSERTI64X4 $1, Y3, Z2, Z2; \
	VPANDD       Z14, Z2, Z2; \
	VPSHUFB      smem, Z8, Z3; \
	TOKS(yoff, OP)

// TOKS4Z multiplies the chunk with the four tokens' activations at yoff.
#define TOKS4Z(yoff, OP) \
	TOK4Z(DI, Z10, Z24, yoff, OP); \
	TOK4Z(R11, Z11, Z25, yoff, OP); \
	TOK4Z(R12, Z12, Z26, yoff, OP); \
	TOK4Z(R13, Z13, Z27, yoff, OP)

// CHUNK4Z is CHUNKQ4Z for the four tokens.
#define CHUNK4Z(qoff, yoff, smem, OP) CHUNKQ4Z(TOKS4Z, qoff, yoff, smem, OP)

// CHUNKS4 runs the chunk step CH over the four chunks of a Q4_K block.
#define CHUNKS4(CH) \
	CH(16, 4, gemmShufK4<>+0(SB), VPMADDWD); \
	CH(48, 68, gemmShufK4<>+64(SB), VPDPWSSD); \
	CH(80, 132, gemmShufK4<>+128(SB), VPDPWSSD); \
	CH(112, 196, gemmShufK4<>+192(SB), VPDPWSSD)

// BLOCKQ4KZ starts a Q4_K block of the four- and two-token kernels:
// prefetch, the eight scales as int16 in every 128-bit lane (Z8), the mins
// (X9), and (d, dmin) in X4.
#define BLOCKQ4KZ \
	SCALESQ4KZ; \
	VMOVD      0(SI), X4; \
	VCVTPH2PS  X4, X4

// SCALESQ4KZ starts a Q4_K block of the AVX-512 tiles (in place and
// packed): prefetch, the eight scales as int16 in every 128-bit lane (Z8)
// and the eight mins as int16 in X9.
#define SCALESQ4KZ \
	PREFETCHT0 (DOTPF+0)(SI); \
	PREFETCHT0 (DOTPF+64)(SI); \
	PREFETCHT0 (DOTPF+128)(SI); \
	SCALES6; \
	VMOVQ      R8, X8; \
	VPMOVZXBW  X8, X8; \
	VSHUFI32X4 $0, Z8, Z8, Z8; \
	VMOVQ      R9, X9; \
	VPMOVZXBW  X9, X9

// END4Z adds token P's block (lanes A) to its accumulators ACC and MACC.
#define END4Z(P, A, ACC, MACC) \
	MINS4(P, MACC); \
	VBROADCASTSS X1, Z1; \
	VCVTDQ2PS    A, A; \
	VFMADD231PS  Z1, A, ACC

// RES4Z stores hsum(ACC) − hsum(MACC) at DX as the single-row kernel does
// and advances DX.
#define RES4Z(ACC, MACC) \
	VMOVAPS       ACC, Z0; \
	VMOVAPS       MACC, X1; \
	KSUBZ; \
	VMOVSS        X0, (DX); \
	ADDQ          BX, DX

// Q4KZBLOCKS is the block loop (label lbl) of the in-place Q4_K kernels:
// CH multiplies a chunk with the tile's tokens, ENDS ends their blocks.
#define Q4KZBLOCKS(lbl, CH, ENDS) \
lbl: \
	BLOCKQ4KZ; \
	CHUNKS4(CH); \
	ENDS; \
	NEXT(144); \
	DECQ CX; \
	JNZ  lbl

// ENDS4Q4Z and ENDS2Q4Z end the block for the four (two) tokens.
#define ENDS4Q4Z \
	END4Z(DI, Z10, Z16, X20); \
	END4Z(R11, Z11, Z17, X21); \
	END4Z(R12, Z12, Z18, X22); \
	END4Z(R13, Z13, Z19, X23)

#define ENDS2Q4Z \
	END4Z(DI, Z10, Z16, X20); \
	END4Z(R11, Z11, Z17, X21)

// func gemmQ4KQ8KAVX512(x, y *byte, lda, nb int, out *float32, ldo int)
TEXT ·gemmQ4KQ8KAVX512(SB), NOSPLIT, $0-48
	ARGS
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23
	MOVL   $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z14

	Q4KZBLOCKS(q4kzloop, CHUNK4Z, ENDS4Q4Z)

	OUTS
	RES4Z(Z16, X20)
	RES4Z(Z17, X21)
	RES4Z(Z18, X22)
	RES4Z(Z19, X23)
	VZEROUPPER
	RET

// Q6_K, AVX2. Per token: int32 block lanes in Y6, Y7, Y8, Y11, starting at
// −32·Σ scale_s·bsums[s] (the offset of the weights q − 32); float
// accumulators (the single-row kernel's Y0) at 0, 32, 64, 96(SP).

// CORR6 sets token P's lanes A to −32·Σ scale_s·bsums[s], with the sixteen
// int16 scales in Y15 and zero in Y0.
#define CORR6(P, A) \
	VPMADDWD 260(P), Y15, A; \
	VPSLLD   $5, A, A; \
	VPSUBD   A, Y0, A

// TOK6 adds the four tokens' products with the weights in Y4, weighted by
// the scale words in Y5, to their lanes.
#define TOK6(yoff) \
	VPMADDUBSW yoff(DI), Y4, Y0; \
	VPMADDWD   Y5, Y0, Y0; \
	VPADDD     Y0, Y6, Y6; \
	VPMADDUBSW yoff(R11), Y4, Y1; \
	VPMADDWD   Y5, Y1, Y1; \
	VPADDD     Y1, Y7, Y7; \
	VPMADDUBSW yoff(R12), Y4, Y13; \
	VPMADDWD   Y5, Y13, Y13; \
	VPADDD     Y13, Y8, Y8; \
	VPMADDUBSW yoff(R13), Y4, Y15; \
	VPMADDWD   Y5, Y15, Y15; \
	VPADDD     Y15, Y11, Y11

// HALF6 handles the 128 elements of half h (ql at qlo, qh at qho, scales at
// sco, activations at yo) as the single-row kernel's HALFQ6.
#define HALF6(qlo, qho, sco, yo) \
	VPMOVSXBW   sco(SI), X9; \
	VINSERTI128 $1, X9, Y9, Y9; \
	VMOVDQU     qlo(SI), Y2; \
	VMOVDQU     qlo+32(SI), Y3; \
	VMOVDQU     qho(SI), Y10; \
	VPAND       Y14, Y2, Y4; \
	VPAND       Y12, Y10, Y5; \
	VPSLLW      $4, Y5, Y5; \
	VPOR        Y5, Y4, Y4; \
	VPSHUFB     gemmShufQ6<>+0(SB), Y9, Y5; \
	TOK6(yo); \
	VPAND       Y14, Y3, Y4; \
	VPSRLW      $2, Y10, Y5; \
	VPAND       Y12, Y5, Y5; \
	VPSLLW      $4, Y5, Y5; \
	VPOR        Y5, Y4, Y4; \
	VPSHUFB     gemmShufQ6<>+32(SB), Y9, Y5; \
	TOK6(yo+32); \
	VPSRLW      $4, Y2, Y4; \
	VPAND       Y14, Y4, Y4; \
	VPSRLW      $4, Y10, Y5; \
	VPAND       Y12, Y5, Y5; \
	VPSLLW      $4, Y5, Y5; \
	VPOR        Y5, Y4, Y4; \
	VPSHUFB     gemmShufQ6<>+64(SB), Y9, Y5; \
	TOK6(yo+64); \
	VPSRLW      $4, Y3, Y4; \
	VPAND       Y14, Y4, Y4; \
	VPSRLW      $6, Y10, Y5; \
	VPAND       Y12, Y5, Y5; \
	VPSLLW      $4, Y5, Y5; \
	VPOR        Y5, Y4, Y4; \
	VPSHUFB     gemmShufQ6<>+96(SB), Y9, Y5; \
	TOK6(yo+96)

// ENDT adds token P's int32 lanes A times D·dy (D a block scale in the
// low float of an X register) to its float accumulator at acc(SP), as the
// single-row kernels' FMAD16 does (Y1, Y2 scratch).
#define ENDT(P, A, acc, D) \
	VCVTDQ2PS    A, A; \
	VMULSS       0(P), D, X2; \
	VBROADCASTSS X2, Y2; \
	VMOVUPS      acc(SP), Y1; \
	VFMADD231PS  Y2, A, Y1; \
	VMOVUPS      Y1, acc(SP)

// RES6 stores hsum(acc) at DX and advances DX.
#define RES6(acc) \
	VMOVUPS acc(SP), Y0; \
	HSUM(Y0, X0, X1); \
	VMOVSS  X0, (DX); \
	ADDQ    BX, DX

// func gemmQ6KQ8KAVX2(x, y *byte, lda, nb int, out *float32, ldo int)
TEXT ·gemmQ6KQ8KAVX2(SB), NOSPLIT, $128-48
	ARGS
	VXORPS  Y0, Y0, Y0
	VMOVUPS Y0, 0(SP)
	VMOVUPS Y0, 32(SP)
	VMOVUPS Y0, 64(SP)
	VMOVUPS Y0, 96(SP)
	BCAST8($0x0F0F0F0F, X14, Y14)
	BCAST8($0x03030303, X12, Y12)

q6kloop:
	VPMOVSXBW 192(SI), Y15
	VPXOR     Y0, Y0, Y0
	CORR6(DI, Y6)
	CORR6(R11, Y7)
	CORR6(R12, Y8)
	CORR6(R13, Y11)
	HALF6(0, 128, 192, 4)
	HALF6(64, 160, 200, 132)
	MOVWLZX   208(SI), AX
	VMOVD     AX, X13
	VCVTPH2PS X13, X13
	ENDT(DI, Y6, 0, X13)
	ENDT(R11, Y7, 32, X13)
	ENDT(R12, Y8, 64, X13)
	ENDT(R13, Y11, 96, X13)
	NEXT(210)
	DECQ CX
	JNZ  q6kloop

	OUTS
	RES6(0)
	RES6(32)
	RES6(64)
	RES6(96)
	VZEROUPPER
	RET

// Q2_K, AVX2: the single-row kernel's steps (dotk_amd64.s) for four tokens,
// each block's 2-bit planes and scale words decoded once. Per token: int32
// block lanes in Y6, Y7, Y10, Y3; the single-row kernel's two float
// accumulators (its Y0: d terms, Y1: dmin terms) at 32t and 128+32t(SP).

// MINS2 adds token P's min terms Σ m·bsums (mins as words in Y3) times
// dmin·dy (dmin in X14) to its accumulator at acc(SP).
#define MINS2(P, acc) \
	VPMADDWD 260(P), Y3, Y0; \
	ENDT(P, Y0, acc, X14)

// TOKL adds the four tokens' products with the weights in Y4, weighted by
// the scale words in Y5, to their lanes T0-T3 (scratch Y0, Y1, Y13, Y15).
#define TOKL(yoff, T0, T1, T2, T3) \
	VPMADDUBSW yoff(DI), Y4, Y0; \
	VPMADDWD   Y5, Y0, Y0; \
	VPADDD     Y0, T0, T0; \
	VPMADDUBSW yoff(R11), Y4, Y1; \
	VPMADDWD   Y5, Y1, Y1; \
	VPADDD     Y1, T1, T1; \
	VPMADDUBSW yoff(R12), Y4, Y13; \
	VPMADDWD   Y5, Y13, Y13; \
	VPADDD     Y13, T2, T2; \
	VPMADDUBSW yoff(R13), Y4, Y15; \
	VPMADDWD   Y5, Y15, Y15; \
	VPADDD     Y15, T3, T3

#define TOK2(yoff) TOKL(yoff, Y6, Y7, Y10, Y3)

// PLANE2T is the single-row kernel's PLANE2 for the four tokens.
#define PLANE2T(p, yo) \
	VPSRLW  $(2*p), Y2, Y4; \
	VPAND   Y12, Y4, Y4; \
	VPSHUFB gemmShufQ6<>+(32*p)(SB), Y9, Y5; \
	TOK2(yo)

// RES2 stores hsum(d terms) − hsum(dmin terms) of one token at DX and
// advances DX.
#define RES2(acc) \
	VMOVUPS acc(SP), Y0; \
	VMOVUPS (128+acc)(SP), Y1; \
	HSUM(Y0, X0, X2); \
	HSUM(Y1, X1, X2); \
	VSUBSS  X1, X0, X0; \
	VMOVSS  X0, (DX); \
	ADDQ    BX, DX

// func gemmQ2KQ8KAVX2(x, y *byte, lda, nb int, out *float32, ldo int)
TEXT ·gemmQ2KQ8KAVX2(SB), NOSPLIT, $256-48
	ARGS
	VXORPS  Y0, Y0, Y0
	VMOVUPS Y0, 0(SP)
	VMOVUPS Y0, 32(SP)
	VMOVUPS Y0, 64(SP)
	VMOVUPS Y0, 96(SP)
	VMOVUPS Y0, 128(SP)
	VMOVUPS Y0, 160(SP)
	VMOVUPS Y0, 192(SP)
	VMOVUPS Y0, 224(SP)
	BCAST8($0x0F0F0F0F, X11, Y11)
	BCAST8($0x03030303, X12, Y12)

q2kloop:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	Q2KSCALES
	VPMOVZXBW  X8, Y3
	MOVWLZX    82(SI), AX
	VMOVD      AX, X14
	VCVTPH2PS  X14, X14
	MINS2(DI, 128)
	MINS2(R11, 160)
	MINS2(R12, 192)
	MINS2(R13, 224)
	VPMOVZXBW  X9, Y8
	VPXOR      Y6, Y6, Y6
	VPXOR      Y7, Y7, Y7
	VPXOR      Y10, Y10, Y10
	VPXOR      Y3, Y3, Y3
	Q2KPLANES(PLANE2T)
	MOVWLZX    80(SI), AX
	VMOVD      AX, X14
	VCVTPH2PS  X14, X14
	ENDT(DI, Y6, 0, X14)
	ENDT(R11, Y7, 32, X14)
	ENDT(R12, Y10, 64, X14)
	ENDT(R13, Y3, 96, X14)
	NEXT(84)
	DECQ CX
	JNZ  q2kloop

	OUTS
	RES2(0)
	RES2(32)
	RES2(64)
	RES2(96)
	VZEROUPPER
	RET

// Q3_K, AVX2: the single-row kernel's steps for four tokens, each block's
// scales, planes and high bits decoded once. Per token: int32 block lanes
// in Y6, Y7, Y11, Y3, starting at −4·Σ (S−32)·bsums (the single-row
// kernel subtracts it at the end: the same integers); float accumulators
// (its Y0) at 32t(SP). Y10 the hmask bytes, Y12 0x03 and Y14 0x01 bytes.

DATA q3kBias<>+0(SB)/8, $0x2020202020202020
DATA q3kBias<>+8(SB)/8, $0x2020202020202020
GLOBL q3kBias<>(SB), RODATA|NOPTR, $16

// CORR3 sets token P's lanes A to −4·Σ (S−32)·bsums (scale words in Y8,
// zero in Y0).
#define CORR3(P, A) \
	VPMADDWD 260(P), Y8, A; \
	VPSLLD   $2, A, A; \
	VPSUBD   A, Y0, A

// PLANE3T is the single-row kernel's PLANE3 for the four tokens.
#define PLANE3T(p, b, yo) \
	VPSRLW  $(2*p), Y2, Y4; \
	VPAND   Y12, Y4, Y4; \
	VPSRLW  $b, Y10, Y5; \
	VPAND   Y14, Y5, Y5; \
	VPSLLW  $2, Y5, Y5; \
	VPOR    Y5, Y4, Y4; \
	VPSHUFB gemmShufQ6<>+(32*p)(SB), Y9, Y5; \
	TOKL(yo, Y6, Y7, Y11, Y3)

// func gemmQ3KQ8KAVX2(x, y *byte, lda, nb int, out *float32, ldo int)
TEXT ·gemmQ3KQ8KAVX2(SB), NOSPLIT, $128-48
	ARGS
	VXORPS  Y0, Y0, Y0
	VMOVUPS Y0, 0(SP)
	VMOVUPS Y0, 32(SP)
	VMOVUPS Y0, 64(SP)
	VMOVUPS Y0, 96(SP)
	BCAST8($0x03030303, X12, Y12)
	BCAST8($0x01010101, X14, Y14)
	MOVQ   $0x0F0F0F0F0F0F0F0F, R8

q3kloop:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	Q3KSCALES(R14, q3kBias<>(SB))
	VPXOR      Y0, Y0, Y0
	CORR3(DI, Y6)
	CORR3(R11, Y7)
	CORR3(R12, Y11)
	CORR3(R13, Y3)
	Q3KPLANES(PLANE3T)
	MOVWLZX    108(SI), AX
	VMOVD      AX, X4
	VCVTPH2PS  X4, X4
	ENDT(DI, Y6, 0, X4)
	ENDT(R11, Y7, 32, X4)
	ENDT(R12, Y11, 64, X4)
	ENDT(R13, Y3, 96, X4)
	NEXT(110)
	DECQ CX
	JNZ  q3kloop

	OUTS
	RES6(0)
	RES6(32)
	RES6(64)
	RES6(96)
	VZEROUPPER
	RET

// Q6_K, AVX-512. Per token: int32 block lanes in Z20-Z23 (the offset
// subtracted first, in the low eight lanes as in the single-row kernel),
// float accumulators (its Z0) in Z16-Z19, scratch Z24-Z27.

// CORR6Z sets token P's lanes A to −[32·Σ scale_s·bsums[s], 0], with the
// sixteen int16 scales in Y15.
#define CORR6Z(P, A) \
	VPMADDWD 260(P), Y15, Y0; \
	VPSLLD   $5, Y0, Y0; \
	VPXORD   A, A, A; \
	VPSUBD   Z0, A, A

// TOK6Z adds the four tokens' products with the 64 weights in Z4, weighted
// by the scale words in Z5, to their lanes.
#define TOK6Z(yoff) \
	VPMADDUBSW yoff(DI), Z4, Z24; \
	VPDPWSSD   Z5, Z24, Z20; \
	VPMADDUBSW yoff(R11), Z4, Z25; \
	VPDPWSSD   Z5, Z25, Z21; \
	VPMADDUBSW yoff(R12), Z4, Z26; \
	VPDPWSSD   Z5, Z26, Z22; \
	VPMADDUBSW yoff(R13), Z4, Z27; \
	VPDPWSSD   Z5, Z27, Z23

// HALFQ6Z handles the 128 elements of half h as the single-row kernel's
// HALFQ6: ql at qlo (64 bytes), qh at qho, scales at sco, for each token's
// activations at yo, then yo64 (TOKS: the tokens of the kernel). HALF6Z
// is it for the four tokens.
#define HALFQ6Z(TOKS, qlo, qho, sco, yo, yo64) \
	VPMOVSXBW    sco(SI), X9; \
	VSHUFI32X4   $0, Z9, Z9, Z9; \
	VMOVDQU64    qlo(SI), Z2; \
	VMOVDQU      qho(SI), Y10; \
	VPSRLW       $2, Y10, Y11; \
	VINSERTI64X4 $1, Y11, Z10, Z10; \
	VPANDD       Z14, Z2, Z4; \
	VPANDD       Z12, Z10, Z5; \
	VPSLLW       $4, Z5, Z5; \
	VPORD        Z5, Z4, Z4; \
	VPSHUFB      gemmShufQ6<>+0(SB), Z9, Z5; \
	TOKS(yo); \
	VPSRLW       $4, Z2, Z4; \
	VPANDD       Z14, Z4, Z4; \
	VPSRLW       $4, Z10, Z5; \
	VPANDD       Z12, Z5, Z5; \
	VPSLLW       $4, Z5, Z5; \
	VPORD        Z5, Z4, Z4; \
	VPSHUFB      gemmShufQ6<>+64(SB), Z9, Z5; \
	TOKS(yo64)

#define HALF6Z(qlo, qho, sco, yo) HALFQ6Z(TOK6Z, qlo, qho, sco, yo, yo+64)

// END6Z adds token P's block (lanes A) times d·dy (d in X13) to ACC.
#define END6Z(P, A, ACC) \
	VCVTDQ2PS    A, A; \
	VMULSS       0(P), X13, X0; \
	VBROADCASTSS X0, Z0; \
	VFMADD231PS  Z0, A, ACC

// RES6Z stores the sum of ACC's lanes at DX as the single-row kernel does
// and advances DX.
#define RES6Z(ACC) \
	VMOVAPS       ACC, Z0; \
	VEXTRACTF64X4 $1, Z0, Y2; \
	VADDPS        Y2, Y0, Y0; \
	HSUM(Y0, X0, X1); \
	VMOVSS        X0, (DX); \
	ADDQ          BX, DX

// Q6KZBLOCKS is the block loop (label lbl) of the in-place Q6_K kernels:
// CORRS starts the tokens' lanes at the offset term, HALF(qlo, qho, sco,
// yo) multiplies a half block with them, ENDS ends their blocks (d in X13).
#define Q6KZBLOCKS(lbl, CORRS, HALF, ENDS) \
lbl: \
	PREFETCHT0 (DOTPF+0)(SI); \
	PREFETCHT0 (DOTPF+64)(SI); \
	PREFETCHT0 (DOTPF+128)(SI); \
	PREFETCHT0 (DOTPF+192)(SI); \
	VPMOVSXBW  192(SI), Y15; \
	CORRS; \
	HALF(0, 128, 192, 4); \
	HALF(64, 160, 200, 132); \
	MOVWLZX    208(SI), AX; \
	VMOVD      AX, X13; \
	VCVTPH2PS  X13, X13; \
	ENDS; \
	NEXT(210); \
	DECQ CX; \
	JNZ  lbl

// CORRS4Z, ENDS4Q6Z (and the two-token CORRS2Z, ENDS2Q6Z) start and end
// the block for the four (two) tokens.
#define CORRS4Z \
	CORR6Z(DI, Z20); \
	CORR6Z(R11, Z21); \
	CORR6Z(R12, Z22); \
	CORR6Z(R13, Z23)

#define CORRS2Z \
	CORR6Z(DI, Z20); \
	CORR6Z(R11, Z21)

#define ENDS4Q6Z \
	END6Z(DI, Z20, Z16); \
	END6Z(R11, Z21, Z17); \
	END6Z(R12, Z22, Z18); \
	END6Z(R13, Z23, Z19)

#define ENDS2Q6Z \
	END6Z(DI, Z20, Z16); \
	END6Z(R11, Z21, Z17)

// func gemmQ6KQ8KAVX512(x, y *byte, lda, nb int, out *float32, ldo int)
TEXT ·gemmQ6KQ8KAVX512(SB), NOSPLIT, $0-48
	ARGS
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	MOVL   $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z14
	MOVL   $0x03030303, AX
	VPBROADCASTD AX, Z12

	Q6KZBLOCKS(q6kzloop, CORRS4Z, HALF6Z, ENDS4Q6Z)

	OUTS
	RES6Z(Z16)
	RES6Z(Z17)
	RES6Z(Z18)
	RES6Z(Z19)
	VZEROUPPER
	RET

// Eight-token packed tiles, AVX-512: as the four-token ones with the lanes
// of tokens 0-7 in more registers and their activations in a packed copy at
// q (R14), PACKB bytes a block: at q + PACKB·j for block j, the 256 int8
// values of token k at 256·k, its sixteen int16 block sums at 2048 + 32·k
// and their eight pair sums at 2304 + 16·k, its dy at 2432 + 4·k (see
// packQ8K), all 64-byte aligned when q is. A Q8_K block is 292 bytes, so
// in place nearly every 64-byte load of its values straddles two cache
// lines, and split loads slow the multiply-adds that consume them. The
// pair sums spare the Q4_K kernel a horizontal add per token and block,
// and the Q6_K kernel forms the offset term −32·Σ scale_s·bsums[s] with
// one multiply-add of the scales times −32 (the same integers: no
// product overflows). The products d·dy and dmin·dy are formed with the
// block's d and dmin broadcast instead of extracted from one vector: the
// same float products, so every result is the single-row kernel's bit for
// bit.
#define PACKB 2496

// TOK8Q4 expands M(m, A, F) for the eight tokens k of the Q4_K kernel:
// lanes A, float accumulator F, min accumulator at m = 16k(SP).
#define TOK8Q4(M) \
	M(0, Z10, Z20); \
	M(16, Z11, Z21); \
	M(32, Z12, Z22); \
	M(48, Z13, Z23); \
	M(64, Z16, Z24); \
	M(80, Z17, Z25); \
	M(96, Z18, Z26); \
	M(112, Z19, Z27)

// R8Q4K stores one token's result (RES4Z).
#define R8Q4K(m, A, F) \
	VMOVAPS       F, Z0; \
	VMOVUPS       m(SP), X1; \
	KSUBZ; \
	VMOVSS        X0, (DX); \
	ADDQ          BX, DX

// TOK8Q6 expands M(A, F) for the eight tokens of the Q6_K kernel: lanes A,
// float accumulator F.
#define TOK8Q6(M) \
	M(Z16, Z24); \
	M(Z17, Z25); \
	M(Z18, Z26); \
	M(Z19, Z27); \
	M(Z20, Z28); \
	M(Z21, Z29); \
	M(Z22, Z30); \
	M(Z23, Z31)

// R8Q6K stores a token's result (RES6Z).
#define R8Q6K(A, F) \
	VMOVAPS       F, Z0; \
	VEXTRACTF64X4 $1, Z0, Y2; \
	VADDPS        Y2, Y0, Y0; \
	HSUM(Y0, X0, X1); \
	VMOVSS        X0, (DX); \
	ADDQ          BX, DX

// TOK8Q4P expands M(k, A, yoff, OP) for the eight tokens k with lanes A
// of the Q4_K kernel.
#define TOK8Q4P(M, yoff, OP) \
	M(0, Z10, yoff, OP); \
	M(1, Z11, yoff, OP); \
	M(2, Z12, yoff, OP); \
	M(3, Z13, yoff, OP); \
	M(4, Z16, yoff, OP); \
	M(5, Z17, yoff, OP); \
	M(6, Z18, yoff, OP); \
	M(7, Z19, yoff, OP)

// T8Q4KP adds token k's products with the 64 weights in Z2, weighted by
// the scale words in Z3, to its lanes A (first chunk: OP = VPMADDWD sets
// them).
#define T8Q4KP(k, A, yoff, OP) \
	VPMADDUBSW (k*256+yoff-4)(R14), Z2, Z5; \
	OP         Z3, Z5, A

// TOKS8Q4P multiplies the chunk with the eight tokens' values; CHUNK8P is
// CHUNKQ4Z for them.
#define TOKS8Q4P(yoff, OP) TOK8Q4P(T8Q4KP, yoff, OP)

#define CHUNK8P(qoff, yoff, smem, OP) CHUNKQ4Z(TOKS8Q4P, qoff, yoff, smem, OP)

// gemmPermDy + 64h spreads the packed dy of tokens 4h..4h+3 over the four
// 128-bit lanes of a vector, one token per lane.
DATA gemmPermDy<>+0(SB)/8, $0x0000000000000000
DATA gemmPermDy<>+8(SB)/8, $0x0000000000000000
DATA gemmPermDy<>+16(SB)/8, $0x0000000100000001
DATA gemmPermDy<>+24(SB)/8, $0x0000000100000001
DATA gemmPermDy<>+32(SB)/8, $0x0000000200000002
DATA gemmPermDy<>+40(SB)/8, $0x0000000200000002
DATA gemmPermDy<>+48(SB)/8, $0x0000000300000003
DATA gemmPermDy<>+56(SB)/8, $0x0000000300000003
DATA gemmPermDy<>+64(SB)/8, $0x0000000400000004
DATA gemmPermDy<>+72(SB)/8, $0x0000000400000004
DATA gemmPermDy<>+80(SB)/8, $0x0000000500000005
DATA gemmPermDy<>+88(SB)/8, $0x0000000500000005
DATA gemmPermDy<>+96(SB)/8, $0x0000000600000006
DATA gemmPermDy<>+104(SB)/8, $0x0000000600000006
DATA gemmPermDy<>+112(SB)/8, $0x0000000700000007
DATA gemmPermDy<>+120(SB)/8, $0x0000000700000007
GLOBL gemmPermDy<>(SB), RODATA|NOPTR, $128

// BLOCKQ4KP starts a Q4_K block of the packed kernels: prefetch, the eight
// scales (Z8) and mins (Z9) as int16 in every 128-bit lane, d broadcast in
// Z15 and dmin in Z6.
#define BLOCKQ4KP \
	SCALESQ4KZ; \
	VSHUFI32X4   $0, Z9, Z9, Z9; \
	VMOVD        0(SI), X1; \
	VCVTPH2PS    X1, X1; \
	VBROADCASTSS X1, Z15; \
	VMOVSHDUP    X1, X6; \
	VBROADCASTSS X6, Z6

// E8Q4KP adds token k's block (lanes A) times d·dy to F (m = 16k; the
// eight products d·dy at 0(SP), formed per block from the packed dy).
#define E8Q4KP(m, A, F) \
	VBROADCASTSS (m/4)(SP), Z1; \
	VCVTDQ2PS    A, A; \
	VFMADD231PS  Z1, A, F

// MINS8P adds the min terms of tokens 4h..4h+3 (pair sums at poff) to MACC,
// one token per 128-bit lane: the four lanes of each token get exactly the
// single-row kernel's MINSK4 (dmin·dy times Σ m_j·pairsum_j, fused), with
// the mins broadcast in Z9 and dmin in Z6.
#define MINS8P(poff, PERM, MACC) \
	VPMADDWD    poff(R14), Z9, Z0; \
	VCVTDQ2PS   Z0, Z0; \
	VPERMPS     2432(R14), PERM, Z1; \
	VMULPS      Z1, Z6, Z1; \
	VFMADD231PS Z1, Z0, MACC

// PARGS loads the arguments of a packed kernel: the weight row (SI), the
// packed tile (R14) and the block count (CX). POUTS points DX at out and
// holds the output stride in bytes in BX.
#define PARGS \
	MOVQ x+0(FP), SI; \
	MOVQ q+8(FP), R14; \
	MOVQ nb+16(FP), CX

#define POUTS \
	MOVQ out+24(FP), DX; \
	MOVQ ldo+32(FP), BX; \
	SHLQ $2, BX

// Q4KPBLOCKS is the block loop (label lbl) of the packed Q4_K kernels of
// eight tokens or fewer: CH multiplies a chunk with the tile's tokens, the
// products d·dy of its tokens go to 0(SP) (DY1 and DY15: Y1 and Y15 for
// eight, X1 and X15 for four or two), and ENDS ends their blocks.
#define Q4KPBLOCKS(lbl, CH, DY1, DY15, ENDS) \
lbl: \
	BLOCKQ4KP; \
	CHUNKS4(CH); \
	VMULPS  2432(R14), DY15, DY1; \
	VMOVUPS DY1, 0(SP); \
	ENDS; \
	ADDQ    $144, SI; \
	ADDQ    $PACKB, R14; \
	DECQ    CX; \
	JNZ     lbl

// ENDS8Q4P ends the block for the eight tokens: lanes times d·dy into
// their float accumulators, and the min terms of tokens 0-3 and 4-7.
#define ENDS8Q4P \
	TOK8Q4(E8Q4KP); \
	MINS8P(2304, Z30, Z28); \
	MINS8P(2368, Z31, Z29)

// func gemmQ4KQ8KAVX512x8p(x, q *byte, nb int, out *float32, ldo int)
//
// The min accumulators of tokens 0-3 and 4-7 live in Z28 and Z29, a token
// per 128-bit lane, and go to 16k(SP) for the final sums; y is not read.
TEXT ·gemmQ4KQ8KAVX512x8p(SB), NOSPLIT, $128-40
	PARGS
	VPXORD  Z20, Z20, Z20
	VPXORD  Z21, Z21, Z21
	VPXORD  Z22, Z22, Z22
	VPXORD  Z23, Z23, Z23
	VPXORD  Z24, Z24, Z24
	VPXORD  Z25, Z25, Z25
	VPXORD  Z26, Z26, Z26
	VPXORD  Z27, Z27, Z27
	VPXORD  Z28, Z28, Z28
	VPXORD  Z29, Z29, Z29
	MOVL    $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z14
	VMOVDQU32 gemmPermDy<>+0(SB), Z30
	VMOVDQU32 gemmPermDy<>+64(SB), Z31
	Q4KPBLOCKS(q4k8ploop, CHUNK8P, Y1, Y15, ENDS8Q4P)
	VMOVUPS Z28, 0(SP)
	VMOVUPS Z29, 64(SP)
	POUTS
	TOK8Q4(R8Q4K)
	VZEROUPPER
	RET

// TOK8Q6P expands M(k, A, yoff) for the eight tokens k with lanes A of the
// Q6_K packed kernel.
#define TOK8Q6P(M, yoff) \
	M(0, Z16, yoff); \
	M(1, Z17, yoff); \
	M(2, Z18, yoff); \
	M(3, Z19, yoff); \
	M(4, Z20, yoff); \
	M(5, Z21, yoff); \
	M(6, Z22, yoff); \
	M(7, Z23, yoff)

// T8Q6KP adds token k's products with the weights in Z4, weighted by the
// scale words in Z5, to its lanes A.
#define T8Q6KP(k, A, yoff) \
	VPMADDUBSW (k*256+yoff-4)(R14), Z4, Z3; \
	VPDPWSSD   Z5, Z3, A

// TOKS8Q6P multiplies the weights with the eight tokens' values; HALF8Q6P
// is HALFQ6Z for them.
#define TOKS8Q6P(yoff) TOK8Q6P(T8Q6KP, yoff)

#define HALF8Q6P(qlo, qho, sco, yo, yo64) HALFQ6Z(TOKS8Q6P, qlo, qho, sco, yo, yo64)

// E8Q6KP adds token k's block (lanes A) times d·dy to F, the eight
// products d·dy at 0(SP), formed per block from the packed dy.
#define E8Q6KP(k, A, F) \
	VCVTDQ2PS    A, A; \
	VBROADCASTSS (4*k)(SP), Z0; \
	VFMADD231PS  Z0, A, F

// Q6KPMASKS sets the nibble and two-bit masks of the packed Q6_K kernels.
#define Q6KPMASKS \
	MOVL         $0x0F0F0F0F, AX; \
	VPBROADCASTD AX, Z14; \
	MOVL         $0x03030303, AX; \
	VPBROADCASTD AX, Z12

// DYQ6P forms the products d·dy of the tile's tokens at 0(SP), d from the
// block broadcast in D13 (Y13 for eight tokens, X13 for four or two), D0
// the product's register.
#define DYQ6P(D13, D0) \
	MOVWLZX      208(SI), AX; \
	VMOVD        AX, X13; \
	VCVTPH2PS    X13, X13; \
	VBROADCASTSS X13, D13; \
	VMULPS       2432(R14), D13, D0; \
	VMOVUPS      D0, 0(SP)

// Q6KPBLOCKS is the block loop (label lbl) of the packed Q6_K kernels of
// eight tokens or fewer: CORR starts the tokens' lanes at the offset term,
// HALF multiplies a half block with them, DYQ6P(D13, D0) forms their d·dy
// and ENDS ends their blocks.
#define Q6KPBLOCKS(lbl, CORR, HALF, D13, D0, ENDS) \
lbl: \
	BLOCKQ6KP; \
	CORR; \
	HALF(0, 128, 192, 4, 68); \
	HALF(64, 160, 200, 132, 196); \
	DYQ6P(D13, D0); \
	ENDS; \
	ADDQ $210, SI; \
	ADDQ $PACKB, R14; \
	DECQ CX; \
	JNZ  lbl

// ENDS8Q6P ends the block for the eight tokens.
#define ENDS8Q6P \
	E8Q6KP(0, Z16, Z24); \
	E8Q6KP(1, Z17, Z25); \
	E8Q6KP(2, Z18, Z26); \
	E8Q6KP(3, Z19, Z27); \
	E8Q6KP(4, Z20, Z28); \
	E8Q6KP(5, Z21, Z29); \
	E8Q6KP(6, Z22, Z30); \
	E8Q6KP(7, Z23, Z31)

// func gemmQ6KQ8KAVX512x8p(x, q *byte, nb int, out *float32, ldo int)
TEXT ·gemmQ6KQ8KAVX512x8p(SB), NOSPLIT, $32-40
	PARGS
	VPXORD Z24, Z24, Z24
	VPXORD Z25, Z25, Z25
	VPXORD Z26, Z26, Z26
	VPXORD Z27, Z27, Z27
	VPXORD Z28, Z28, Z28
	VPXORD Z29, Z29, Z29
	VPXORD Z30, Z30, Z30
	VPXORD Z31, Z31, Z31
	Q6KPMASKS
	Q6KPBLOCKS(q6k8ploop, CORR8P(R14, Y16, Y17, Y18, Y19, Y20, Y21, Y22, Y23), HALF8Q6P, Y13, Y0, ENDS8Q6P)
	POUTS
	TOK8Q6(R8Q6K)
	VZEROUPPER
	RET

// Two-token tiles, AVX-512: the four-token kernels with tokens DI and R11
// only. An expert of a batched decode step often has two tokens; with the
// single-row kernel the second one re-reads and re-decodes every block.

// CHUNK2Z is CHUNK4Z for two tokens.
// TOKS2Z multiplies the chunk with the two tokens' activations.
#define TOKS2Z(yoff, OP) \
	TOK4Z(DI, Z10, Z24, yoff, OP); \
	TOK4Z(R11, Z11, Z25, yoff, OP)

#define CHUNK2Z(qoff, yoff, smem, OP) CHUNKQ4Z(TOKS2Z, qoff, yoff, smem, OP)

// func gemmQ4KQ8KAVX512x2(x, y *byte, lda, nb int, out *float32, ldo int)
TEXT ·gemmQ4KQ8KAVX512x2(SB), NOSPLIT, $0-48
	ARGS
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	MOVL   $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z14

	Q4KZBLOCKS(q4kx2loop, CHUNK2Z, ENDS2Q4Z)

	OUTS
	RES4Z(Z16, X20)
	RES4Z(Z17, X21)
	VZEROUPPER
	RET

// TOK6Z2 is TOK6Z for two tokens.
#define TOK6Z2(yoff) \
	VPMADDUBSW yoff(DI), Z4, Z24; \
	VPDPWSSD   Z5, Z24, Z20; \
	VPMADDUBSW yoff(R11), Z4, Z25; \
	VPDPWSSD   Z5, Z25, Z21

// HALF6Z2 is HALF6Z for two tokens.
#define HALF6Z2(qlo, qho, sco, yo) HALFQ6Z(TOK6Z2, qlo, qho, sco, yo, yo+64)

// func gemmQ6KQ8KAVX512x2(x, y *byte, lda, nb int, out *float32, ldo int)
TEXT ·gemmQ6KQ8KAVX512x2(SB), NOSPLIT, $0-48
	ARGS
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	MOVL   $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z14
	MOVL   $0x03030303, AX
	VPBROADCASTD AX, Z12

	Q6KZBLOCKS(q6kx2loop, CORRS2Z, HALF6Z2, ENDS2Q6Z)

	OUTS
	RES6Z(Z16)
	RES6Z(Z17)
	VZEROUPPER
	RET

// Sixteen-token packed tile, Q6_K, AVX-512: the output head of a batched
// decode step of sixteen sequences, where two eight-token tiles decoded
// every weight block twice. Tokens 0-7 come from the packed tile at q
// (R14), tokens 8-15 from the next one at q + PACKB·nb (DI). The sixteen
// tokens' lanes fill Z16-Z31, so their float accumulators live on the
// stack at 64 + 64k(SP) (where the eight-token tile keeps them in Z24-Z31): each block
// end loads, fuses and stores them, with the same float operations as the
// single-row kernel (F + A·(d·dy), fused), so results are unchanged bit
// for bit.

// T16Q6 adds token k's products with the weights in Z4 (scale words Z5)
// to its lanes A; its values are at off(P).
#define T16Q6(P, off, A) \
	VPMADDUBSW off(P), Z4, Z3; \
	VPDPWSSD   Z5, Z3, A

// TOK16Q6 runs T16Q6 for the sixteen tokens at activation offset yoff.
#define TOK16Q6(yoff) \
	T16Q6(R14, (0*256+yoff-4), Z16); \
	T16Q6(R14, (1*256+yoff-4), Z17); \
	T16Q6(R14, (2*256+yoff-4), Z18); \
	T16Q6(R14, (3*256+yoff-4), Z19); \
	T16Q6(R14, (4*256+yoff-4), Z20); \
	T16Q6(R14, (5*256+yoff-4), Z21); \
	T16Q6(R14, (6*256+yoff-4), Z22); \
	T16Q6(R14, (7*256+yoff-4), Z23); \
	T16Q6(DI, (0*256+yoff-4), Z24); \
	T16Q6(DI, (1*256+yoff-4), Z25); \
	T16Q6(DI, (2*256+yoff-4), Z26); \
	T16Q6(DI, (3*256+yoff-4), Z27); \
	T16Q6(DI, (4*256+yoff-4), Z28); \
	T16Q6(DI, (5*256+yoff-4), Z29); \
	T16Q6(DI, (6*256+yoff-4), Z30); \
	T16Q6(DI, (7*256+yoff-4), Z31)

// HALF16Q6 is HALF8Q6P for sixteen tokens.
#define HALF16Q6(qlo, qho, sco, yo, yo64) HALFQ6Z(TOK16Q6, qlo, qho, sco, yo, yo64)

// E16Q6 ends token k's block: F_k(SP) += A·(d·dy_k), fused.
#define E16Q6(k, A) \
	VCVTDQ2PS    A, A; \
	VBROADCASTSS (4*k)(SP), Z0; \
	VFMADD213PS  (64+64*k)(SP), Z0, A; \
	VMOVUPS      A, (64+64*k)(SP)

// R16Q6 stores token k's result as R8Q6K does and advances DX.
#define R16Q6(k) \
	VMOVUPS       (64+64*k)(SP), Z0; \
	VEXTRACTF64X4 $1, Z0, Y2; \
	VADDPS        Y2, Y0, Y0; \
	HSUM(Y0, X0, X1); \
	VMOVSS        X0, (DX); \
	ADDQ          BX, DX

// func gemmQ6KQ8KAVX512x16p(x, q *byte, nb int, out *float32, ldo int)
TEXT ·gemmQ6KQ8KAVX512x16p(SB), 0, $1088-40
	PARGS
	MOVQ  CX, DI
	IMULQ $PACKB, DI
	ADDQ  R14, DI
	CLEAR16(q6k16pclear)
	MOVL    $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z14
	MOVL    $0x03030303, AX
	VPBROADCASTD AX, Z12

q6k16ploop:
	BLOCKQ6KP
	CORR8P(R14, Y16, Y17, Y18, Y19, Y20, Y21, Y22, Y23)
	CORR8P(DI, Y24, Y25, Y26, Y27, Y28, Y29, Y30, Y31)
	HALF16Q6(0, 128, 192, 4, 68)
	HALF16Q6(64, 160, 200, 132, 196)
	MOVWLZX      208(SI), AX
	VMOVD        AX, X13
	VCVTPH2PS    X13, X13
	VBROADCASTSS X13, Y13
	DD16(Y13)
	ENDS16
	ADDQ $210, SI
	ADDQ $PACKB, R14
	ADDQ $PACKB, DI
	DECQ CX
	JNZ  q6k16ploop

	POUTS
	R16Q6(0)
	R16Q6(1)
	R16Q6(2)
	R16Q6(3)
	R16Q6(4)
	R16Q6(5)
	R16Q6(6)
	R16Q6(7)
	R16Q6(8)
	R16Q6(9)
	R16Q6(10)
	R16Q6(11)
	R16Q6(12)
	R16Q6(13)
	R16Q6(14)
	R16Q6(15)
	VZEROUPPER
	RET

// Sixteen-token packed tile, Q4_K, AVX-512: as the Q6_K one, tokens 0-7
// from the packed tile at q (R14) and 8-15 from the next (DI), lanes in
// Z16-Z31, float accumulators at 64 + 64k(SP), the products d·dy at
// 4k(SP), and the min accumulators of tokens 0-3, 4-7, 8-11 and 12-15 in
// Z12, Z13, Z7 and Z4 (one token per 128-bit lane, as MINS8P), stored to
// 1088 + 16k(SP) for the final sums. Every float operation is the
// single-row kernel's, so results are unchanged bit for bit.

// T16Q4 adds token k's products with the weights in Z2 (scale words Z3)
// to its lanes A; its values are at off(P).
#define T16Q4(P, off, A, OP) \
	VPMADDUBSW off(P), Z2, Z5; \
	OP         Z3, Z5, A

// TOKS16Q4 multiplies the chunk with the sixteen tokens' packed values;
// CHUNK16P is CHUNKQ4Z for them.
#define TOKS16Q4(yoff, OP) \
	T16Q4(R14, (0*256+yoff-4), Z16, OP); \
	T16Q4(R14, (1*256+yoff-4), Z17, OP); \
	T16Q4(R14, (2*256+yoff-4), Z18, OP); \
	T16Q4(R14, (3*256+yoff-4), Z19, OP); \
	T16Q4(R14, (4*256+yoff-4), Z20, OP); \
	T16Q4(R14, (5*256+yoff-4), Z21, OP); \
	T16Q4(R14, (6*256+yoff-4), Z22, OP); \
	T16Q4(R14, (7*256+yoff-4), Z23, OP); \
	T16Q4(DI, (0*256+yoff-4), Z24, OP); \
	T16Q4(DI, (1*256+yoff-4), Z25, OP); \
	T16Q4(DI, (2*256+yoff-4), Z26, OP); \
	T16Q4(DI, (3*256+yoff-4), Z27, OP); \
	T16Q4(DI, (4*256+yoff-4), Z28, OP); \
	T16Q4(DI, (5*256+yoff-4), Z29, OP); \
	T16Q4(DI, (6*256+yoff-4), Z30, OP); \
	T16Q4(DI, (7*256+yoff-4), Z31, OP)

#define CHUNK16P(qoff, yoff, smem, OP) CHUNKQ4Z(TOKS16Q4, qoff, yoff, smem, OP)

// MINS16P is MINS8P with the packed tile at P and the permutation in PERM.
#define MINS16P(P, poff, PERM, MACC) \
	VPMADDWD    poff(P), Z9, Z0; \
	VCVTDQ2PS   Z0, Z0; \
	VPERMPS     2432(P), PERM, Z1; \
	VMULPS      Z1, Z6, Z1; \
	VFMADD231PS Z1, Z0, MACC

// R16Q4 stores token k's result as R8Q4K does and advances DX.
#define R16Q4(k) \
	VMOVUPS       (64+64*k)(SP), Z0; \
	VMOVUPS       (1088+16*k)(SP), X1; \
	KSUBZ; \
	VMOVSS        X0, (DX); \
	ADDQ          BX, DX

// func gemmQ4KQ8KAVX512x16p(x, q *byte, nb int, out *float32, ldo int)
TEXT ·gemmQ4KQ8KAVX512x16p(SB), 0, $1344-40
	PARGS
	MOVQ  CX, DI
	IMULQ $PACKB, DI
	ADDQ  R14, DI
	CLEAR16(q4k16pclear)
	VPXORD  Z4, Z4, Z4
	VPXORD  Z7, Z7, Z7
	VPXORD  Z12, Z12, Z12
	VPXORD  Z13, Z13, Z13
	MOVL    $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z14
	VMOVDQU32 gemmPermDy<>+0(SB), Z10
	VMOVDQU32 gemmPermDy<>+64(SB), Z11

q4k16ploop:
	BLOCKQ4KP
	CHUNKS4(CHUNK16P)
	DD16(Y15)
	ENDS16
	MINS16P(R14, 2304, Z10, Z12)
	MINS16P(R14, 2368, Z11, Z13)
	MINS16P(DI, 2304, Z10, Z7)
	MINS16P(DI, 2368, Z11, Z4)
	ADDQ $144, SI
	ADDQ $PACKB, R14
	ADDQ $PACKB, DI
	DECQ CX
	JNZ  q4k16ploop

	VMOVUPS Z12, 1088(SP)
	VMOVUPS Z13, 1152(SP)
	VMOVUPS Z7, 1216(SP)
	VMOVUPS Z4, 1280(SP)
	POUTS
	R16Q4(0)
	R16Q4(1)
	R16Q4(2)
	R16Q4(3)
	R16Q4(4)
	R16Q4(5)
	R16Q4(6)
	R16Q4(7)
	R16Q4(8)
	R16Q4(9)
	R16Q4(10)
	R16Q4(11)
	R16Q4(12)
	R16Q4(13)
	R16Q4(14)
	R16Q4(15)
	VZEROUPPER
	RET

// Four- and two-token packed tiles, AVX-512: the eight-token ones for the
// tokens 0-3 (or 0-1) of a packed copy, for the experts of a batched decode
// step, which get a few tokens each. In place, their activation loads
// straddle cache lines as the eight-token tile's did, and each token's min
// term costs a horizontal add of its block sums; packed, one MINS8P does
// the min terms of all four tokens (lanes of tokens past the tile's count
// compute from whatever the copy holds there and are never stored).

// TOK4Q4P expands M(k, A, yoff, OP) for tokens 0-3 of the Q4_K kernel.
#define TOK4Q4P(M, yoff, OP) \
	M(0, Z10, yoff, OP); \
	M(1, Z11, yoff, OP); \
	M(2, Z12, yoff, OP); \
	M(3, Z13, yoff, OP)

#define TOKS4Q4P(yoff, OP) TOK4Q4P(T8Q4KP, yoff, OP)

#define CHUNK4P(qoff, yoff, smem, OP) CHUNKQ4Z(TOKS4Q4P, qoff, yoff, smem, OP)

// TOK2Q4P expands M(k, A, yoff, OP) for tokens 0-1.
#define TOK2Q4P(M, yoff, OP) \
	M(0, Z10, yoff, OP); \
	M(1, Z11, yoff, OP)

#define TOKS2Q4P(yoff, OP) TOK2Q4P(T8Q4KP, yoff, OP)

#define CHUNK2P(qoff, yoff, smem, OP) CHUNKQ4Z(TOKS2Q4P, qoff, yoff, smem, OP)

// ENDS4Q4P and ENDS2Q4P end the block for tokens 0-3 (0-1): lanes times
// d·dy into their float accumulators, and the min terms of tokens 0-3 (one
// MINS8P; the lanes of tokens the tile does not have are never stored).
#define ENDS4Q4P \
	E8Q4KP(0, Z10, Z20); \
	E8Q4KP(16, Z11, Z21); \
	E8Q4KP(32, Z12, Z22); \
	E8Q4KP(48, Z13, Z23); \
	MINS8P(2304, Z30, Z28)

#define ENDS2Q4P \
	E8Q4KP(0, Z10, Z20); \
	E8Q4KP(16, Z11, Z21); \
	MINS8P(2304, Z30, Z28)

// Q4KPSTART sets the mask and the dy permutation of the small packed Q4_K
// kernels and zeroes their min accumulator.
#define Q4KPSTART \
	VPXORD       Z28, Z28, Z28; \
	MOVL         $0x0F0F0F0F, AX; \
	VPBROADCASTD AX, Z14; \
	VMOVDQU32    gemmPermDy<>+0(SB), Z30

// func gemmQ4KQ8KAVX512x4p(x, q *byte, nb int, out *float32, ldo int)
TEXT ·gemmQ4KQ8KAVX512x4p(SB), NOSPLIT, $64-40
	PARGS
	VPXORD  Z20, Z20, Z20
	VPXORD  Z21, Z21, Z21
	VPXORD  Z22, Z22, Z22
	VPXORD  Z23, Z23, Z23
	Q4KPSTART
	Q4KPBLOCKS(q4k4ploop, CHUNK4P, X1, X15, ENDS4Q4P)
	VMOVUPS Z28, 0(SP)
	POUTS
	R8Q4K(0, Z10, Z20)
	R8Q4K(16, Z11, Z21)
	R8Q4K(32, Z12, Z22)
	R8Q4K(48, Z13, Z23)
	VZEROUPPER
	RET

// func gemmQ4KQ8KAVX512x2p(x, q *byte, nb int, out *float32, ldo int)
TEXT ·gemmQ4KQ8KAVX512x2p(SB), NOSPLIT, $64-40
	PARGS
	VPXORD  Z20, Z20, Z20
	VPXORD  Z21, Z21, Z21
	Q4KPSTART
	Q4KPBLOCKS(q4k2ploop, CHUNK2P, X1, X15, ENDS2Q4P)
	VMOVUPS Z28, 0(SP)
	POUTS
	R8Q4K(0, Z10, Z20)
	R8Q4K(16, Z11, Z21)
	VZEROUPPER
	RET

// TOK4Q6P and TOK2Q6P expand M(k, A, yoff) for tokens 0-3 (0-1) of the
// Q6_K packed kernel.
#define TOK4Q6P(M, yoff) \
	M(0, Z16, yoff); \
	M(1, Z17, yoff); \
	M(2, Z18, yoff); \
	M(3, Z19, yoff)

#define TOK2Q6P(M, yoff) \
	M(0, Z16, yoff); \
	M(1, Z17, yoff)

#define TOKS4Q6P(yoff) TOK4Q6P(T8Q6KP, yoff)
#define TOKS2Q6P(yoff) TOK2Q6P(T8Q6KP, yoff)

#define HALF4Q6P(qlo, qho, sco, yo, yo64) HALFQ6Z(TOKS4Q6P, qlo, qho, sco, yo, yo64)
#define HALF2Q6P(qlo, qho, sco, yo, yo64) HALFQ6Z(TOKS2Q6P, qlo, qho, sco, yo, yo64)

// CORR4P and CORR2P start the lanes of tokens 0-3 (0-1) at the offset
// term, as CORR8P.
#define CORR4P \
	VPMADDWD 2048(R14), Y15, Y16; \
	VPMADDWD 2080(R14), Y15, Y17; \
	VPMADDWD 2112(R14), Y15, Y18; \
	VPMADDWD 2144(R14), Y15, Y19

#define CORR2P \
	VPMADDWD 2048(R14), Y15, Y16; \
	VPMADDWD 2080(R14), Y15, Y17

// ENDS4Q6P and ENDS2Q6P end the block for tokens 0-3 (0-1).
#define ENDS4Q6P \
	E8Q6KP(0, Z16, Z24); \
	E8Q6KP(1, Z17, Z25); \
	E8Q6KP(2, Z18, Z26); \
	E8Q6KP(3, Z19, Z27)

#define ENDS2Q6P \
	E8Q6KP(0, Z16, Z24); \
	E8Q6KP(1, Z17, Z25)

// func gemmQ6KQ8KAVX512x4p(x, q *byte, nb int, out *float32, ldo int)
TEXT ·gemmQ6KQ8KAVX512x4p(SB), NOSPLIT, $32-40
	PARGS
	VPXORD Z24, Z24, Z24
	VPXORD Z25, Z25, Z25
	VPXORD Z26, Z26, Z26
	VPXORD Z27, Z27, Z27
	Q6KPMASKS
	Q6KPBLOCKS(q6k4ploop, CORR4P, HALF4Q6P, X13, X0, ENDS4Q6P)
	POUTS
	R8Q6K(Z16, Z24)
	R8Q6K(Z17, Z25)
	R8Q6K(Z18, Z26)
	R8Q6K(Z19, Z27)
	VZEROUPPER
	RET

// func gemmQ6KQ8KAVX512x2p(x, q *byte, nb int, out *float32, ldo int)
TEXT ·gemmQ6KQ8KAVX512x2p(SB), NOSPLIT, $32-40
	PARGS
	VPXORD Z24, Z24, Z24
	VPXORD Z25, Z25, Z25
	Q6KPMASKS
	Q6KPBLOCKS(q6k2ploop, CORR2P, HALF2Q6P, X13, X0, ENDS2Q6P)
	POUTS
	R8Q6K(Z16, Z24)
	R8Q6K(Z17, Z25)
	VZEROUPPER
	RET
