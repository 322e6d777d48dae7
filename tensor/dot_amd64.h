// Macros shared by the dot product kernels (dot*_amd64.s).

// BCAST8 fills the dwords of Y with imm, through AX and X (the low half of Y).
#define BCAST8(imm, X, Y) \
	MOVL imm, AX; \
	VMOVD AX, X; \
	VPBROADCASTD X, Y

// ONES16 sets every int16 of Y to 1.
#define ONES16(Y) \
	VPCMPEQW Y, Y, Y; \
	VPSRLW $15, Y, Y

// HSUM adds the eight floats of Y (whose low half is X) into the low float
// of X, using T as scratch.
#define HSUM(Y, X, T) \
	VEXTRACTF128 $1, Y, T; \
	VADDPS T, X, X; \
	VMOVHLPS X, X, T; \
	VADDPS T, X, X; \
	VMOVSHDUP X, T; \
	VADDSS T, X, X

// KSUB leaves hsum(Y0) − hsum(X1) in the low float of X0, using X2 as
// scratch: the end of a K-quant dot product with min terms (Q4_K, Q5_K),
// the block sums in Y0 less the min terms in X1. KSUBZ first folds the
// upper half of Z0 into Y0, as the AVX-512 kernels' accumulators are.
#define KSUB \
	HSUM(Y0, X0, X2); \
	VMOVHLPS  X1, X1, X2; \
	VADDPS    X2, X1, X1; \
	VMOVSHDUP X1, X2; \
	VADDSS    X2, X1, X1; \
	VSUBSS    X1, X0, X0

#define KSUBZ \
	VEXTRACTF64X4 $1, Z0, Y2; \
	VADDPS        Y2, Y0, Y0; \
	KSUB

// DOTPF is how far ahead of the block being computed the quantized kernels
// prefetch weight bytes (PREFETCHT0 on every line as they go): a single
// token's product streams its weight rows from memory, one after the other,
// and the hardware prefetchers alone leave a core well short of the rate
// these loops reach with it. Past a row's end it fetches the next rows;
// past the last a prefetch is dropped, never faults.
#define DOTPF 2048

// UNPACKK4 unpacks the twelve bytes of 6-bit scales and mins of the Q4_K or
// Q5_K block at P into bytes: S the eight scales, M the eight mins (as
// ggml's get_scale_min_k4: with a, b, c the three words, sub-blocks 0-3
// take a & 63 and b & 63, 4-7 take (c & 15) | (a>>6)<<4 and
// c>>4 | (b>>6)<<4). A, B, C and T are scratch.
#define UNPACKK4(P, S, M, A, B, C, T) \
	MOVL  4(P), A; \
	MOVL  8(P), B; \
	MOVL  12(P), C; \
	MOVL  A, S; \
	ANDL  $0x3f3f3f3f, S; \
	MOVL  A, M; \
	SHRL  $6, M; \
	ANDL  $0x03030303, M; \
	SHLL  $4, M; \
	MOVL  C, T; \
	ANDL  $0x0f0f0f0f, T; \
	ORL   T, M; \
	SHLQ  $32, M; \
	ORQ   M, S; \
	MOVL  B, M; \
	ANDL  $0x3f3f3f3f, M; \
	MOVL  B, T; \
	SHRL  $6, T; \
	ANDL  $0x03030303, T; \
	SHLL  $4, T; \
	SHRL  $4, C; \
	ANDL  $0x0f0f0f0f, C; \
	ORL   C, T; \
	SHLQ  $32, T; \
	ORQ   T, M

// Q3KSCALES unpacks the sixteen 6-bit scales of the Q3_K block at SI, less
// 32, to int16 words in Y8: low nibbles from bytes 96-103 (sub-blocks 0-7
// the low ones, 8-15 the high ones), two high bits each from bytes 104-107
// (byte 104+j%4, bits 2(j/4)). R8 holds 0x0F bytes; BIAS is 32 in every
// byte (a register or memory); AX, BX, R9, R10 and T are clobbered, X8
// too.
#define Q3KSCALES(T, BIAS) \
	MOVQ    96(SI), AX; \
	MOVL    104(SI), BX; \
	MOVQ    AX, R9; \
	ANDQ    R8, R9; \
	SHRQ    $4, AX; \
	ANDQ    R8, AX; \
	MOVL    BX, R10; \
	ANDL    $0x03030303, R10; \
	MOVL    BX, T; \
	SHRL    $2, T; \
	ANDL    $0x03030303, T; \
	SHLQ    $32, T; \
	ORQ     T, R10; \
	SHLQ    $4, R10; \
	ORQ     R10, R9; \
	MOVL    BX, R10; \
	SHRL    $4, R10; \
	ANDL    $0x03030303, R10; \
	MOVL    BX, T; \
	SHRL    $6, T; \
	ANDL    $0x03030303, T; \
	SHLQ    $32, T; \
	ORQ     T, R10; \
	SHLQ    $4, R10; \
	ORQ     R10, AX; \
	VMOVQ   R9, X8; \
	VPINSRQ $1, AX, X8, X8; \
	VPSUBB  BIAS, X8, X8; \
	VPMOVSXBW X8, Y8

// Q2KSCALES splits the sixteen scale bytes of the Q2_K block at SI: the
// scales (low nibbles) to X9, the mins (high nibbles) to X8; Y11 holds
// 0x0F bytes.
#define Q2KSCALES \
	VMOVDQU 0(SI), X8; \
	VPAND   X11, X8, X9; \
	VPSRLW  $4, X8, X8; \
	VPAND   X11, X8, X8

// Q2KPLANES runs PLANE(p, yo) over the eight planes of the Q2_K block at
// SI, half by half: the half's scale words (from Y8) in both lanes of Y9,
// its 32 quant bytes in Y2; yo the offset of the plane's activations.
#define Q2KPLANES(PLANE) \
	VPERM2I128 $0x00, Y8, Y8, Y9; \
	VMOVDQU    16(SI), Y2; \
	PLANE(0, 4); \
	PLANE(1, 36); \
	PLANE(2, 68); \
	PLANE(3, 100); \
	VPERM2I128 $0x11, Y8, Y8, Y9; \
	VMOVDQU    48(SI), Y2; \
	PLANE(0, 132); \
	PLANE(1, 164); \
	PLANE(2, 196); \
	PLANE(3, 228)

// Q3KPLANES is Q2KPLANES for Q3_K: the hmask bytes in Y10, and PLANE(p,
// b, yo) also given the hmask bit b of its weights.
#define Q3KPLANES(PLANE) \
	VMOVDQU    0(SI), Y10; \
	VPERM2I128 $0x00, Y8, Y8, Y9; \
	VMOVDQU    32(SI), Y2; \
	PLANE(0, 0, 4); \
	PLANE(1, 1, 36); \
	PLANE(2, 2, 68); \
	PLANE(3, 3, 100); \
	VPERM2I128 $0x11, Y8, Y8, Y9; \
	VMOVDQU    64(SI), Y2; \
	PLANE(0, 4, 132); \
	PLANE(1, 5, 164); \
	PLANE(2, 6, 196); \
	PLANE(3, 7, 228)
