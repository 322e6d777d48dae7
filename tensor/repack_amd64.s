//go:build !purego

#include "textflag.h"
#include "dot_amd64.h"

// Products of repacked Q4_K groups (tensor/repack.go): eight interleaved
// weight rows against the Q8_K activations of four tokens (DI, R11, R12,
// R13) or one (DI), AVX2. A 32-byte load of quants holds four bytes of each
// row: its low nibbles are elements 4g..4g+3 of sub-block 2c of all eight
// rows, its high nibbles those of sub-block 2c+1. Each token multiplies
// them with its four activation bytes broadcast (VPMADDUBSW: two pair sums
// a row), adds the eight slices of a sub-block as int16 (at most
// 8·2·15·127 < 2^15), then weights the sub-block by its scales
// (VPMADDWD: int32 per row). At the end of a block the eight rows' sums
// are scaled by d·dy, and the min terms Σ m_j·bsum_j (VPMADDWD of the
// min pairs with the activation's pair sums) by dmin·dy, into eight float
// accumulators. The one-token kernel runs the same instructions per token,
// so every token's result is the same in both.
//
// Registers: Y0, Y1 the decoded quants (low, high); Y2 scratch; Y3 the
// nibble mask; Y4-Y7 the tokens' int16 sums of the low sub-block, Y8-Y11
// of the high one, Y12-Y15 their int32 block sums. Stack: the sub-block
// scales as word pairs at 32j, the min pairs as words at 256+32i, the
// float accumulators at 384+32t. A block's four chunks of 64 elements run
// as a loop (R8 the chunk's quants, R10 its scales on the stack, R9 the
// count; the token pointers move 64 bytes a chunk), so that the kernel
// fits the decoded-instruction cache.
//
// func gemmQ4KR8x4AVX2(x *byte, nb int, y *byte, lda int, out *float32, ldo int)
// func gemmQ4KR8x1AVX2(x *byte, nb int, y *byte, out *float32)

// r8Dup spreads eight bytes (broadcast to both lanes) to words, each twice:
// lane 0 bytes 0-3, lane 1 bytes 4-7.
DATA r8Dup<>+0(SB)/8, $0x8001800180008000
DATA r8Dup<>+8(SB)/8, $0x8003800380028002
DATA r8Dup<>+16(SB)/8, $0x8005800580048004
DATA r8Dup<>+24(SB)/8, $0x8007800780068006
GLOBL r8Dup<>(SB), RODATA|NOPTR, $32

// R8SCALES expands the scales and min pairs of the block at SI to words on
// the stack.
#define R8SCALES \
	VPBROADCASTQ 32(SI), Y0; VPSHUFB r8Dup<>(SB), Y0, Y0; VMOVDQU Y0, 0(SP); \
	VPBROADCASTQ 40(SI), Y0; VPSHUFB r8Dup<>(SB), Y0, Y0; VMOVDQU Y0, 32(SP); \
	VPBROADCASTQ 48(SI), Y0; VPSHUFB r8Dup<>(SB), Y0, Y0; VMOVDQU Y0, 64(SP); \
	VPBROADCASTQ 56(SI), Y0; VPSHUFB r8Dup<>(SB), Y0, Y0; VMOVDQU Y0, 96(SP); \
	VPBROADCASTQ 64(SI), Y0; VPSHUFB r8Dup<>(SB), Y0, Y0; VMOVDQU Y0, 128(SP); \
	VPBROADCASTQ 72(SI), Y0; VPSHUFB r8Dup<>(SB), Y0, Y0; VMOVDQU Y0, 160(SP); \
	VPBROADCASTQ 80(SI), Y0; VPSHUFB r8Dup<>(SB), Y0, Y0; VMOVDQU Y0, 192(SP); \
	VPBROADCASTQ 88(SI), Y0; VPSHUFB r8Dup<>(SB), Y0, Y0; VMOVDQU Y0, 224(SP); \
	VPMOVZXBW 96(SI), Y0; VMOVDQU Y0, 256(SP); \
	VPMOVZXBW 112(SI), Y0; VMOVDQU Y0, 288(SP); \
	VPMOVZXBW 128(SI), Y0; VMOVDQU Y0, 320(SP); \
	VPMOVZXBW 144(SI), Y0; VMOVDQU Y0, 352(SP)

// R8LOADC decodes the 32 bytes of quants at off(R8) (the chunk's) to Y0
// (low nibbles) and Y1 (high).
#define R8LOADC(off) \
	VMOVDQU off(R8), Y0; \
	VPSRLW  $4, Y0, Y1; \
	VPAND   Y3, Y0, Y0; \
	VPAND   Y3, Y1, Y1

// R8SUBC adds the scaled sums of the chunk's sub-blocks (WL, scales at
// 0(R10); WH, at 32(R10)) to the block sums ACC.
#define R8SUBC(WL, WH, ACC) \
	VPMADDWD 0(R10), WL, WL; \
	VPMADDWD 32(R10), WH, WH; \
	VPADDD   WL, ACC, ACC; \
	VPADDD   WH, ACC, ACC

// R8TOK adds token P's products of the decoded slice with its activations
// at lo (low sub-block) and hi (high) to the int16 sums WL and WH.
#define R8TOK(P, lo, hi, WL, WH) \
	VPBROADCASTD lo(P), Y2; \
	VPMADDUBSW   Y2, Y0, Y2; \
	VPADDW       Y2, WL, WL; \
	VPBROADCASTD hi(P), Y2; \
	VPMADDUBSW   Y2, Y1, Y2; \
	VPADDW       Y2, WH, WH

// R8TOK0 is R8TOK for the first slice of a sub-block: it sets the sums.
#define R8TOK0(P, lo, hi, WL, WH) \
	VPBROADCASTD lo(P), Y2; \
	VPMADDUBSW   Y2, Y0, WL; \
	VPBROADCASTD hi(P), Y2; \
	VPMADDUBSW   Y2, Y1, WH

// R8END adds the block's sums ACC of token P, scaled by d·dy (Y0 the
// eight d), less its min terms scaled by dmin·dy (Y1 the eight dmin), to
// the float accumulators at facc(SP). Clobbers Y2, Y4-Y10.
#define R8END(P, ACC, facc) \
	VMOVDQU      260(P), X2; \
	VPHADDW      276(P), X2, X2; \
	VPBROADCASTD X2, Y4; \
	VPMADDWD     256(SP), Y4, Y4; \
	VPSHUFD      $0x55, X2, X5; \
	VPBROADCASTD X5, Y5; \
	VPMADDWD     288(SP), Y5, Y5; \
	VPADDD       Y5, Y4, Y4; \
	VPSHUFD      $0xAA, X2, X5; \
	VPBROADCASTD X5, Y5; \
	VPMADDWD     320(SP), Y5, Y5; \
	VPADDD       Y5, Y4, Y4; \
	VPSHUFD      $0xFF, X2, X5; \
	VPBROADCASTD X5, Y5; \
	VPMADDWD     352(SP), Y5, Y5; \
	VPADDD       Y5, Y4, Y4; \
	VBROADCASTSS 0(P), Y5; \
	VMULPS       Y5, Y0, Y6; \
	VMULPS       Y5, Y1, Y7; \
	VCVTDQ2PS    ACC, Y8; \
	VCVTDQ2PS    Y4, Y9; \
	VMOVUPS      facc(SP), Y10; \
	VFMADD231PS  Y6, Y8, Y10; \
	VFNMADD231PS Y7, Y9, Y10; \
	VMOVUPS      Y10, facc(SP)

// Products of repacked 8-bit groups (Q8_0, and Q5_0 widened to 8 bits when
// repacked): eight rows' 32-element blocks, their scales d (f16) at 0, the
// quants at 16 + 32g + 4r, against Q8_0 activations (34-byte blocks),
// eight tokens (DI, R8-R14), four (DI, R11, R12, R13) or one (DI).
// VPMADDUBSW needs one unsigned operand: the weights' magnitudes |w|
// (computed once per load) against the activations with the weights' signs
// (VPSIGNB, per token); each pair sum (at most 2·128·127) is widened at
// once (VPMADDWD with ones) to int32, one lane per row. Each block ends as
// the single-row kernel's: the int32 sums times d·dy fused into eight
// float accumulators (in registers for four tokens and one, on the stack
// for eight: the same fused multiply-add either way).
//
// Registers: Y0 the weights, Y1 their magnitudes, Y2 scratch, Y3 ones
// (int16), Y4-Y7 (Y4-Y11 for eight) the tokens' block sums, Y8-Y11 the
// float accumulators of four, Y12 scratch, Y13 the rows' d.
//
// func gemmQ8R8x8AVX2(x *byte, nb int, y *byte, lda int, out *float32, ldo int)
// func gemmQ8R8x4AVX2(x *byte, nb int, y *byte, lda int, out *float32, ldo int)
// func gemmQ8R8x1AVX2(x *byte, nb int, y *byte, out *float32)

#define Q8LOAD(off) \
	VMOVDQU off(SI), Y0; \
	VPABSB  Y0, Y1

// Q8TOK0 sets token P's block sums ACC to its products with the first
// loaded slice (activation bytes at off); Q8TOK adds those of the others.
#define Q8TOK0(P, off, ACC) \
	VPBROADCASTD off(P), Y2; \
	VPSIGNB      Y0, Y2, Y2; \
	VPMADDUBSW   Y2, Y1, Y2; \
	VPMADDWD     Y3, Y2, ACC

#define Q8TOK(P, off, ACC) \
	VPBROADCASTD off(P), Y2; \
	VPSIGNB      Y0, Y2, Y2; \
	VPMADDUBSW   Y2, Y1, Y2; \
	VPMADDWD     Y3, Y2, Y2; \
	VPADDD       Y2, ACC, ACC

// Q8D converts the block's eight row scales to Y13.
#define Q8D \
	VCVTPH2PS (SI), Y13

// Q8SCALE sets Y12 to d·dy for token P (dy, an f16, broadcast before its
// conversion) and converts its block sums ACC to float.
#define Q8SCALE(P, ACC) \
	VPBROADCASTW (P), X12; \
	VCVTPH2PS    X12, Y12; \
	VMULPS       Y13, Y12, Y12; \
	VCVTDQ2PS    ACC, ACC

// Q8END adds token P's block sums ACC times d·dy to FACC.
#define Q8END(P, ACC, FACC) \
	Q8SCALE(P, ACC); \
	VFMADD231PS Y12, ACC, FACC

// Q8ENDS adds them to the accumulator at facc(SP).
#define Q8ENDS(P, ACC, facc) \
	Q8SCALE(P, ACC); \
	VFMADD213PS facc(SP), Y12, ACC; \
	VMOVUPS     ACC, facc(SP)

// Q8SLICE8 multiplies the slice at off with the eight tokens' activation
// bytes at aoff (TOK: Q8TOK0 for the block's first slice, else Q8TOK).
#define Q8SLICE8(off, aoff, TOK) \
	Q8LOAD(off); \
	TOK(DI, aoff, Y4); \
	TOK(R8, aoff, Y5); \
	TOK(R9, aoff, Y6); \
	TOK(R10, aoff, Y7); \
	TOK(R11, aoff, Y8); \
	TOK(R12, aoff, Y9); \
	TOK(R13, aoff, Y10); \
	TOK(R14, aoff, Y11)

// Q8SLICE4 does the same for four tokens.
#define Q8SLICE4(off, aoff, TOK) \
	Q8LOAD(off); \
	TOK(DI, aoff, Y4); \
	TOK(R11, aoff, Y5); \
	TOK(R12, aoff, Y6); \
	TOK(R13, aoff, Y7)

#define Q8PREFETCH \
	PREFETCHT0 (DOTPF+0)(SI); \
	PREFETCHT0 (DOTPF+64)(SI); \
	PREFETCHT0 (DOTPF+128)(SI); \
	PREFETCHT0 (DOTPF+192)(SI); \
	PREFETCHT0 (DOTPF+256)(SI)

// Products of repacked Q6_K groups: eight rows' blocks of 256, their d as
// float32 at 0, the scales scale[2i+j][r] (int8) at 32 + 16i + 2r + j, and
// sub-block s's quants in three slices at 160 + 96s + 32v (see repack.go):
// bits 0-5 of row r's byte 4r + e are its 6-bit quant of element 16s + 4v
// + e, bits 6-7 bits 2v, 2v+1 of its quant of element 16s + 12 + e. The
// three masked slices and the fourth, gathered from the top bits by three
// word shifts, meet the activations of four tokens (DI, R11, R12, R13) or
// one (DI) in VPMADDUBSW (the quants unsigned), two slices summed as int16
// (at most 2·2·63·127 < 2^15), then weighted by their sub-block's scale
// (VPMADDWD: int32 per row). The offset −32 comes at the end of the block
// as −32·Σ_s scale_s·bsums[s], from the scales' pairs against the
// activation's block sums.
//
// Registers: Y0-Y3 a sub-block's four decoded slices; Y4, Y5 scratch; Y6
// the 0x3F mask, Y7 0x03; Y8-Y11 the tokens' float accumulators (Y8 for
// one token), Y12-Y15 their int32 block sums (Y12 for one); the one-token
// kernel keeps 0x0C and 0x30 in Y13, Y14, the four-token one reads them
// from memory. Stack: the scales as sign-extended word pairs (s_r, s_r) at
// 32s, and the pairs (scale[2i][r], scale[2i+1][r]) as words at 512 + 32i.
// The two halves of a block run as a loop (R8 the half's quants, R10 its
// scales on the stack, R9 the count; the token pointers move 128 bytes a
// half), so that the four-token kernel fits the decoded-instruction cache.
//
// func gemmQ6KR8x4AVX2(x *byte, nb int, y *byte, lda int, out *float32, ldo int)
// func gemmQ6KR8x1AVX2(x *byte, nb int, y *byte, out *float32)

// r6Dup spreads eight signed bytes (broadcast to both lanes) to the high
// bytes of words, each twice (lane 0 bytes 0-3, lane 1 bytes 4-7), for an
// arithmetic shift to sign-extend (the IQ4_XS kernels' scales).
DATA r6Dup<>+0(SB)/8, $0x0180018000800080
DATA r6Dup<>+8(SB)/8, $0x0380038002800280
DATA r6Dup<>+16(SB)/8, $0x0580058004800480
DATA r6Dup<>+24(SB)/8, $0x0780078006800680
GLOBL r6Dup<>(SB), RODATA|NOPTR, $32

// r6Even and r6Odd pick scale[2i][r] (r6Even) or scale[2i+1][r] (r6Odd)
// from sixteen bytes broadcast to both lanes into the high bytes of both
// words of dword r (lane 0 rows 0-3, lane 1 rows 4-7), for an arithmetic
// shift to sign-extend.
DATA r6Even<>+0(SB)/8, $0x0280028000800080
DATA r6Even<>+8(SB)/8, $0x0680068004800480
DATA r6Even<>+16(SB)/8, $0x0a800a8008800880
DATA r6Even<>+24(SB)/8, $0x0e800e800c800c80
GLOBL r6Even<>(SB), RODATA|NOPTR, $32
DATA r6Odd<>+0(SB)/8, $0x0380038001800180
DATA r6Odd<>+8(SB)/8, $0x0780078005800580
DATA r6Odd<>+16(SB)/8, $0x0b800b8009800980
DATA r6Odd<>+24(SB)/8, $0x0f800f800d800d80
GLOBL r6Odd<>(SB), RODATA|NOPTR, $32

// r6M0C and r6M30: the masks of the fourth slice's middle and top bit pairs.
DATA r6M0C<>+0(SB)/8, $0x0c0c0c0c0c0c0c0c
DATA r6M0C<>+8(SB)/8, $0x0c0c0c0c0c0c0c0c
DATA r6M0C<>+16(SB)/8, $0x0c0c0c0c0c0c0c0c
DATA r6M0C<>+24(SB)/8, $0x0c0c0c0c0c0c0c0c
GLOBL r6M0C<>(SB), RODATA|NOPTR, $32
DATA r6M30<>+0(SB)/8, $0x3030303030303030
DATA r6M30<>+8(SB)/8, $0x3030303030303030
DATA r6M30<>+16(SB)/8, $0x3030303030303030
DATA r6M30<>+24(SB)/8, $0x3030303030303030
GLOBL r6M30<>(SB), RODATA|NOPTR, $32

// Q6DEC decodes sub-block off's four slices (at off(R8)) to Y0-Y3; M0C and
// M30 are the masks 0x0C and 0x30 (registers or memory). Clobbers Y4.
#define Q6DEC(off, M0C, M30) \
	VMOVDQU off(R8), Y0; \
	VMOVDQU off+32(R8), Y1; \
	VMOVDQU off+64(R8), Y2; \
	VPSRLW  $6, Y0, Y3; \
	VPAND   Y7, Y3, Y3; \
	VPSRLW  $4, Y1, Y4; \
	VPAND   M0C, Y4, Y4; \
	VPOR    Y4, Y3, Y3; \
	VPSRLW  $2, Y2, Y4; \
	VPAND   M30, Y4, Y4; \
	VPOR    Y4, Y3, Y3; \
	VPAND   Y6, Y0, Y0; \
	VPAND   Y6, Y1, Y1; \
	VPAND   Y6, Y2, Y2

// Q6TOKR adds token P's products of the slices S0 and S1 with its
// activations at a0 and a1, weighted by the scale words at sc(R10) (the
// half's), to ACC.
#define Q6TOKR(P, S0, S1, a0, a1, sc, ACC) \
	VPBROADCASTD a0(P), Y4; \
	VPMADDUBSW   Y4, S0, Y4; \
	VPBROADCASTD a1(P), Y5; \
	VPMADDUBSW   Y5, S1, Y5; \
	VPADDW       Y5, Y4, Y4; \
	VPMADDWD     sc(R10), Y4, Y4; \
	VPADDD       Y4, ACC, ACC

// Q6TOKQ adds token P's products of a decoded sub-block (q, of the half) to ACC.
#define Q6TOKQ(P, q, ACC) \
	Q6TOKR(P, Y0, Y1, 4+16*q, 8+16*q, 32*q, ACC); \
	Q6TOKR(P, Y2, Y3, 12+16*q, 16+16*q, 32*q, ACC)

// Q6CORR subtracts 32·Σ_s scale_s·bsums[s] of token P from ACC. Clobbers
// Y4, Y5.
#define Q6CORR(P, ACC) \
	VPBROADCASTD 260(P), Y4; \
	VPMADDWD     512(SP), Y4, Y4; \
	VPBROADCASTD 264(P), Y5; \
	VPMADDWD     544(SP), Y5, Y5; \
	VPADDD       Y5, Y4, Y4; \
	VPBROADCASTD 268(P), Y5; \
	VPMADDWD     576(SP), Y5, Y5; \
	VPADDD       Y5, Y4, Y4; \
	VPBROADCASTD 272(P), Y5; \
	VPMADDWD     608(SP), Y5, Y5; \
	VPADDD       Y5, Y4, Y4; \
	VPBROADCASTD 276(P), Y5; \
	VPMADDWD     640(SP), Y5, Y5; \
	VPADDD       Y5, Y4, Y4; \
	VPBROADCASTD 280(P), Y5; \
	VPMADDWD     672(SP), Y5, Y5; \
	VPADDD       Y5, Y4, Y4; \
	VPBROADCASTD 284(P), Y5; \
	VPMADDWD     704(SP), Y5, Y5; \
	VPADDD       Y5, Y4, Y4; \
	VPBROADCASTD 288(P), Y5; \
	VPMADDWD     736(SP), Y5, Y5; \
	VPADDD       Y5, Y4, Y4; \
	VPSLLD       $5, Y4, Y4; \
	VPSUBD       Y4, ACC, ACC

// Q6END adds token P's block sums ACC times d·dy (Y0 the eight d) to FACC.
#define Q6END(P, ACC, FACC) \
	VBROADCASTSS 0(P), Y4; \
	VMULPS       Y4, Y0, Y4; \
	VCVTDQ2PS    ACC, ACC; \
	VFMADD231PS  Y4, ACC, FACC

// Q6SCALES expands the block's scales to sign-extended word pairs and
// its scale pairs to words, on the stack, and prefetches the block's
// last lines that the halves' prefetches do not reach.
#define Q6SCALES \
	VBROADCASTI128 32(SI), Y0; \
	VPSHUFB        r6Even<>(SB), Y0, Y1; \
	VPSRAW         $8, Y1, Y1; \
	VMOVDQU        Y1, 0(SP); \
	VPSHUFB        r6Odd<>(SB), Y0, Y1; \
	VPSRAW         $8, Y1, Y1; \
	VMOVDQU        Y1, 32(SP); \
	VPMOVSXBW      32(SI), Y1; \
	VMOVDQU        Y1, 512(SP); \
	VBROADCASTI128 48(SI), Y0; \
	VPSHUFB        r6Even<>(SB), Y0, Y1; \
	VPSRAW         $8, Y1, Y1; \
	VMOVDQU        Y1, 64(SP); \
	VPSHUFB        r6Odd<>(SB), Y0, Y1; \
	VPSRAW         $8, Y1, Y1; \
	VMOVDQU        Y1, 96(SP); \
	VPMOVSXBW      48(SI), Y1; \
	VMOVDQU        Y1, 544(SP); \
	VBROADCASTI128 64(SI), Y0; \
	VPSHUFB        r6Even<>(SB), Y0, Y1; \
	VPSRAW         $8, Y1, Y1; \
	VMOVDQU        Y1, 128(SP); \
	VPSHUFB        r6Odd<>(SB), Y0, Y1; \
	VPSRAW         $8, Y1, Y1; \
	VMOVDQU        Y1, 160(SP); \
	VPMOVSXBW      64(SI), Y1; \
	VMOVDQU        Y1, 576(SP); \
	VBROADCASTI128 80(SI), Y0; \
	VPSHUFB        r6Even<>(SB), Y0, Y1; \
	VPSRAW         $8, Y1, Y1; \
	VMOVDQU        Y1, 192(SP); \
	VPSHUFB        r6Odd<>(SB), Y0, Y1; \
	VPSRAW         $8, Y1, Y1; \
	VMOVDQU        Y1, 224(SP); \
	VPMOVSXBW      80(SI), Y1; \
	VMOVDQU        Y1, 608(SP); \
	VBROADCASTI128 96(SI), Y0; \
	VPSHUFB        r6Even<>(SB), Y0, Y1; \
	VPSRAW         $8, Y1, Y1; \
	VMOVDQU        Y1, 256(SP); \
	VPSHUFB        r6Odd<>(SB), Y0, Y1; \
	VPSRAW         $8, Y1, Y1; \
	VMOVDQU        Y1, 288(SP); \
	VPMOVSXBW      96(SI), Y1; \
	VMOVDQU        Y1, 640(SP); \
	VBROADCASTI128 112(SI), Y0; \
	VPSHUFB        r6Even<>(SB), Y0, Y1; \
	VPSRAW         $8, Y1, Y1; \
	VMOVDQU        Y1, 320(SP); \
	VPSHUFB        r6Odd<>(SB), Y0, Y1; \
	VPSRAW         $8, Y1, Y1; \
	VMOVDQU        Y1, 352(SP); \
	VPMOVSXBW      112(SI), Y1; \
	VMOVDQU        Y1, 672(SP); \
	VBROADCASTI128 128(SI), Y0; \
	VPSHUFB        r6Even<>(SB), Y0, Y1; \
	VPSRAW         $8, Y1, Y1; \
	VMOVDQU        Y1, 384(SP); \
	VPSHUFB        r6Odd<>(SB), Y0, Y1; \
	VPSRAW         $8, Y1, Y1; \
	VMOVDQU        Y1, 416(SP); \
	VPMOVSXBW      128(SI), Y1; \
	VMOVDQU        Y1, 704(SP); \
	VBROADCASTI128 144(SI), Y0; \
	VPSHUFB        r6Even<>(SB), Y0, Y1; \
	VPSRAW         $8, Y1, Y1; \
	VMOVDQU        Y1, 448(SP); \
	VPSHUFB        r6Odd<>(SB), Y0, Y1; \
	VPSRAW         $8, Y1, Y1; \
	VMOVDQU        Y1, 480(SP); \
	VPMOVSXBW      144(SI), Y1; \
	VMOVDQU        Y1, 736(SP); \
	PREFETCHT0     (DOTPF+1536)(SI); \
	PREFETCHT0     (DOTPF+1600)(SI); \
	PREFETCHT0     (DOTPF+1664)(SI)

// func gemmQ4KR8x4AVX2(x *byte, nb int, y *byte, lda int, out *float32, ldo int)
TEXT ·gemmQ4KR8x4AVX2(SB), NOSPLIT, $512-48
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ y+16(FP), DI
	MOVQ lda+24(FP), AX
	LEAQ (DI)(AX*1), R11
	LEAQ (DI)(AX*2), R12
	LEAQ (R11)(AX*2), R13
	VXORPS  Y0, Y0, Y0
	VMOVUPS Y0, 384(SP)
	VMOVUPS Y0, 416(SP)
	VMOVUPS Y0, 448(SP)
	VMOVUPS Y0, 480(SP)
	BCAST8($0x0F0F0F0F, X3, Y3)

r8x4loop:
	R8SCALES
	VPXOR Y12, Y12, Y12
	VPXOR Y13, Y13, Y13
	VPXOR Y14, Y14, Y14
	VPXOR Y15, Y15, Y15
	LEAQ 160(SI), R8
	LEAQ 0(SP), R10
	MOVQ $4, R9
r8x4chunk:
	PREFETCHT0 (DOTPF+0)(R8)
	PREFETCHT0 (DOTPF+64)(R8)
	PREFETCHT0 (DOTPF+128)(R8)
	PREFETCHT0 (DOTPF+192)(R8)
	PREFETCHT0 (DOTPF+256)(R8)
	R8LOADC(0)
	R8TOK0(DI, 4, 36, Y4, Y8)
	R8TOK0(R11, 4, 36, Y5, Y9)
	R8TOK0(R12, 4, 36, Y6, Y10)
	R8TOK0(R13, 4, 36, Y7, Y11)
	R8LOADC(32)
	R8TOK(DI, 8, 40, Y4, Y8)
	R8TOK(R11, 8, 40, Y5, Y9)
	R8TOK(R12, 8, 40, Y6, Y10)
	R8TOK(R13, 8, 40, Y7, Y11)
	R8LOADC(64)
	R8TOK(DI, 12, 44, Y4, Y8)
	R8TOK(R11, 12, 44, Y5, Y9)
	R8TOK(R12, 12, 44, Y6, Y10)
	R8TOK(R13, 12, 44, Y7, Y11)
	R8LOADC(96)
	R8TOK(DI, 16, 48, Y4, Y8)
	R8TOK(R11, 16, 48, Y5, Y9)
	R8TOK(R12, 16, 48, Y6, Y10)
	R8TOK(R13, 16, 48, Y7, Y11)
	R8LOADC(128)
	R8TOK(DI, 20, 52, Y4, Y8)
	R8TOK(R11, 20, 52, Y5, Y9)
	R8TOK(R12, 20, 52, Y6, Y10)
	R8TOK(R13, 20, 52, Y7, Y11)
	R8LOADC(160)
	R8TOK(DI, 24, 56, Y4, Y8)
	R8TOK(R11, 24, 56, Y5, Y9)
	R8TOK(R12, 24, 56, Y6, Y10)
	R8TOK(R13, 24, 56, Y7, Y11)
	R8LOADC(192)
	R8TOK(DI, 28, 60, Y4, Y8)
	R8TOK(R11, 28, 60, Y5, Y9)
	R8TOK(R12, 28, 60, Y6, Y10)
	R8TOK(R13, 28, 60, Y7, Y11)
	R8LOADC(224)
	R8TOK(DI, 32, 64, Y4, Y8)
	R8TOK(R11, 32, 64, Y5, Y9)
	R8TOK(R12, 32, 64, Y6, Y10)
	R8TOK(R13, 32, 64, Y7, Y11)
	R8SUBC(Y4, Y8, Y12)
	R8SUBC(Y5, Y9, Y13)
	R8SUBC(Y6, Y10, Y14)
	R8SUBC(Y7, Y11, Y15)
	ADDQ $256, R8
	ADDQ $64, R10
	ADDQ $64, DI
	ADDQ $64, R11
	ADDQ $64, R12
	ADDQ $64, R13
	DECQ R9
	JNZ  r8x4chunk
	SUBQ $256, DI
	SUBQ $256, R11
	SUBQ $256, R12
	SUBQ $256, R13
	VCVTPH2PS 0(SI), Y0
	VCVTPH2PS 16(SI), Y1
	R8END(DI, Y12, 384)
	R8END(R11, Y13, 416)
	R8END(R12, Y14, 448)
	R8END(R13, Y15, 480)
	ADDQ $1184, SI
	ADDQ $292, DI
	ADDQ $292, R11
	ADDQ $292, R12
	ADDQ $292, R13
	DECQ CX
	JNZ  r8x4loop

	MOVQ    out+32(FP), DX
	MOVQ    ldo+40(FP), BX
	SHLQ    $2, BX
	VMOVUPS 384(SP), Y0
	VMOVUPS Y0, (DX)
	ADDQ    BX, DX
	VMOVUPS 416(SP), Y0
	VMOVUPS Y0, (DX)
	ADDQ    BX, DX
	VMOVUPS 448(SP), Y0
	VMOVUPS Y0, (DX)
	ADDQ    BX, DX
	VMOVUPS 480(SP), Y0
	VMOVUPS Y0, (DX)
	VZEROUPPER
	RET

// func gemmQ4KR8x1AVX2(x *byte, nb int, y *byte, out *float32)
TEXT ·gemmQ4KR8x1AVX2(SB), NOSPLIT, $512-32
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ y+16(FP), DI
	VXORPS  Y0, Y0, Y0
	VMOVUPS Y0, 384(SP)
	BCAST8($0x0F0F0F0F, X3, Y3)

r8x1loop:
	R8SCALES
	VPXOR Y12, Y12, Y12
	LEAQ 160(SI), R8
	LEAQ 0(SP), R10
	MOVQ $4, R9
r8x1chunk:
	PREFETCHT0 (DOTPF+0)(R8)
	PREFETCHT0 (DOTPF+64)(R8)
	PREFETCHT0 (DOTPF+128)(R8)
	PREFETCHT0 (DOTPF+192)(R8)
	PREFETCHT0 (DOTPF+256)(R8)
	R8LOADC(0)
	R8TOK0(DI, 4, 36, Y4, Y8)
	R8LOADC(32)
	R8TOK(DI, 8, 40, Y4, Y8)
	R8LOADC(64)
	R8TOK(DI, 12, 44, Y4, Y8)
	R8LOADC(96)
	R8TOK(DI, 16, 48, Y4, Y8)
	R8LOADC(128)
	R8TOK(DI, 20, 52, Y4, Y8)
	R8LOADC(160)
	R8TOK(DI, 24, 56, Y4, Y8)
	R8LOADC(192)
	R8TOK(DI, 28, 60, Y4, Y8)
	R8LOADC(224)
	R8TOK(DI, 32, 64, Y4, Y8)
	R8SUBC(Y4, Y8, Y12)
	ADDQ $256, R8
	ADDQ $64, R10
	ADDQ $64, DI
	DECQ R9
	JNZ  r8x1chunk
	SUBQ $256, DI
	VCVTPH2PS 0(SI), Y0
	VCVTPH2PS 16(SI), Y1
	R8END(DI, Y12, 384)
	ADDQ $1184, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  r8x1loop

	MOVQ    out+24(FP), DX
	VMOVUPS 384(SP), Y0
	VMOVUPS Y0, (DX)
	VZEROUPPER
	RET

// func gemmQ8R8x8AVX2(x *byte, nb int, y *byte, lda int, out *float32, ldo int)
TEXT ·gemmQ8R8x8AVX2(SB), NOSPLIT, $256-48
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ y+16(FP), DI
	MOVQ lda+24(FP), AX
	LEAQ (DI)(AX*1), R8
	LEAQ (DI)(AX*2), R9
	LEAQ (R8)(AX*2), R10
	LEAQ (DI)(AX*4), R11
	LEAQ (R8)(AX*4), R12
	LEAQ (R9)(AX*4), R13
	LEAQ (R10)(AX*4), R14
	VXORPS  Y4, Y4, Y4
	VMOVUPS Y4, 0(SP)
	VMOVUPS Y4, 32(SP)
	VMOVUPS Y4, 64(SP)
	VMOVUPS Y4, 96(SP)
	VMOVUPS Y4, 128(SP)
	VMOVUPS Y4, 160(SP)
	VMOVUPS Y4, 192(SP)
	VMOVUPS Y4, 224(SP)
	ONES16(Y3)

q8x8loop:
	Q8PREFETCH
	Q8SLICE8(16, 2, Q8TOK0)
	Q8SLICE8(48, 6, Q8TOK)
	Q8SLICE8(80, 10, Q8TOK)
	Q8SLICE8(112, 14, Q8TOK)
	Q8SLICE8(144, 18, Q8TOK)
	Q8SLICE8(176, 22, Q8TOK)
	Q8SLICE8(208, 26, Q8TOK)
	Q8SLICE8(240, 30, Q8TOK)
	Q8D
	Q8ENDS(DI, Y4, 0)
	Q8ENDS(R8, Y5, 32)
	Q8ENDS(R9, Y6, 64)
	Q8ENDS(R10, Y7, 96)
	Q8ENDS(R11, Y8, 128)
	Q8ENDS(R12, Y9, 160)
	Q8ENDS(R13, Y10, 192)
	Q8ENDS(R14, Y11, 224)
	ADDQ $272, SI
	ADDQ $34, DI
	ADDQ $34, R8
	ADDQ $34, R9
	ADDQ $34, R10
	ADDQ $34, R11
	ADDQ $34, R12
	ADDQ $34, R13
	ADDQ $34, R14
	DECQ CX
	JNZ  q8x8loop

	MOVQ    out+32(FP), DX
	MOVQ    ldo+40(FP), BX
	SHLQ    $2, BX
	VMOVUPS 0(SP), Y0
	VMOVUPS Y0, (DX)
	ADDQ    BX, DX
	VMOVUPS 32(SP), Y0
	VMOVUPS Y0, (DX)
	ADDQ    BX, DX
	VMOVUPS 64(SP), Y0
	VMOVUPS Y0, (DX)
	ADDQ    BX, DX
	VMOVUPS 96(SP), Y0
	VMOVUPS Y0, (DX)
	ADDQ    BX, DX
	VMOVUPS 128(SP), Y0
	VMOVUPS Y0, (DX)
	ADDQ    BX, DX
	VMOVUPS 160(SP), Y0
	VMOVUPS Y0, (DX)
	ADDQ    BX, DX
	VMOVUPS 192(SP), Y0
	VMOVUPS Y0, (DX)
	ADDQ    BX, DX
	VMOVUPS 224(SP), Y0
	VMOVUPS Y0, (DX)
	VZEROUPPER
	RET

// func gemmQ8R8x4AVX2(x *byte, nb int, y *byte, lda int, out *float32, ldo int)
TEXT ·gemmQ8R8x4AVX2(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ y+16(FP), DI
	MOVQ lda+24(FP), AX
	LEAQ (DI)(AX*1), R11
	LEAQ (DI)(AX*2), R12
	LEAQ (R11)(AX*2), R13
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	ONES16(Y3)

q8x4loop:
	Q8PREFETCH
	Q8SLICE4(16, 2, Q8TOK0)
	Q8SLICE4(48, 6, Q8TOK)
	Q8SLICE4(80, 10, Q8TOK)
	Q8SLICE4(112, 14, Q8TOK)
	Q8SLICE4(144, 18, Q8TOK)
	Q8SLICE4(176, 22, Q8TOK)
	Q8SLICE4(208, 26, Q8TOK)
	Q8SLICE4(240, 30, Q8TOK)
	Q8D
	Q8END(DI, Y4, Y8)
	Q8END(R11, Y5, Y9)
	Q8END(R12, Y6, Y10)
	Q8END(R13, Y7, Y11)
	ADDQ $272, SI
	ADDQ $34, DI
	ADDQ $34, R11
	ADDQ $34, R12
	ADDQ $34, R13
	DECQ CX
	JNZ  q8x4loop

	MOVQ    out+32(FP), DX
	MOVQ    ldo+40(FP), BX
	SHLQ    $2, BX
	VMOVUPS Y8, (DX)
	ADDQ    BX, DX
	VMOVUPS Y9, (DX)
	ADDQ    BX, DX
	VMOVUPS Y10, (DX)
	ADDQ    BX, DX
	VMOVUPS Y11, (DX)
	VZEROUPPER
	RET

// func gemmQ8R8x1AVX2(x *byte, nb int, y *byte, out *float32)
TEXT ·gemmQ8R8x1AVX2(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ y+16(FP), DI
	VXORPS Y8, Y8, Y8
	ONES16(Y3)

q8x1loop:
	Q8PREFETCH
	Q8LOAD(16)
	Q8TOK0(DI, 2, Y4)
	Q8LOAD(48)
	Q8TOK(DI, 6, Y4)
	Q8LOAD(80)
	Q8TOK(DI, 10, Y4)
	Q8LOAD(112)
	Q8TOK(DI, 14, Y4)
	Q8LOAD(144)
	Q8TOK(DI, 18, Y4)
	Q8LOAD(176)
	Q8TOK(DI, 22, Y4)
	Q8LOAD(208)
	Q8TOK(DI, 26, Y4)
	Q8LOAD(240)
	Q8TOK(DI, 30, Y4)
	Q8D
	Q8END(DI, Y4, Y8)
	ADDQ $272, SI
	ADDQ $34, DI
	DECQ CX
	JNZ  q8x1loop

	MOVQ    out+24(FP), DX
	VMOVUPS Y8, (DX)
	VZEROUPPER
	RET

// func gemmQ6KR8x4AVX2(x *byte, nb int, y *byte, lda int, out *float32, ldo int)
TEXT ·gemmQ6KR8x4AVX2(SB), 0, $768-48
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ y+16(FP), DI
	MOVQ lda+24(FP), AX
	LEAQ (DI)(AX*1), R11
	LEAQ (DI)(AX*2), R12
	LEAQ (R11)(AX*2), R13
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	BCAST8($0x3F3F3F3F, X6, Y6)
	BCAST8($0x03030303, X7, Y7)

q6x4loop:
	Q6SCALES
	VPXOR   Y12, Y12, Y12
	VPXOR   Y13, Y13, Y13
	VPXOR   Y14, Y14, Y14
	VPXOR   Y15, Y15, Y15
	MOVQ SI, R8
	LEAQ 0(SP), R10
	MOVQ $2, R9
q6x4half:
	PREFETCHT0 (DOTPF+0)(R8)
	PREFETCHT0 (DOTPF+64)(R8)
	Q6DEC(160, r6M0C<>(SB), r6M30<>(SB))
	Q6TOKQ(DI, 0, Y12)
	Q6TOKQ(R11, 0, Y13)
	Q6TOKQ(R12, 0, Y14)
	Q6TOKQ(R13, 0, Y15)
	PREFETCHT0 (DOTPF+128)(R8)
	Q6DEC(256, r6M0C<>(SB), r6M30<>(SB))
	Q6TOKQ(DI, 1, Y12)
	Q6TOKQ(R11, 1, Y13)
	Q6TOKQ(R12, 1, Y14)
	Q6TOKQ(R13, 1, Y15)
	PREFETCHT0 (DOTPF+192)(R8)
	PREFETCHT0 (DOTPF+256)(R8)
	Q6DEC(352, r6M0C<>(SB), r6M30<>(SB))
	Q6TOKQ(DI, 2, Y12)
	Q6TOKQ(R11, 2, Y13)
	Q6TOKQ(R12, 2, Y14)
	Q6TOKQ(R13, 2, Y15)
	PREFETCHT0 (DOTPF+320)(R8)
	Q6DEC(448, r6M0C<>(SB), r6M30<>(SB))
	Q6TOKQ(DI, 3, Y12)
	Q6TOKQ(R11, 3, Y13)
	Q6TOKQ(R12, 3, Y14)
	Q6TOKQ(R13, 3, Y15)
	PREFETCHT0 (DOTPF+384)(R8)
	PREFETCHT0 (DOTPF+448)(R8)
	Q6DEC(544, r6M0C<>(SB), r6M30<>(SB))
	Q6TOKQ(DI, 4, Y12)
	Q6TOKQ(R11, 4, Y13)
	Q6TOKQ(R12, 4, Y14)
	Q6TOKQ(R13, 4, Y15)
	PREFETCHT0 (DOTPF+512)(R8)
	Q6DEC(640, r6M0C<>(SB), r6M30<>(SB))
	Q6TOKQ(DI, 5, Y12)
	Q6TOKQ(R11, 5, Y13)
	Q6TOKQ(R12, 5, Y14)
	Q6TOKQ(R13, 5, Y15)
	PREFETCHT0 (DOTPF+576)(R8)
	PREFETCHT0 (DOTPF+640)(R8)
	Q6DEC(736, r6M0C<>(SB), r6M30<>(SB))
	Q6TOKQ(DI, 6, Y12)
	Q6TOKQ(R11, 6, Y13)
	Q6TOKQ(R12, 6, Y14)
	Q6TOKQ(R13, 6, Y15)
	PREFETCHT0 (DOTPF+704)(R8)
	Q6DEC(832, r6M0C<>(SB), r6M30<>(SB))
	Q6TOKQ(DI, 7, Y12)
	Q6TOKQ(R11, 7, Y13)
	Q6TOKQ(R12, 7, Y14)
	Q6TOKQ(R13, 7, Y15)
	ADDQ $768, R8
	ADDQ $256, R10
	ADDQ $128, DI
	ADDQ $128, R11
	ADDQ $128, R12
	ADDQ $128, R13
	DECQ R9
	JNZ  q6x4half
	SUBQ $256, DI
	SUBQ $256, R11
	SUBQ $256, R12
	SUBQ $256, R13
	VMOVUPS (SI), Y0
	Q6CORR(DI, Y12)
	Q6END(DI, Y12, Y8)
	Q6CORR(R11, Y13)
	Q6END(R11, Y13, Y9)
	Q6CORR(R12, Y14)
	Q6END(R12, Y14, Y10)
	Q6CORR(R13, Y15)
	Q6END(R13, Y15, Y11)
	ADDQ $1696, SI
	ADDQ $292, DI
	ADDQ $292, R11
	ADDQ $292, R12
	ADDQ $292, R13
	DECQ CX
	JNZ  q6x4loop

	MOVQ    out+32(FP), DX
	MOVQ    ldo+40(FP), BX
	SHLQ    $2, BX
	VMOVUPS Y8, (DX)
	ADDQ    BX, DX
	VMOVUPS Y9, (DX)
	ADDQ    BX, DX
	VMOVUPS Y10, (DX)
	ADDQ    BX, DX
	VMOVUPS Y11, (DX)
	VZEROUPPER
	RET

// func gemmQ6KR8x1AVX2(x *byte, nb int, y *byte, out *float32)
TEXT ·gemmQ6KR8x1AVX2(SB), 0, $768-32
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ y+16(FP), DI
	VXORPS Y8, Y8, Y8
	BCAST8($0x3F3F3F3F, X6, Y6)
	BCAST8($0x03030303, X7, Y7)
	BCAST8($0x0C0C0C0C, X13, Y13)
	BCAST8($0x30303030, X14, Y14)

q6x1loop:
	Q6SCALES
	VPXOR   Y12, Y12, Y12
	MOVQ SI, R8
	LEAQ 0(SP), R10
	MOVQ $2, R9
q6x1half:
	PREFETCHT0 (DOTPF+0)(R8)
	PREFETCHT0 (DOTPF+64)(R8)
	Q6DEC(160, Y13, Y14)
	Q6TOKQ(DI, 0, Y12)
	PREFETCHT0 (DOTPF+128)(R8)
	Q6DEC(256, Y13, Y14)
	Q6TOKQ(DI, 1, Y12)
	PREFETCHT0 (DOTPF+192)(R8)
	PREFETCHT0 (DOTPF+256)(R8)
	Q6DEC(352, Y13, Y14)
	Q6TOKQ(DI, 2, Y12)
	PREFETCHT0 (DOTPF+320)(R8)
	Q6DEC(448, Y13, Y14)
	Q6TOKQ(DI, 3, Y12)
	PREFETCHT0 (DOTPF+384)(R8)
	PREFETCHT0 (DOTPF+448)(R8)
	Q6DEC(544, Y13, Y14)
	Q6TOKQ(DI, 4, Y12)
	PREFETCHT0 (DOTPF+512)(R8)
	Q6DEC(640, Y13, Y14)
	Q6TOKQ(DI, 5, Y12)
	PREFETCHT0 (DOTPF+576)(R8)
	PREFETCHT0 (DOTPF+640)(R8)
	Q6DEC(736, Y13, Y14)
	Q6TOKQ(DI, 6, Y12)
	PREFETCHT0 (DOTPF+704)(R8)
	Q6DEC(832, Y13, Y14)
	Q6TOKQ(DI, 7, Y12)
	ADDQ $768, R8
	ADDQ $256, R10
	ADDQ $128, DI
	DECQ R9
	JNZ  q6x1half
	SUBQ $256, DI
	VMOVUPS (SI), Y0
	Q6CORR(DI, Y12)
	Q6END(DI, Y12, Y8)
	ADDQ $1696, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q6x1loop

	MOVQ    out+24(FP), DX
	VMOVUPS Y8, (DX)
	VZEROUPPER
	RET

// Products of repacked Q5_K groups: the Q4_K layout (d, dmin, scales, min
// pairs, the low four bits of the quants), then the fifth bits at 1184 +
// 32g + 4r (row r's qh[4g … 4g+3]: bit 2c of qh[l] belongs to element l
// of sub-block 2c, bit 2c+1 to sub-block 2c+1). A chunk c of 64 elements
// takes the slice's qh bytes shifted right by 2c (r5Shift, a word shift:
// the bits that cross into a byte's top are masked off) and moves each
// sub-block's bit to bit 4 of its quants. The 5-bit quants meet the
// activations in VPMADDUBSW as Q4_K's do, but only four slices of a
// sub-block are summed as int16 (at most 4·2·31·127 < 2^15) before their
// scales weight them (VPMADDWD), twice a chunk. The block ends as Q4_K's
// (R8END). Registers and stack as Q4_K's; R15 points at the chunk's shift
// count.
//
// func gemmQ5KR8x4AVX2(x *byte, nb int, y *byte, lda int, out *float32, ldo int)
// func gemmQ5KR8x1AVX2(x *byte, nb int, y *byte, out *float32)

// r5Shift holds the chunks' shift counts (0, 2, 4, 6) as 16-byte counts.
DATA r5Shift<>+0(SB)/8, $0
DATA r5Shift<>+8(SB)/8, $0
DATA r5Shift<>+16(SB)/8, $2
DATA r5Shift<>+24(SB)/8, $0
DATA r5Shift<>+32(SB)/8, $4
DATA r5Shift<>+40(SB)/8, $0
DATA r5Shift<>+48(SB)/8, $6
DATA r5Shift<>+56(SB)/8, $0
GLOBL r5Shift<>(SB), RODATA|NOPTR, $64

// r5Bit4 is the byte 0x10 repeated.
DATA r5Bit4<>+0(SB)/8, $0x1010101010101010
DATA r5Bit4<>+8(SB)/8, $0x1010101010101010
DATA r5Bit4<>+16(SB)/8, $0x1010101010101010
DATA r5Bit4<>+24(SB)/8, $0x1010101010101010
GLOBL r5Bit4<>(SB), RODATA|NOPTR, $32

// R5LOADC decodes slice g's 5-bit quants of the chunk: the low nibbles at
// off(R8) with the fifth bits from hoff(SI) to Y0, the high nibbles to Y1.
#define R5LOADC(off, hoff) \
	VMOVDQU hoff(SI), Y2; \
	VPSRLW  (R15), Y2, Y2; \
	VPSLLW  $3, Y2, Y1; \
	VPAND   r5Bit4<>(SB), Y1, Y1; \
	VPSLLW  $4, Y2, Y2; \
	VPAND   r5Bit4<>(SB), Y2, Y2; \
	VPAND   off(R8), Y3, Y0; \
	VPOR    Y2, Y0, Y0; \
	VMOVDQU off(R8), Y2; \
	VPSRLW  $4, Y2, Y2; \
	VPAND   Y3, Y2, Y2; \
	VPOR    Y2, Y1, Y1

// R5HALF4 runs slices g0 … g0+3 of a chunk for the four tokens and adds
// their scaled sums to the block sums.
#define R5HALF4(o0, o1, o2, o3, h0, h1, h2, h3, a0, a1, a2, a3) \
	R5LOADC(o0, h0); \
	R8TOK0(DI, a0, 32+a0, Y4, Y8); \
	R8TOK0(R11, a0, 32+a0, Y5, Y9); \
	R8TOK0(R12, a0, 32+a0, Y6, Y10); \
	R8TOK0(R13, a0, 32+a0, Y7, Y11); \
	R5LOADC(o1, h1); \
	R8TOK(DI, a1, 32+a1, Y4, Y8); \
	R8TOK(R11, a1, 32+a1, Y5, Y9); \
	R8TOK(R12, a1, 32+a1, Y6, Y10); \
	R8TOK(R13, a1, 32+a1, Y7, Y11); \
	R5LOADC(o2, h2); \
	R8TOK(DI, a2, 32+a2, Y4, Y8); \
	R8TOK(R11, a2, 32+a2, Y5, Y9); \
	R8TOK(R12, a2, 32+a2, Y6, Y10); \
	R8TOK(R13, a2, 32+a2, Y7, Y11); \
	R5LOADC(o3, h3); \
	R8TOK(DI, a3, 32+a3, Y4, Y8); \
	R8TOK(R11, a3, 32+a3, Y5, Y9); \
	R8TOK(R12, a3, 32+a3, Y6, Y10); \
	R8TOK(R13, a3, 32+a3, Y7, Y11); \
	R8SUBC(Y4, Y8, Y12); \
	R8SUBC(Y5, Y9, Y13); \
	R8SUBC(Y6, Y10, Y14); \
	R8SUBC(Y7, Y11, Y15)

// R5HALF1 is R5HALF4 for one token.
#define R5HALF1(o0, o1, o2, o3, h0, h1, h2, h3, a0, a1, a2, a3) \
	R5LOADC(o0, h0); \
	R8TOK0(DI, a0, 32+a0, Y4, Y8); \
	R5LOADC(o1, h1); \
	R8TOK(DI, a1, 32+a1, Y4, Y8); \
	R5LOADC(o2, h2); \
	R8TOK(DI, a2, 32+a2, Y4, Y8); \
	R5LOADC(o3, h3); \
	R8TOK(DI, a3, 32+a3, Y4, Y8); \
	R8SUBC(Y4, Y8, Y12)

// func gemmQ5KR8x4AVX2(x *byte, nb int, y *byte, lda int, out *float32, ldo int)
TEXT ·gemmQ5KR8x4AVX2(SB), NOSPLIT, $512-48
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ y+16(FP), DI
	MOVQ lda+24(FP), AX
	LEAQ (DI)(AX*1), R11
	LEAQ (DI)(AX*2), R12
	LEAQ (R11)(AX*2), R13
	VXORPS  Y0, Y0, Y0
	VMOVUPS Y0, 384(SP)
	VMOVUPS Y0, 416(SP)
	VMOVUPS Y0, 448(SP)
	VMOVUPS Y0, 480(SP)
	BCAST8($0x0F0F0F0F, X3, Y3)

r5x4loop:
	R8SCALES
	VPXOR Y12, Y12, Y12
	VPXOR Y13, Y13, Y13
	VPXOR Y14, Y14, Y14
	VPXOR Y15, Y15, Y15
	LEAQ 160(SI), R8
	LEAQ 0(SP), R10
	LEAQ r5Shift<>(SB), R15
	MOVQ $4, R9
r5x4chunk:
	PREFETCHT0 (DOTPF+0)(R8)
	PREFETCHT0 (DOTPF+64)(R8)
	PREFETCHT0 (DOTPF+128)(R8)
	PREFETCHT0 (DOTPF+192)(R8)
	PREFETCHT0 (DOTPF+256)(R8)
	R5HALF4(0, 32, 64, 96, 1184, 1216, 1248, 1280, 4, 8, 12, 16)
	R5HALF4(128, 160, 192, 224, 1312, 1344, 1376, 1408, 20, 24, 28, 32)
	ADDQ $256, R8
	ADDQ $64, R10
	ADDQ $16, R15
	ADDQ $64, DI
	ADDQ $64, R11
	ADDQ $64, R12
	ADDQ $64, R13
	DECQ R9
	JNZ  r5x4chunk
	PREFETCHT0 (DOTPF+1184)(SI)
	PREFETCHT0 (DOTPF+1248)(SI)
	PREFETCHT0 (DOTPF+1312)(SI)
	PREFETCHT0 (DOTPF+1376)(SI)
	SUBQ $256, DI
	SUBQ $256, R11
	SUBQ $256, R12
	SUBQ $256, R13
	VCVTPH2PS 0(SI), Y0
	VCVTPH2PS 16(SI), Y1
	R8END(DI, Y12, 384)
	R8END(R11, Y13, 416)
	R8END(R12, Y14, 448)
	R8END(R13, Y15, 480)
	ADDQ $1440, SI
	ADDQ $292, DI
	ADDQ $292, R11
	ADDQ $292, R12
	ADDQ $292, R13
	DECQ CX
	JNZ  r5x4loop

	MOVQ    out+32(FP), DX
	MOVQ    ldo+40(FP), BX
	SHLQ    $2, BX
	VMOVUPS 384(SP), Y0
	VMOVUPS Y0, (DX)
	ADDQ    BX, DX
	VMOVUPS 416(SP), Y0
	VMOVUPS Y0, (DX)
	ADDQ    BX, DX
	VMOVUPS 448(SP), Y0
	VMOVUPS Y0, (DX)
	ADDQ    BX, DX
	VMOVUPS 480(SP), Y0
	VMOVUPS Y0, (DX)
	VZEROUPPER
	RET

// func gemmQ5KR8x1AVX2(x *byte, nb int, y *byte, out *float32)
TEXT ·gemmQ5KR8x1AVX2(SB), NOSPLIT, $512-32
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ y+16(FP), DI
	VXORPS  Y0, Y0, Y0
	VMOVUPS Y0, 384(SP)
	BCAST8($0x0F0F0F0F, X3, Y3)

r5x1loop:
	R8SCALES
	VPXOR Y12, Y12, Y12
	LEAQ 160(SI), R8
	LEAQ 0(SP), R10
	LEAQ r5Shift<>(SB), R15
	MOVQ $4, R9
r5x1chunk:
	PREFETCHT0 (DOTPF+0)(R8)
	PREFETCHT0 (DOTPF+64)(R8)
	PREFETCHT0 (DOTPF+128)(R8)
	PREFETCHT0 (DOTPF+192)(R8)
	PREFETCHT0 (DOTPF+256)(R8)
	R5HALF1(0, 32, 64, 96, 1184, 1216, 1248, 1280, 4, 8, 12, 16)
	R5HALF1(128, 160, 192, 224, 1312, 1344, 1376, 1408, 20, 24, 28, 32)
	ADDQ $256, R8
	ADDQ $64, R10
	ADDQ $16, R15
	ADDQ $64, DI
	DECQ R9
	JNZ  r5x1chunk
	PREFETCHT0 (DOTPF+1184)(SI)
	PREFETCHT0 (DOTPF+1248)(SI)
	PREFETCHT0 (DOTPF+1312)(SI)
	PREFETCHT0 (DOTPF+1376)(SI)
	SUBQ $256, DI
	VCVTPH2PS 0(SI), Y0
	VCVTPH2PS 16(SI), Y1
	R8END(DI, Y12, 384)
	ADDQ $1440, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  r5x1loop

	MOVQ    out+24(FP), DX
	VMOVUPS 384(SP), Y0
	VMOVUPS Y0, (DX)
	VZEROUPPER
	RET

// Products of repacked IQ4_XS groups: eight rows' blocks of 256, their d
// (f16) at 0, the sub-block scales ls − 32 (int8) at 16 + 8j + r, the
// quants at 80 + 128j + 32g + 4r (row r's qs[16j + 4g … +3]: low nibbles
// elements 4g … 4g+3 of sub-block j, high nibbles elements 16 + 4g …),
// against Q8_K activations of four tokens (DI, R11, R12, R13) or one
// (DI). A load decodes both nibbles through the codebook (VPSHUFB); the
// codebook weights are signed, so VPMADDUBSW takes their magnitudes
// against the activations with the weights' signs (VPSIGNB, per token),
// and each pair sum (at most 2·127·127) goes straight into VPMADDWD with
// the sub-block's scale words (int32 per row). A block's sum times d·dy is
// fused into the token's float accumulator. The one-token kernel runs the
// same instructions per token.
//
// Registers: Y0, Y1 the low half's magnitudes and weights, Y2, Y3 the
// high half's; Y4 per-token scratch; Y5 the codebook; Y6 the nibble mask;
// Y7-Y10 the tokens' int32 block sums; Y11-Y14 their float accumulators
// (Y11 for one token); Y15 decoding scratch. Stack: the scales as word
// pairs (s_r, s_r) at 32j.
//
// func gemmIQ4XSR8x4AVX2(x *byte, nb int, y *byte, lda int, out *float32, ldo int)
// func gemmIQ4XSR8x1AVX2(x *byte, nb int, y *byte, out *float32)

// xsr8Table is the IQ4_NL codebook in both lanes.
DATA xsr8Table<>+0(SB)/8, $0xF6EADDCFBFAD9881
DATA xsr8Table<>+8(SB)/8, $0x7159453526190D01
DATA xsr8Table<>+16(SB)/8, $0xF6EADDCFBFAD9881
DATA xsr8Table<>+24(SB)/8, $0x7159453526190D01
GLOBL xsr8Table<>(SB), RODATA|NOPTR, $32

// XSR8SCALES expands the block's scales to sign-extended word pairs on the
// stack.
#define XSR8SCALE(j) \
	VPBROADCASTQ (16+8*j)(SI), Y4; \
	VPSHUFB      r6Dup<>(SB), Y4, Y4; \
	VPSRAW       $8, Y4, Y4; \
	VMOVDQU      Y4, (32*j)(SP)

#define XSR8SCALES \
	XSR8SCALE(0); XSR8SCALE(1); XSR8SCALE(2); XSR8SCALE(3); \
	XSR8SCALE(4); XSR8SCALE(5); XSR8SCALE(6); XSR8SCALE(7)

// XSR8LOAD decodes the 32 bytes of quants at off(SI).
#define XSR8LOAD(off) \
	VMOVDQU off(SI), Y15; \
	VPSRLW  $4, Y15, Y3; \
	VPAND   Y6, Y15, Y15; \
	VPAND   Y6, Y3, Y3; \
	VPSHUFB Y15, Y5, Y1; \
	VPSHUFB Y3, Y5, Y3; \
	VPABSB  Y1, Y0; \
	VPABSB  Y3, Y2

// XSR8TOK adds token P's products with the decoded slices (activations at
// lo and hi) weighted by sub-block j's scales to ACC.
#define XSR8TOK(P, lo, hi, j, ACC) \
	VPBROADCASTD lo(P), Y4; \
	VPSIGNB      Y1, Y4, Y4; \
	VPMADDUBSW   Y4, Y0, Y4; \
	VPMADDWD     (32*j)(SP), Y4, Y4; \
	VPADDD       Y4, ACC, ACC; \
	VPBROADCASTD hi(P), Y4; \
	VPSIGNB      Y3, Y4, Y4; \
	VPMADDUBSW   Y4, Y2, Y4; \
	VPMADDWD     (32*j)(SP), Y4, Y4; \
	VPADDD       Y4, ACC, ACC

// XSR8SUB4 runs sub-block j's four slices (XSR8SLICE4: slice g) for the
// four tokens, XSR8SUB1 for one.
#define XSR8SLICE4(j, g) \
	XSR8LOAD(80+128*j+32*g); \
	XSR8TOK(DI, 4+32*j+4*g, 20+32*j+4*g, j, Y7); \
	XSR8TOK(R11, 4+32*j+4*g, 20+32*j+4*g, j, Y8); \
	XSR8TOK(R12, 4+32*j+4*g, 20+32*j+4*g, j, Y9); \
	XSR8TOK(R13, 4+32*j+4*g, 20+32*j+4*g, j, Y10)

#define XSR8SUB4(j) \
	XSR8SLICE4(j, 0); XSR8SLICE4(j, 1); XSR8SLICE4(j, 2); XSR8SLICE4(j, 3)

#define XSR8SLICE1(j, g) \
	XSR8LOAD(80+128*j+32*g); \
	XSR8TOK(DI, 4+32*j+4*g, 20+32*j+4*g, j, Y7)

#define XSR8SUB1(j) \
	XSR8SLICE1(j, 0); XSR8SLICE1(j, 1); XSR8SLICE1(j, 2); XSR8SLICE1(j, 3)

// XSR8END adds token P's block sum ACC times d·dy (Y15 the eight d) to
// FACC.
#define XSR8END(P, ACC, FACC) \
	VBROADCASTSS 0(P), Y4; \
	VMULPS       Y4, Y15, Y4; \
	VCVTDQ2PS    ACC, ACC; \
	VFMADD231PS  Y4, ACC, FACC

#define XSR8PREFETCH \
	PREFETCHT0 (DOTPF+0)(SI); \
	PREFETCHT0 (DOTPF+64)(SI); \
	PREFETCHT0 (DOTPF+128)(SI); \
	PREFETCHT0 (DOTPF+192)(SI); \
	PREFETCHT0 (DOTPF+256)(SI); \
	PREFETCHT0 (DOTPF+320)(SI); \
	PREFETCHT0 (DOTPF+384)(SI); \
	PREFETCHT0 (DOTPF+448)(SI); \
	PREFETCHT0 (DOTPF+512)(SI); \
	PREFETCHT0 (DOTPF+576)(SI); \
	PREFETCHT0 (DOTPF+640)(SI); \
	PREFETCHT0 (DOTPF+704)(SI); \
	PREFETCHT0 (DOTPF+768)(SI); \
	PREFETCHT0 (DOTPF+832)(SI); \
	PREFETCHT0 (DOTPF+896)(SI); \
	PREFETCHT0 (DOTPF+960)(SI); \
	PREFETCHT0 (DOTPF+1024)(SI); \
	PREFETCHT0 (DOTPF+1088)(SI)

// func gemmIQ4XSR8x4AVX2(x *byte, nb int, y *byte, lda int, out *float32, ldo int)
TEXT ·gemmIQ4XSR8x4AVX2(SB), NOSPLIT, $256-48
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ y+16(FP), DI
	MOVQ lda+24(FP), AX
	LEAQ (DI)(AX*1), R11
	LEAQ (DI)(AX*2), R12
	LEAQ (R11)(AX*2), R13
	VXORPS  Y11, Y11, Y11
	VXORPS  Y12, Y12, Y12
	VXORPS  Y13, Y13, Y13
	VXORPS  Y14, Y14, Y14
	VMOVDQU xsr8Table<>(SB), Y5
	BCAST8($0x0F0F0F0F, X6, Y6)

xsr8x4loop:
	XSR8PREFETCH
	XSR8SCALES
	VPXOR Y7, Y7, Y7
	VPXOR Y8, Y8, Y8
	VPXOR Y9, Y9, Y9
	VPXOR Y10, Y10, Y10
	XSR8SUB4(0)
	XSR8SUB4(1)
	XSR8SUB4(2)
	XSR8SUB4(3)
	XSR8SUB4(4)
	XSR8SUB4(5)
	XSR8SUB4(6)
	XSR8SUB4(7)
	VCVTPH2PS 0(SI), Y15
	XSR8END(DI, Y7, Y11)
	XSR8END(R11, Y8, Y12)
	XSR8END(R12, Y9, Y13)
	XSR8END(R13, Y10, Y14)
	ADDQ $1104, SI
	ADDQ $292, DI
	ADDQ $292, R11
	ADDQ $292, R12
	ADDQ $292, R13
	DECQ CX
	JNZ  xsr8x4loop

	MOVQ    out+32(FP), DX
	MOVQ    ldo+40(FP), BX
	SHLQ    $2, BX
	VMOVUPS Y11, (DX)
	ADDQ    BX, DX
	VMOVUPS Y12, (DX)
	ADDQ    BX, DX
	VMOVUPS Y13, (DX)
	ADDQ    BX, DX
	VMOVUPS Y14, (DX)
	VZEROUPPER
	RET

// func gemmIQ4XSR8x1AVX2(x *byte, nb int, y *byte, out *float32)
TEXT ·gemmIQ4XSR8x1AVX2(SB), NOSPLIT, $256-32
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ y+16(FP), DI
	VXORPS  Y11, Y11, Y11
	VMOVDQU xsr8Table<>(SB), Y5
	BCAST8($0x0F0F0F0F, X6, Y6)

xsr8x1loop:
	XSR8PREFETCH
	XSR8SCALES
	VPXOR Y7, Y7, Y7
	XSR8SUB1(0)
	XSR8SUB1(1)
	XSR8SUB1(2)
	XSR8SUB1(3)
	XSR8SUB1(4)
	XSR8SUB1(5)
	XSR8SUB1(6)
	XSR8SUB1(7)
	VCVTPH2PS 0(SI), Y15
	XSR8END(DI, Y7, Y11)
	ADDQ $1104, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  xsr8x1loop

	MOVQ    out+24(FP), DX
	VMOVUPS Y11, (DX)
	VZEROUPPER
	RET
