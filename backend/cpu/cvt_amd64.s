//go:build !purego

#include "textflag.h"

// Conversions of KV cache rows to float32 (AVX2 with F16C), each exactly
// tensor.Dequantize's values.

// func cvtF16AVX2(dst *float32, src *byte, n int)
// n is a multiple of 8.
TEXT ·cvtF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

f16loop:
	CMPQ      CX, $8
	JL        f16done
	VCVTPH2PS (SI), Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	SUBQ      $8, CX
	JMP       f16loop

f16done:
	VZEROUPPER
	RET

// func cvtBF16AVX2(dst *float32, src *byte, n int)
// n is a multiple of 8: a bfloat16 is the high half of its float32.
TEXT ·cvtBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

bf16loop:
	CMPQ      CX, $8
	JL        bf16done
	VPMOVZXWD (SI), Y0
	VPSLLD    $16, Y0, Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	SUBQ      $8, CX
	JMP       bf16loop

bf16done:
	VZEROUPPER
	RET

// func cvtQ80AVX2(dst *float32, src *byte, blocks int)
// Each block is a float16 scale and 32 int8 values: value = q·scale.
TEXT ·cvtQ80AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ blocks+16(FP), CX

q8loop:
	CMPQ         CX, $0
	JLE          q8done
	MOVWLZX      (SI), AX
	VMOVQ        AX, X1
	VCVTPH2PS    X1, X1
	VBROADCASTSS X1, Y1
	VPMOVSXBD    2(SI), Y0
	VCVTDQ2PS    Y0, Y0
	VMULPS       Y1, Y0, Y0
	VMOVUPS      Y0, (DI)
	VPMOVSXBD    10(SI), Y0
	VCVTDQ2PS    Y0, Y0
	VMULPS       Y1, Y0, Y0
	VMOVUPS      Y0, 32(DI)
	VPMOVSXBD    18(SI), Y0
	VCVTDQ2PS    Y0, Y0
	VMULPS       Y1, Y0, Y0
	VMOVUPS      Y0, 64(DI)
	VPMOVSXBD    26(SI), Y0
	VCVTDQ2PS    Y0, Y0
	VMULPS       Y1, Y0, Y0
	VMOVUPS      Y0, 96(DI)
	ADDQ         $34, SI
	ADDQ         $128, DI
	DECQ         CX
	JMP          q8loop

q8done:
	VZEROUPPER
	RET
