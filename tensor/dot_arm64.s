//go:build !purego

#include "textflag.h"
#include "dot_arm64.h"

// Dot products of quantized rows on arm64 (NEON), each kernel in two
// builds: with SDOT (FEAT_DotProd, cpu.ARM64.HasASIMDDP) and with plain
// NEON widening multiplies (every arm64 CPU). A block's integer sums are
// exact either way; the float steps are the pure-Go twins' per block
// (dot_generic.go), so the two builds give the same bits.
//
// Registers: R0 the weights, R1 the activations, R2 the blocks left; F25
// the float sum; V28, V29 DOT16NEON's scratch.

// DOTKERNEL is a kernel's whole body: the arguments, CONSTS, then BLOCK
// (built with DOT) once per block, the float sum returned.
#define DOTKERNEL(CONSTS, BLOCK, DOT) \
	MOVD x+0(FP), R0; \
	MOVD y+8(FP), R1; \
	MOVD nb+16(FP), R2; \
	CONSTS; \
loop: \
	BLOCK(DOT); \
	SUBS $1, R2, R2; \
	BNE  loop; \
	FMOVS F25, ret+24(FP); \
	RET

#define ZEROSUM VEOR V25.B16, V25.B16, V25.B16

// Q80BLOCK adds one Q8_0 block's product: sumf += sumi·(dx·dy).
#define Q80BLOCK(DOT) \
	MOVHU  (R0), R3; \
	MOVHU  (R1), R4; \
	FMOVS  R3, F1; \
	FMOVS  R4, F2; \
	FCVTHS F1, F1; \
	FCVTHS F2, F2; \
	FMULS  F2, F1, F1; \
	ADD    $2, R0, R5; \
	ADD    $2, R1, R6; \
	VLD1   (R5), [V4.B16, V5.B16]; \
	VLD1   (R6), [V6.B16, V7.B16]; \
	VEOR   V16.B16, V16.B16, V16.B16; \
	DOT(16, 4, 6); \
	DOT(16, 5, 7); \
	VADDV  V16.S4, V16; \
	VMOV   V16.S[0], R7; \
	SCVTFWS R7, F3; \
	FMULS  F1, F3, F3; \
	FADDS  F3, F25, F25; \
	ADD    $34, R0; \
	ADD    $34, R1

// Q4_K against Q8_K: per block of 256, sumf += d·dy·Σ_j sc_j·Σ q·a −
// dmin·dy·Σ_j m_j·(bsum_2j + bsum_2j+1), the twin's terms (the twin adds
// the first through eight lane sums; with exact sums the order does not
// matter). R3, R4, R5 the three words of 6-bit scales and mins, R8 the
// mins' sum, R9 the scaled quant sum; V30 the nibble mask.

// Q4KMIN adds m_j·(bsum_2j + bsum_2j+1) to R8 for the min in R6.
#define Q4KMIN(j) \
	MOVH  (260+4*(j))(R1), R10; \
	MOVH  (262+4*(j))(R1), R11; \
	ADD   R11, R10, R10; \
	MADDW R6, R8, R10, R8

// Q4KCHUNK multiplies chunk c of the quants (at QS: 64 elements, low
// nibbles sub-block 2c, high nibbles 2c+1) with its activations: the two
// sums in R10 and R11. HI(c) adds Q5_K's fifth bits (Q4KNOHI: none).
#define Q4KCHUNK(DOT, QS, HI, c) \
	ADD    $((QS)+32*(c)), R0, R12; \
	ADD    $(4+64*(c)), R1, R13; \
	VLD1   (R12), [V0.B16, V1.B16]; \
	VLD1   (R13), [V2.B16, V3.B16, V4.B16, V5.B16]; \
	VAND   V30.B16, V0.B16, V6.B16; \
	VAND   V30.B16, V1.B16, V7.B16; \
	VUSHR  $4, V0.B16, V0.B16; \
	VUSHR  $4, V1.B16, V1.B16; \
	HI(c); \
	VEOR   V16.B16, V16.B16, V16.B16; \
	VEOR   V17.B16, V17.B16, V17.B16; \
	DOT(16, 6, 2); \
	DOT(16, 7, 3); \
	DOT(17, 0, 4); \
	DOT(17, 1, 5); \
	VADDV  V16.S4, V16; \
	VADDV  V17.S4, V17; \
	VMOV   V16.S[0], R10; \
	VMOV   V17.S[0], R11

// Q4KSCALE adds the chunk's sums (R10, R11) times the scales in R6, R7 to
// R9.
#define Q4KSCALE \
	MADDW R6, R9, R10, R9; \
	MADDW R7, R9, R11, R9

#define Q4KNOHI(c)

// Q5KHI ors bit j of qh[l] (V8, V9), as 0x10, into element l of sub-blocks
// j = 2c (V6, V7) and 2c+1 (V0, V1); V12 holds 0x10 bytes.
#define Q5KHI(c) \
	VMOVI  $(1<<(2*(c))), V10.B16; \
	VCMTST V10.B16, V8.B16, V11.B16; \
	VAND   V12.B16, V11.B16, V11.B16; \
	VORR   V11.B16, V6.B16, V6.B16; \
	VCMTST V10.B16, V9.B16, V11.B16; \
	VAND   V12.B16, V11.B16, V11.B16; \
	VORR   V11.B16, V7.B16, V7.B16; \
	VMOVI  $(2<<(2*(c))), V10.B16; \
	VCMTST V10.B16, V8.B16, V11.B16; \
	VAND   V12.B16, V11.B16, V11.B16; \
	VORR   V11.B16, V0.B16, V0.B16; \
	VCMTST V10.B16, V9.B16, V11.B16; \
	VAND   V12.B16, V11.B16, V11.B16; \
	VORR   V11.B16, V1.B16, V1.B16

// Q5KQH loads Q5_K's qh[32] to V8, V9.
#define Q5KQH \
	ADD  $16, R0, R12; \
	VLD1 (R12), [V8.B16, V9.B16]

#define Q4KBLOCK(DOT, QS, SIZE, PRE, HI) \
	PRE; \
	MOVWU 4(R0), R3; \
	MOVWU 8(R0), R4; \
	MOVWU 12(R0), R5; \
	MOVD  ZR, R8; \
	UBFX  $0, R4, $6, R6; \
	Q4KMIN(0); \
	UBFX  $8, R4, $6, R6; \
	Q4KMIN(1); \
	UBFX  $16, R4, $6, R6; \
	Q4KMIN(2); \
	UBFX  $24, R4, $6, R6; \
	Q4KMIN(3); \
	UBFX  $4, R5, $4, R6; \
	UBFX  $6, R4, $2, R7; \
	ORR   R7<<4, R6, R6; \
	Q4KMIN(4); \
	UBFX  $12, R5, $4, R6; \
	UBFX  $14, R4, $2, R7; \
	ORR   R7<<4, R6, R6; \
	Q4KMIN(5); \
	UBFX  $20, R5, $4, R6; \
	UBFX  $22, R4, $2, R7; \
	ORR   R7<<4, R6, R6; \
	Q4KMIN(6); \
	UBFX  $28, R5, $4, R6; \
	UBFX  $30, R4, $2, R7; \
	ORR   R7<<4, R6, R6; \
	Q4KMIN(7); \
	MOVD  ZR, R9; \
	Q4KCHUNK(DOT, QS, HI, 0); \
	UBFX  $0, R3, $6, R6; \
	UBFX  $8, R3, $6, R7; \
	Q4KSCALE; \
	Q4KCHUNK(DOT, QS, HI, 1); \
	UBFX  $16, R3, $6, R6; \
	UBFX  $24, R3, $6, R7; \
	Q4KSCALE; \
	Q4KCHUNK(DOT, QS, HI, 2); \
	UBFX  $0, R5, $4, R6; \
	UBFX  $6, R3, $2, R14; \
	ORR   R14<<4, R6, R6; \
	UBFX  $8, R5, $4, R7; \
	UBFX  $14, R3, $2, R14; \
	ORR   R14<<4, R7, R7; \
	Q4KSCALE; \
	Q4KCHUNK(DOT, QS, HI, 3); \
	UBFX  $16, R5, $4, R6; \
	UBFX  $22, R3, $2, R14; \
	ORR   R14<<4, R6, R6; \
	UBFX  $24, R5, $4, R7; \
	UBFX  $30, R3, $2, R14; \
	ORR   R14<<4, R7, R7; \
	Q4KSCALE; \
	FMOVS  (R1), F4; \
	MOVHU  (R0), R12; \
	MOVHU  2(R0), R13; \
	FMOVS  R12, F5; \
	FMOVS  R13, F6; \
	FCVTHS F5, F5; \
	FCVTHS F6, F6; \
	FMULS  F4, F5, F5; \
	FMULS  F4, F6, F6; \
	SCVTFWS R9, F7; \
	FMULS  F5, F7, F7; \
	FADDS  F7, F25, F25; \
	SCVTFWS R8, F8; \
	FMULS  F6, F8, F8; \
	FSUBS  F8, F25, F25; \
	ADD    $(SIZE), R0; \
	ADD    $292, R1

#define Q4KNOPRE

#define Q4KBLOCK4(DOT) Q4KBLOCK(DOT, 16, 144, Q4KNOPRE, Q4KNOHI)

#define Q4KCONSTS \
	ZEROSUM; \
	VMOVI $15, V30.B16

// Q5_K against Q8_K: Q4_K's steps with the quants at 48 and each
// element's fifth bit from qh.
#define Q5KBLOCK(DOT) Q4KBLOCK(DOT, 48, 176, Q5KQH, Q5KHI)

#define Q5KCONSTS \
	Q4KCONSTS; \
	VMOVI $16, V12.B16

// IQ4_XS against Q8_K: per sub-block j of 32, sumf += d·dy·(ls_j − 32) ·
// Σ kvalues[q]·a, the twin's steps; the codebook (V31) maps the nibbles
// (TBL). R3 scales_h, R4 scales_l.

DATA iq4nlValues<>+0(SB)/8, $0xf6eaddcfbfad9881
DATA iq4nlValues<>+8(SB)/8, $0x7159453526190d01
GLOBL iq4nlValues<>(SB), RODATA|NOPTR, $16

// IQ4XSSUB adds sub-block j's product to F25 (F4 = d·dy).
#define IQ4XSSUB(DOT, j) \
	ADD    $(8+16*(j)), R0, R12; \
	ADD    $(4+32*(j)), R1, R13; \
	VLD1   (R12), [V0.B16]; \
	VLD1   (R13), [V2.B16, V3.B16]; \
	VAND   V30.B16, V0.B16, V6.B16; \
	VUSHR  $4, V0.B16, V7.B16; \
	VTBL   V6.B16, [V31.B16], V6.B16; \
	VTBL   V7.B16, [V31.B16], V7.B16; \
	VEOR   V16.B16, V16.B16, V16.B16; \
	DOT(16, 6, 2); \
	DOT(16, 7, 3); \
	VADDV  V16.S4, V16; \
	VMOV   V16.S[0], R10; \
	UBFX   $(4*(j)), R4, $4, R6; \
	UBFX   $(2*(j)), R3, $2, R7; \
	ORR    R7<<4, R6, R6; \
	SUBW   $32, R6, R6; \
	SCVTFWS R6, F8; \
	FMULS  F8, F4, F9; \
	SCVTFWS R10, F7; \
	FMULS  F9, F7, F7; \
	FADDS  F7, F25, F25

#define IQ4XSBLOCK(DOT) \
	FMOVS  (R1), F4; \
	MOVHU  (R0), R12; \
	FMOVS  R12, F5; \
	FCVTHS F5, F5; \
	FMULS  F4, F5, F4; \
	MOVHU  2(R0), R3; \
	MOVWU  4(R0), R4; \
	IQ4XSSUB(DOT, 0); \
	IQ4XSSUB(DOT, 1); \
	IQ4XSSUB(DOT, 2); \
	IQ4XSSUB(DOT, 3); \
	IQ4XSSUB(DOT, 4); \
	IQ4XSSUB(DOT, 5); \
	IQ4XSSUB(DOT, 6); \
	IQ4XSSUB(DOT, 7); \
	ADD    $136, R0; \
	ADD    $292, R1

#define IQ4XSCONSTS \
	ZEROSUM; \
	VMOVI $15, V30.B16; \
	MOVD  $iq4nlValues<>(SB), R5; \
	VLD1  (R5), [V31.B16]

// Q6_K against Q8_K: per block of 256, sumf += d·dy·Σ_s scale_s·Σ (q −
// 32)·a over the sixteen sub-blocks of 16. Half h of a block: ql[64h …
// 64h+63] (V0-V3), qh[32h … 32h+31] (V4, V5); element 128h + 16k + l,
// k = 0..7, is in V6+k, its activations in V16+k. R9 the scaled sum; V30
// 0x0f, V31 32, V26 3, V27 0x0c, V14 0x30, V15 0xc0 (bytes).

// Q6KQ sets the low bits in dst to (dst | V24) − 32: the signed quants.
#define Q6KQ(dst) \
	VORR   V24.B16, dst, dst; \
	VSUB   V31.B16, dst, dst

// Q6KSUB adds sub-block k of half h, times its scale, to R9.
#define Q6KSUB(DOT, h, k) \
	VEOR   V24.B16, V24.B16, V24.B16; \
	DOT(24, 6+(k), 16+(k)); \
	VADDV  V24.S4, V24; \
	VMOV   V24.S[0], R10; \
	MOVB   (192+8*(h)+(k))(R0), R11; \
	MADDW  R11, R9, R10, R9

#define Q6KHALF(DOT, h) \
	ADD    $(64*(h)), R0, R12; \
	ADD    $(128+32*(h)), R0, R13; \
	ADD    $(4+128*(h)), R1, R14; \
	ADD    $(68+128*(h)), R1, R15; \
	VLD1   (R12), [V0.B16, V1.B16, V2.B16, V3.B16]; \
	VLD1   (R13), [V4.B16, V5.B16]; \
	VLD1   (R14), [V16.B16, V17.B16, V18.B16, V19.B16]; \
	VLD1   (R15), [V20.B16, V21.B16, V22.B16, V23.B16]; \
	VAND   V30.B16, V0.B16, V6.B16; \
	VAND   V26.B16, V4.B16, V24.B16; \
	VSHL   $4, V24.B16, V24.B16; \
	Q6KQ(V6.B16); \
	VAND   V30.B16, V1.B16, V7.B16; \
	VAND   V26.B16, V5.B16, V24.B16; \
	VSHL   $4, V24.B16, V24.B16; \
	Q6KQ(V7.B16); \
	VAND   V30.B16, V2.B16, V8.B16; \
	VAND   V27.B16, V4.B16, V24.B16; \
	VSHL   $2, V24.B16, V24.B16; \
	Q6KQ(V8.B16); \
	VAND   V30.B16, V3.B16, V9.B16; \
	VAND   V27.B16, V5.B16, V24.B16; \
	VSHL   $2, V24.B16, V24.B16; \
	Q6KQ(V9.B16); \
	VUSHR  $4, V0.B16, V10.B16; \
	VAND   V14.B16, V4.B16, V24.B16; \
	Q6KQ(V10.B16); \
	VUSHR  $4, V1.B16, V11.B16; \
	VAND   V14.B16, V5.B16, V24.B16; \
	Q6KQ(V11.B16); \
	VUSHR  $4, V2.B16, V12.B16; \
	VAND   V15.B16, V4.B16, V24.B16; \
	VUSHR  $2, V24.B16, V24.B16; \
	Q6KQ(V12.B16); \
	VUSHR  $4, V3.B16, V13.B16; \
	VAND   V15.B16, V5.B16, V24.B16; \
	VUSHR  $2, V24.B16, V24.B16; \
	Q6KQ(V13.B16); \
	Q6KSUB(DOT, h, 0); \
	Q6KSUB(DOT, h, 1); \
	Q6KSUB(DOT, h, 2); \
	Q6KSUB(DOT, h, 3); \
	Q6KSUB(DOT, h, 4); \
	Q6KSUB(DOT, h, 5); \
	Q6KSUB(DOT, h, 6); \
	Q6KSUB(DOT, h, 7)

#define Q6KBLOCK(DOT) \
	MOVD   ZR, R9; \
	Q6KHALF(DOT, 0); \
	Q6KHALF(DOT, 1); \
	FMOVS  (R1), F4; \
	MOVHU  208(R0), R12; \
	FMOVS  R12, F5; \
	FCVTHS F5, F5; \
	FMULS  F4, F5, F5; \
	SCVTFWS R9, F7; \
	FMULS  F5, F7, F7; \
	FADDS  F7, F25, F25; \
	ADD    $210, R0; \
	ADD    $292, R1

#define Q6KCONSTS \
	ZEROSUM; \
	VMOVI $15, V30.B16; \
	VMOVI $32, V31.B16; \
	VMOVI $3, V26.B16; \
	VMOVI $12, V27.B16; \
	VMOVI $48, V14.B16; \
	VMOVI $192, V15.B16

// The kernels: each type with SDOT (DP) and with plain NEON.

// func dotQ80Q80DP(x, y *byte, nb int) float32
TEXT ·dotQ80Q80DP(SB), NOSPLIT, $0-28
	DOTKERNEL(ZEROSUM, Q80BLOCK, DOT16DP)

// func dotQ80Q80NEON(x, y *byte, nb int) float32
TEXT ·dotQ80Q80NEON(SB), NOSPLIT, $0-28
	DOTKERNEL(ZEROSUM, Q80BLOCK, DOT16NEON)

// func dotQ4KQ8KDP(x, y *byte, nb int) float32
TEXT ·dotQ4KQ8KDP(SB), NOSPLIT, $0-28
	DOTKERNEL(Q4KCONSTS, Q4KBLOCK4, DOT16DP)

// func dotQ4KQ8KNEON(x, y *byte, nb int) float32
TEXT ·dotQ4KQ8KNEON(SB), NOSPLIT, $0-28
	DOTKERNEL(Q4KCONSTS, Q4KBLOCK4, DOT16NEON)

// func dotQ5KQ8KDP(x, y *byte, nb int) float32
TEXT ·dotQ5KQ8KDP(SB), NOSPLIT, $0-28
	DOTKERNEL(Q5KCONSTS, Q5KBLOCK, DOT16DP)

// func dotQ5KQ8KNEON(x, y *byte, nb int) float32
TEXT ·dotQ5KQ8KNEON(SB), NOSPLIT, $0-28
	DOTKERNEL(Q5KCONSTS, Q5KBLOCK, DOT16NEON)

// func dotIQ4XSQ8KDP(x, y *byte, nb int) float32
TEXT ·dotIQ4XSQ8KDP(SB), NOSPLIT, $0-28
	DOTKERNEL(IQ4XSCONSTS, IQ4XSBLOCK, DOT16DP)

// func dotIQ4XSQ8KNEON(x, y *byte, nb int) float32
TEXT ·dotIQ4XSQ8KNEON(SB), NOSPLIT, $0-28
	DOTKERNEL(IQ4XSCONSTS, IQ4XSBLOCK, DOT16NEON)

// func dotQ6KQ8KDP(x, y *byte, nb int) float32
TEXT ·dotQ6KQ8KDP(SB), NOSPLIT, $0-28
	DOTKERNEL(Q6KCONSTS, Q6KBLOCK, DOT16DP)

// func dotQ6KQ8KNEON(x, y *byte, nb int) float32
TEXT ·dotQ6KQ8KNEON(SB), NOSPLIT, $0-28
	DOTKERNEL(Q6KCONSTS, Q6KBLOCK, DOT16NEON)
