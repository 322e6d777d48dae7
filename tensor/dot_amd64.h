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

// DOTPF is how far ahead of the block being computed the quantized kernels
// prefetch weight bytes (PREFETCHT0 on every line as they go): a single
// token's product streams its weight rows from memory, one after the other,
// and the hardware prefetchers of the machines this is tuned on leave a
// core at about half the rate these loops reach with it (Q4_K rows from
// DRAM on one core 5.5 -> 8.8 GB/s, Q6_K 6.8 -> 9.4). Past a row's end it
// fetches the next rows; past the last a prefetch is dropped, never faults.
#define DOTPF 2048
