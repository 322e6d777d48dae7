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
// and the hardware prefetchers of the machines this is tuned on leave a
// core at about half the rate these loops reach with it (Q4_K rows from
// DRAM on one core 5.5 -> 8.8 GB/s, Q6_K 6.8 -> 9.4). Past a row's end it
// fetches the next rows; past the last a prefetch is dropped, never faults.
#define DOTPF 2048
