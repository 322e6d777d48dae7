//go:build !purego

#include "textflag.h"

// FADDP Vd.4S, Vn.4S, Vm.4S (pairwise float adds) and FADD Vd.4S: Go's
// assembler has no mnemonics for them.
#define FADDP4(d, n, m) WORD $(0x6e20d400|((m)<<16)|((n)<<5)|(d))
#define FADD4(d, n, m) WORD $(0x4e20d400|((m)<<16)|((n)<<5)|(d))

// func dot1NEON(q, k *float32, n int) float32
//
// Sixteen products a step in four accumulators (fused multiply-adds), the
// accumulators summed (0+1)+(2+3) and their lanes pairwise, then the last
// n%16 products fused into the sum one by one.
TEXT ·dot1NEON(SB), NOSPLIT, $0-28
	MOVD q+0(FP), R0
	MOVD k+8(FP), R1
	MOVD n+16(FP), R2
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16
	CMP  $16, R2
	BLT  reduce

loop16:
	VLD1.P 64(R0), [V4.S4, V5.S4, V6.S4, V7.S4]
	VLD1.P 64(R1), [V16.S4, V17.S4, V18.S4, V19.S4]
	VFMLA  V16.S4, V4.S4, V0.S4
	VFMLA  V17.S4, V5.S4, V1.S4
	VFMLA  V18.S4, V6.S4, V2.S4
	VFMLA  V19.S4, V7.S4, V3.S4
	SUB    $16, R2
	CMP    $16, R2
	BGE    loop16

reduce:
	FADD4(0, 0, 1)
	FADD4(2, 2, 3)
	FADD4(0, 0, 2)
	FADDP4(0, 0, 0)
	FADDP4(0, 0, 0)
	CBZ    R2, done

tail:
	FMOVS.P 4(R0), F1
	FMOVS.P 4(R1), F2
	FMADDS  F2, F0, F1, F0
	SUBS    $1, R2, R2
	BNE     tail

done:
	FMOVS F0, ret+24(FP)
	RET

// func axpyNEON(y *float32, a float32, x *float32, n int)
//
// y[i] += a·x[i], one fused multiply-add per element, sixteen a step.
TEXT ·axpyNEON(SB), NOSPLIT, $0-32
	MOVD  y+0(FP), R0
	FMOVS a+8(FP), F31
	MOVD  x+16(FP), R1
	MOVD  n+24(FP), R2
	VDUP  V31.S[0], V30.S4
	CMP   $16, R2
	BLT   tail

loop16:
	VLD1   (R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 64(R1), [V4.S4, V5.S4, V6.S4, V7.S4]
	VFMLA  V30.S4, V4.S4, V0.S4
	VFMLA  V30.S4, V5.S4, V1.S4
	VFMLA  V30.S4, V6.S4, V2.S4
	VFMLA  V30.S4, V7.S4, V3.S4
	VST1.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R0)
	SUB    $16, R2
	CMP    $16, R2
	BGE    loop16

tail:
	CBZ R2, done

scalar:
	FMOVS   (R0), F0
	FMOVS.P 4(R1), F1
	FMADDS  F31, F0, F1, F0
	FMOVS.P F0, 4(R0)
	SUBS    $1, R2, R2
	BNE     scalar

done:
	RET
