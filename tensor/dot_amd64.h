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
