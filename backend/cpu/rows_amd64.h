// Macros shared by the attention kernels (attn4_amd64.s, attn16_amd64.s).

// ROWS4 points DI, R8, R9 and R10 at four float rows: the first at the
// argument p, the others ld floats apart (ld an argument too). Clobbers AX.
#define ROWS4(p, ld) \
	MOVQ p, DI; \
	MOVQ ld, AX; \
	SHLQ $2, AX; \
	LEAQ (DI)(AX*1), R8; \
	LEAQ (R8)(AX*1), R9; \
	LEAQ (R9)(AX*1), R10
