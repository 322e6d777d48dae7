//go:build !purego

#include "textflag.h"

// func expTile4AVX2(sc *[4]float32, m *[4]float32, c *expNegConsts, pairs int)
// sc[i][j] = expNeg(sc[i][j] − m[j]) for i < 2·pairs, two keys (eight
// scores) a step: expNeg's operations in its order (separate multiplies
// and adds, as Go compiles it on amd64), so the results are its bits.
// c holds its constants (expNegConsts) at 32·i.
TEXT ·expTile4AVX2(SB), NOSPLIT, $0-32
	MOVQ           sc+0(FP), DI
	MOVQ           m+8(FP), SI
	MOVQ           c+16(FP), DX
	MOVQ           pairs+24(FP), CX
	VBROADCASTF128 (SI), Y15       // m0 m1 m2 m3 m0 m1 m2 m3

loop:
	VMOVUPS    (DI), Y0
	VSUBPS     Y15, Y0, Y0         // x
	VMULPS     0(DX), Y0, Y1       // x·log2e
	VSUBPS     32(DX), Y1, Y1      // − 0.5
	VCVTTPS2DQ Y1, Y1              // k (int32, truncated)
	VCVTDQ2PS  Y1, Y2              // k (float)
	VMULPS     64(DX), Y2, Y3      // k·ln2hi
	VSUBPS     Y3, Y0, Y3          // x − k·ln2hi
	VMULPS     96(DX), Y2, Y2      // k·ln2lo
	VSUBPS     Y2, Y3, Y3          // r
	VMULPS     288(DX), Y3, Y2     // r/720
	VADDPS     256(DX), Y2, Y2     // 1/120 + …
	VMULPS     Y3, Y2, Y2
	VADDPS     224(DX), Y2, Y2     // 1/24 + …
	VMULPS     Y3, Y2, Y2
	VADDPS     192(DX), Y2, Y2     // 1/6 + …
	VMULPS     Y3, Y2, Y2
	VADDPS     160(DX), Y2, Y2     // 1/2 + …
	VMULPS     Y3, Y2, Y2
	VADDPS     128(DX), Y2, Y2     // 1 + …
	VMULPS     Y3, Y2, Y2
	VADDPS     128(DX), Y2, Y2     // p = 1 + …
	VPADDD     352(DX), Y1, Y1     // k + 127
	VPSLLD     $23, Y1, Y1         // 2^k
	VMULPS     Y1, Y2, Y2
	VCMPPS     $5, 320(DX), Y0, Y3 // x not below −87 (NaN too)
	VANDPS     Y3, Y2, Y2
	VMOVUPS    Y2, (DI)
	ADDQ       $32, DI
	DECQ       CX
	JNZ        loop
	VZEROUPPER
	RET
