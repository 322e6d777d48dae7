//go:build !purego

#include "textflag.h"
#include "dot_amd64.h"

// AVX2/FMA dot products of float weights (F32, F16 through F16C, BF16) with
// float32 activations: four 8-lane FMA accumulators over 32 elements a step,
// then 8 at a time, then single elements.

// FLOATSETUP loads the arguments and clears the accumulators Y0-Y3.
#define FLOATSETUP \
	MOVQ   x+0(FP), SI; \
	MOVQ   y+8(FP), DI; \
	MOVQ   n+16(FP), CX; \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3

// func dotF32F32AVX2(x, y *byte, n int) float32
TEXT ·dotF32F32AVX2(SB), NOSPLIT, $0-28
	FLOATSETUP

f32loop32:
	CMPQ        CX, $32
	JLT         f32loop8
	VMOVUPS     0(SI), Y4
	VFMADD231PS 0(DI), Y4, Y0
	VMOVUPS     32(SI), Y5
	VFMADD231PS 32(DI), Y5, Y1
	VMOVUPS     64(SI), Y6
	VFMADD231PS 64(DI), Y6, Y2
	VMOVUPS     96(SI), Y7
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JMP         f32loop32

f32loop8:
	CMPQ        CX, $8
	JLT         f32sum
	VMOVUPS     0(SI), Y4
	VFMADD231PS 0(DI), Y4, Y0
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         f32loop8

f32sum:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	HSUM(Y0, X0, X1)

f32loop1:
	TESTQ       CX, CX
	JZ          f32done
	VMOVSS      0(SI), X4
	VFMADD231SS 0(DI), X4, X0
	ADDQ        $4, SI
	ADDQ        $4, DI
	DECQ        CX
	JMP         f32loop1

f32done:
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func dotF16F32AVX2(x, y *byte, n int) float32
TEXT ·dotF16F32AVX2(SB), NOSPLIT, $0-28
	FLOATSETUP

f16loop32:
	CMPQ        CX, $32
	JLT         f16loop8
	VCVTPH2PS   0(SI), Y4
	VFMADD231PS 0(DI), Y4, Y0
	VCVTPH2PS   16(SI), Y5
	VFMADD231PS 32(DI), Y5, Y1
	VCVTPH2PS   32(SI), Y6
	VFMADD231PS 64(DI), Y6, Y2
	VCVTPH2PS   48(SI), Y7
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ        $64, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JMP         f16loop32

f16loop8:
	CMPQ        CX, $8
	JLT         f16sum
	VCVTPH2PS   0(SI), Y4
	VFMADD231PS 0(DI), Y4, Y0
	ADDQ        $16, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         f16loop8

f16sum:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	HSUM(Y0, X0, X1)

f16loop1:
	TESTQ       CX, CX
	JZ          f16done
	MOVWLZX     0(SI), AX
	VMOVD       AX, X4
	VCVTPH2PS   X4, X4
	VFMADD231SS 0(DI), X4, X0
	ADDQ        $2, SI
	ADDQ        $4, DI
	DECQ        CX
	JMP         f16loop1

f16done:
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func dotBF16F32AVX2(x, y *byte, n int) float32
TEXT ·dotBF16F32AVX2(SB), NOSPLIT, $0-28
	FLOATSETUP

bf16loop32:
	CMPQ        CX, $32
	JLT         bf16loop8
	VPMOVZXWD   0(SI), Y4
	VPSLLD      $16, Y4, Y4
	VFMADD231PS 0(DI), Y4, Y0
	VPMOVZXWD   16(SI), Y5
	VPSLLD      $16, Y5, Y5
	VFMADD231PS 32(DI), Y5, Y1
	VPMOVZXWD   32(SI), Y6
	VPSLLD      $16, Y6, Y6
	VFMADD231PS 64(DI), Y6, Y2
	VPMOVZXWD   48(SI), Y7
	VPSLLD      $16, Y7, Y7
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ        $64, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JMP         bf16loop32

bf16loop8:
	CMPQ        CX, $8
	JLT         bf16sum
	VPMOVZXWD   0(SI), Y4
	VPSLLD      $16, Y4, Y4
	VFMADD231PS 0(DI), Y4, Y0
	ADDQ        $16, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         bf16loop8

bf16sum:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	HSUM(Y0, X0, X1)

bf16loop1:
	TESTQ       CX, CX
	JZ          bf16done
	MOVWLZX     0(SI), AX
	SHLL        $16, AX
	VMOVD       AX, X4
	VFMADD231SS 0(DI), X4, X0
	ADDQ        $2, SI
	ADDQ        $4, DI
	DECQ        CX
	JMP         bf16loop1

bf16done:
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET
