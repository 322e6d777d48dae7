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
// float accumulators at 384+32t.
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

// R8LOAD decodes 32 bytes of quants at off(SI) to Y0 (low nibbles) and
// Y1 (high).
#define R8LOAD(off) \
	VMOVDQU off(SI), Y0; \
	VPSRLW  $4, Y0, Y1; \
	VPAND   Y3, Y0, Y0; \
	VPAND   Y3, Y1, Y1

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

// R8SUB adds the scaled sums of sub-blocks 2c (WL, scales at slo) and
// 2c+1 (WH, at shi) to the block sums ACC.
#define R8SUB(WL, WH, ACC, slo, shi) \
	VPMADDWD slo(SP), WL, WL; \
	VPMADDWD shi(SP), WH, WH; \
	VPADDD   WL, ACC, ACC; \
	VPADDD   WH, ACC, ACC

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
	// chunk 0: sub-blocks 0 and 1
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	PREFETCHT0 (DOTPF+128)(SI)
	PREFETCHT0 (DOTPF+192)(SI)
	PREFETCHT0 (DOTPF+256)(SI)
	R8LOAD(160)
	R8TOK0(DI, 4, 36, Y4, Y8)
	R8TOK0(R11, 4, 36, Y5, Y9)
	R8TOK0(R12, 4, 36, Y6, Y10)
	R8TOK0(R13, 4, 36, Y7, Y11)
	R8LOAD(192)
	R8TOK(DI, 8, 40, Y4, Y8)
	R8TOK(R11, 8, 40, Y5, Y9)
	R8TOK(R12, 8, 40, Y6, Y10)
	R8TOK(R13, 8, 40, Y7, Y11)
	R8LOAD(224)
	R8TOK(DI, 12, 44, Y4, Y8)
	R8TOK(R11, 12, 44, Y5, Y9)
	R8TOK(R12, 12, 44, Y6, Y10)
	R8TOK(R13, 12, 44, Y7, Y11)
	R8LOAD(256)
	R8TOK(DI, 16, 48, Y4, Y8)
	R8TOK(R11, 16, 48, Y5, Y9)
	R8TOK(R12, 16, 48, Y6, Y10)
	R8TOK(R13, 16, 48, Y7, Y11)
	R8LOAD(288)
	R8TOK(DI, 20, 52, Y4, Y8)
	R8TOK(R11, 20, 52, Y5, Y9)
	R8TOK(R12, 20, 52, Y6, Y10)
	R8TOK(R13, 20, 52, Y7, Y11)
	R8LOAD(320)
	R8TOK(DI, 24, 56, Y4, Y8)
	R8TOK(R11, 24, 56, Y5, Y9)
	R8TOK(R12, 24, 56, Y6, Y10)
	R8TOK(R13, 24, 56, Y7, Y11)
	R8LOAD(352)
	R8TOK(DI, 28, 60, Y4, Y8)
	R8TOK(R11, 28, 60, Y5, Y9)
	R8TOK(R12, 28, 60, Y6, Y10)
	R8TOK(R13, 28, 60, Y7, Y11)
	R8LOAD(384)
	R8TOK(DI, 32, 64, Y4, Y8)
	R8TOK(R11, 32, 64, Y5, Y9)
	R8TOK(R12, 32, 64, Y6, Y10)
	R8TOK(R13, 32, 64, Y7, Y11)
	R8SUB(Y4, Y8, Y12, 0, 32)
	R8SUB(Y5, Y9, Y13, 0, 32)
	R8SUB(Y6, Y10, Y14, 0, 32)
	R8SUB(Y7, Y11, Y15, 0, 32)
	// chunk 1: sub-blocks 2 and 3
	PREFETCHT0 (DOTPF+320)(SI)
	PREFETCHT0 (DOTPF+384)(SI)
	PREFETCHT0 (DOTPF+448)(SI)
	PREFETCHT0 (DOTPF+512)(SI)
	PREFETCHT0 (DOTPF+576)(SI)
	R8LOAD(416)
	R8TOK0(DI, 68, 100, Y4, Y8)
	R8TOK0(R11, 68, 100, Y5, Y9)
	R8TOK0(R12, 68, 100, Y6, Y10)
	R8TOK0(R13, 68, 100, Y7, Y11)
	R8LOAD(448)
	R8TOK(DI, 72, 104, Y4, Y8)
	R8TOK(R11, 72, 104, Y5, Y9)
	R8TOK(R12, 72, 104, Y6, Y10)
	R8TOK(R13, 72, 104, Y7, Y11)
	R8LOAD(480)
	R8TOK(DI, 76, 108, Y4, Y8)
	R8TOK(R11, 76, 108, Y5, Y9)
	R8TOK(R12, 76, 108, Y6, Y10)
	R8TOK(R13, 76, 108, Y7, Y11)
	R8LOAD(512)
	R8TOK(DI, 80, 112, Y4, Y8)
	R8TOK(R11, 80, 112, Y5, Y9)
	R8TOK(R12, 80, 112, Y6, Y10)
	R8TOK(R13, 80, 112, Y7, Y11)
	R8LOAD(544)
	R8TOK(DI, 84, 116, Y4, Y8)
	R8TOK(R11, 84, 116, Y5, Y9)
	R8TOK(R12, 84, 116, Y6, Y10)
	R8TOK(R13, 84, 116, Y7, Y11)
	R8LOAD(576)
	R8TOK(DI, 88, 120, Y4, Y8)
	R8TOK(R11, 88, 120, Y5, Y9)
	R8TOK(R12, 88, 120, Y6, Y10)
	R8TOK(R13, 88, 120, Y7, Y11)
	R8LOAD(608)
	R8TOK(DI, 92, 124, Y4, Y8)
	R8TOK(R11, 92, 124, Y5, Y9)
	R8TOK(R12, 92, 124, Y6, Y10)
	R8TOK(R13, 92, 124, Y7, Y11)
	R8LOAD(640)
	R8TOK(DI, 96, 128, Y4, Y8)
	R8TOK(R11, 96, 128, Y5, Y9)
	R8TOK(R12, 96, 128, Y6, Y10)
	R8TOK(R13, 96, 128, Y7, Y11)
	R8SUB(Y4, Y8, Y12, 64, 96)
	R8SUB(Y5, Y9, Y13, 64, 96)
	R8SUB(Y6, Y10, Y14, 64, 96)
	R8SUB(Y7, Y11, Y15, 64, 96)
	// chunk 2: sub-blocks 4 and 5
	PREFETCHT0 (DOTPF+640)(SI)
	PREFETCHT0 (DOTPF+704)(SI)
	PREFETCHT0 (DOTPF+768)(SI)
	PREFETCHT0 (DOTPF+832)(SI)
	PREFETCHT0 (DOTPF+896)(SI)
	R8LOAD(672)
	R8TOK0(DI, 132, 164, Y4, Y8)
	R8TOK0(R11, 132, 164, Y5, Y9)
	R8TOK0(R12, 132, 164, Y6, Y10)
	R8TOK0(R13, 132, 164, Y7, Y11)
	R8LOAD(704)
	R8TOK(DI, 136, 168, Y4, Y8)
	R8TOK(R11, 136, 168, Y5, Y9)
	R8TOK(R12, 136, 168, Y6, Y10)
	R8TOK(R13, 136, 168, Y7, Y11)
	R8LOAD(736)
	R8TOK(DI, 140, 172, Y4, Y8)
	R8TOK(R11, 140, 172, Y5, Y9)
	R8TOK(R12, 140, 172, Y6, Y10)
	R8TOK(R13, 140, 172, Y7, Y11)
	R8LOAD(768)
	R8TOK(DI, 144, 176, Y4, Y8)
	R8TOK(R11, 144, 176, Y5, Y9)
	R8TOK(R12, 144, 176, Y6, Y10)
	R8TOK(R13, 144, 176, Y7, Y11)
	R8LOAD(800)
	R8TOK(DI, 148, 180, Y4, Y8)
	R8TOK(R11, 148, 180, Y5, Y9)
	R8TOK(R12, 148, 180, Y6, Y10)
	R8TOK(R13, 148, 180, Y7, Y11)
	R8LOAD(832)
	R8TOK(DI, 152, 184, Y4, Y8)
	R8TOK(R11, 152, 184, Y5, Y9)
	R8TOK(R12, 152, 184, Y6, Y10)
	R8TOK(R13, 152, 184, Y7, Y11)
	R8LOAD(864)
	R8TOK(DI, 156, 188, Y4, Y8)
	R8TOK(R11, 156, 188, Y5, Y9)
	R8TOK(R12, 156, 188, Y6, Y10)
	R8TOK(R13, 156, 188, Y7, Y11)
	R8LOAD(896)
	R8TOK(DI, 160, 192, Y4, Y8)
	R8TOK(R11, 160, 192, Y5, Y9)
	R8TOK(R12, 160, 192, Y6, Y10)
	R8TOK(R13, 160, 192, Y7, Y11)
	R8SUB(Y4, Y8, Y12, 128, 160)
	R8SUB(Y5, Y9, Y13, 128, 160)
	R8SUB(Y6, Y10, Y14, 128, 160)
	R8SUB(Y7, Y11, Y15, 128, 160)
	// chunk 3: sub-blocks 6 and 7
	PREFETCHT0 (DOTPF+960)(SI)
	PREFETCHT0 (DOTPF+1024)(SI)
	PREFETCHT0 (DOTPF+1088)(SI)
	PREFETCHT0 (DOTPF+1152)(SI)
	PREFETCHT0 (DOTPF+1216)(SI)
	R8LOAD(928)
	R8TOK0(DI, 196, 228, Y4, Y8)
	R8TOK0(R11, 196, 228, Y5, Y9)
	R8TOK0(R12, 196, 228, Y6, Y10)
	R8TOK0(R13, 196, 228, Y7, Y11)
	R8LOAD(960)
	R8TOK(DI, 200, 232, Y4, Y8)
	R8TOK(R11, 200, 232, Y5, Y9)
	R8TOK(R12, 200, 232, Y6, Y10)
	R8TOK(R13, 200, 232, Y7, Y11)
	R8LOAD(992)
	R8TOK(DI, 204, 236, Y4, Y8)
	R8TOK(R11, 204, 236, Y5, Y9)
	R8TOK(R12, 204, 236, Y6, Y10)
	R8TOK(R13, 204, 236, Y7, Y11)
	R8LOAD(1024)
	R8TOK(DI, 208, 240, Y4, Y8)
	R8TOK(R11, 208, 240, Y5, Y9)
	R8TOK(R12, 208, 240, Y6, Y10)
	R8TOK(R13, 208, 240, Y7, Y11)
	R8LOAD(1056)
	R8TOK(DI, 212, 244, Y4, Y8)
	R8TOK(R11, 212, 244, Y5, Y9)
	R8TOK(R12, 212, 244, Y6, Y10)
	R8TOK(R13, 212, 244, Y7, Y11)
	R8LOAD(1088)
	R8TOK(DI, 216, 248, Y4, Y8)
	R8TOK(R11, 216, 248, Y5, Y9)
	R8TOK(R12, 216, 248, Y6, Y10)
	R8TOK(R13, 216, 248, Y7, Y11)
	R8LOAD(1120)
	R8TOK(DI, 220, 252, Y4, Y8)
	R8TOK(R11, 220, 252, Y5, Y9)
	R8TOK(R12, 220, 252, Y6, Y10)
	R8TOK(R13, 220, 252, Y7, Y11)
	R8LOAD(1152)
	R8TOK(DI, 224, 256, Y4, Y8)
	R8TOK(R11, 224, 256, Y5, Y9)
	R8TOK(R12, 224, 256, Y6, Y10)
	R8TOK(R13, 224, 256, Y7, Y11)
	R8SUB(Y4, Y8, Y12, 192, 224)
	R8SUB(Y5, Y9, Y13, 192, 224)
	R8SUB(Y6, Y10, Y14, 192, 224)
	R8SUB(Y7, Y11, Y15, 192, 224)
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
	// chunk 0: sub-blocks 0 and 1
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	PREFETCHT0 (DOTPF+128)(SI)
	PREFETCHT0 (DOTPF+192)(SI)
	PREFETCHT0 (DOTPF+256)(SI)
	R8LOAD(160)
	R8TOK0(DI, 4, 36, Y4, Y8)
	R8LOAD(192)
	R8TOK(DI, 8, 40, Y4, Y8)
	R8LOAD(224)
	R8TOK(DI, 12, 44, Y4, Y8)
	R8LOAD(256)
	R8TOK(DI, 16, 48, Y4, Y8)
	R8LOAD(288)
	R8TOK(DI, 20, 52, Y4, Y8)
	R8LOAD(320)
	R8TOK(DI, 24, 56, Y4, Y8)
	R8LOAD(352)
	R8TOK(DI, 28, 60, Y4, Y8)
	R8LOAD(384)
	R8TOK(DI, 32, 64, Y4, Y8)
	R8SUB(Y4, Y8, Y12, 0, 32)
	// chunk 1: sub-blocks 2 and 3
	PREFETCHT0 (DOTPF+320)(SI)
	PREFETCHT0 (DOTPF+384)(SI)
	PREFETCHT0 (DOTPF+448)(SI)
	PREFETCHT0 (DOTPF+512)(SI)
	PREFETCHT0 (DOTPF+576)(SI)
	R8LOAD(416)
	R8TOK0(DI, 68, 100, Y4, Y8)
	R8LOAD(448)
	R8TOK(DI, 72, 104, Y4, Y8)
	R8LOAD(480)
	R8TOK(DI, 76, 108, Y4, Y8)
	R8LOAD(512)
	R8TOK(DI, 80, 112, Y4, Y8)
	R8LOAD(544)
	R8TOK(DI, 84, 116, Y4, Y8)
	R8LOAD(576)
	R8TOK(DI, 88, 120, Y4, Y8)
	R8LOAD(608)
	R8TOK(DI, 92, 124, Y4, Y8)
	R8LOAD(640)
	R8TOK(DI, 96, 128, Y4, Y8)
	R8SUB(Y4, Y8, Y12, 64, 96)
	// chunk 2: sub-blocks 4 and 5
	PREFETCHT0 (DOTPF+640)(SI)
	PREFETCHT0 (DOTPF+704)(SI)
	PREFETCHT0 (DOTPF+768)(SI)
	PREFETCHT0 (DOTPF+832)(SI)
	PREFETCHT0 (DOTPF+896)(SI)
	R8LOAD(672)
	R8TOK0(DI, 132, 164, Y4, Y8)
	R8LOAD(704)
	R8TOK(DI, 136, 168, Y4, Y8)
	R8LOAD(736)
	R8TOK(DI, 140, 172, Y4, Y8)
	R8LOAD(768)
	R8TOK(DI, 144, 176, Y4, Y8)
	R8LOAD(800)
	R8TOK(DI, 148, 180, Y4, Y8)
	R8LOAD(832)
	R8TOK(DI, 152, 184, Y4, Y8)
	R8LOAD(864)
	R8TOK(DI, 156, 188, Y4, Y8)
	R8LOAD(896)
	R8TOK(DI, 160, 192, Y4, Y8)
	R8SUB(Y4, Y8, Y12, 128, 160)
	// chunk 3: sub-blocks 6 and 7
	PREFETCHT0 (DOTPF+960)(SI)
	PREFETCHT0 (DOTPF+1024)(SI)
	PREFETCHT0 (DOTPF+1088)(SI)
	PREFETCHT0 (DOTPF+1152)(SI)
	PREFETCHT0 (DOTPF+1216)(SI)
	R8LOAD(928)
	R8TOK0(DI, 196, 228, Y4, Y8)
	R8LOAD(960)
	R8TOK(DI, 200, 232, Y4, Y8)
	R8LOAD(992)
	R8TOK(DI, 204, 236, Y4, Y8)
	R8LOAD(1024)
	R8TOK(DI, 208, 240, Y4, Y8)
	R8LOAD(1056)
	R8TOK(DI, 212, 244, Y4, Y8)
	R8LOAD(1088)
	R8TOK(DI, 216, 248, Y4, Y8)
	R8LOAD(1120)
	R8TOK(DI, 220, 252, Y4, Y8)
	R8LOAD(1152)
	R8TOK(DI, 224, 256, Y4, Y8)
	R8SUB(Y4, Y8, Y12, 192, 224)
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

// Products of repacked 8-bit groups (Q8_0, and Q5_0 widened to 8 bits when
// repacked): eight rows' 32-element blocks, their scales d as float32 at 0,
// the quants at 32 + 32g + 4r, against Q8_0 activations (34-byte blocks),
// four tokens (DI, R11, R12, R13) or one (DI). VPMADDUBSW needs one
// unsigned operand: the weights' magnitudes |w| (computed once per load)
// against the activations with the weights' signs (VPSIGNB, per token);
// each pair sum (at most 2·128·127) is widened at once (VPMADDWD with ones)
// to int32, one lane per row. Each block ends as the single-row kernel's:
// the int32 sums times d·dy fused into eight float accumulators.
//
// Registers: Y0 the weights, Y1 their magnitudes, Y2 scratch, Y3 ones
// (int16), Y4-Y7 the tokens' block sums, Y8-Y11 their float accumulators,
// Y12 scratch.
//
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

// Q8END adds token P's block sums ACC times d·dy to FACC.
#define Q8END(P, ACC, FACC) \
	MOVWLZX      (P), AX; \
	VMOVD        AX, X12; \
	VCVTPH2PS    X12, X12; \
	VBROADCASTSS X12, Y12; \
	VMULPS       (SI), Y12, Y12; \
	VCVTDQ2PS    ACC, ACC; \
	VFMADD231PS  Y12, ACC, FACC

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
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	PREFETCHT0 (DOTPF+128)(SI)
	PREFETCHT0 (DOTPF+192)(SI)
	PREFETCHT0 (DOTPF+256)(SI)
	Q8LOAD(32)
	Q8TOK0(DI, 2, Y4)
	Q8TOK0(R11, 2, Y5)
	Q8TOK0(R12, 2, Y6)
	Q8TOK0(R13, 2, Y7)
	Q8LOAD(64)
	Q8TOK(DI, 6, Y4)
	Q8TOK(R11, 6, Y5)
	Q8TOK(R12, 6, Y6)
	Q8TOK(R13, 6, Y7)
	Q8LOAD(96)
	Q8TOK(DI, 10, Y4)
	Q8TOK(R11, 10, Y5)
	Q8TOK(R12, 10, Y6)
	Q8TOK(R13, 10, Y7)
	Q8LOAD(128)
	Q8TOK(DI, 14, Y4)
	Q8TOK(R11, 14, Y5)
	Q8TOK(R12, 14, Y6)
	Q8TOK(R13, 14, Y7)
	Q8LOAD(160)
	Q8TOK(DI, 18, Y4)
	Q8TOK(R11, 18, Y5)
	Q8TOK(R12, 18, Y6)
	Q8TOK(R13, 18, Y7)
	Q8LOAD(192)
	Q8TOK(DI, 22, Y4)
	Q8TOK(R11, 22, Y5)
	Q8TOK(R12, 22, Y6)
	Q8TOK(R13, 22, Y7)
	Q8LOAD(224)
	Q8TOK(DI, 26, Y4)
	Q8TOK(R11, 26, Y5)
	Q8TOK(R12, 26, Y6)
	Q8TOK(R13, 26, Y7)
	Q8LOAD(256)
	Q8TOK(DI, 30, Y4)
	Q8TOK(R11, 30, Y5)
	Q8TOK(R12, 30, Y6)
	Q8TOK(R13, 30, Y7)
	Q8END(DI, Y4, Y8)
	Q8END(R11, Y5, Y9)
	Q8END(R12, Y6, Y10)
	Q8END(R13, Y7, Y11)
	ADDQ $288, SI
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
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	PREFETCHT0 (DOTPF+128)(SI)
	PREFETCHT0 (DOTPF+192)(SI)
	PREFETCHT0 (DOTPF+256)(SI)
	Q8LOAD(32)
	Q8TOK0(DI, 2, Y4)
	Q8LOAD(64)
	Q8TOK(DI, 6, Y4)
	Q8LOAD(96)
	Q8TOK(DI, 10, Y4)
	Q8LOAD(128)
	Q8TOK(DI, 14, Y4)
	Q8LOAD(160)
	Q8TOK(DI, 18, Y4)
	Q8LOAD(192)
	Q8TOK(DI, 22, Y4)
	Q8LOAD(224)
	Q8TOK(DI, 26, Y4)
	Q8LOAD(256)
	Q8TOK(DI, 30, Y4)
	Q8END(DI, Y4, Y8)
	ADDQ $288, SI
	ADDQ $34, DI
	DECQ CX
	JNZ  q8x1loop

	MOVQ    out+24(FP), DX
	VMOVUPS Y8, (DX)
	VZEROUPPER
	RET
