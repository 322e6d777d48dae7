//go:build !purego

#include "textflag.h"

#define BCASTF(bits, Z) \
	MOVL         bits, AX; \
	VPBROADCASTD AX, Z

// func swigluAVX512(dst, gate, up *float32, n int)
// swigluGeneric on 16 lanes, n a positive multiple of 16: every lane runs
// expNeg's and swigluGeneric's float32 operations in their order (no fused
// multiply-adds), so the results are the same bits.
TEXT ·swigluAVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), DX
	MOVQ n+24(FP), CX
	BCASTF($0x3fb8aa3b, Z31) // log2e
	BCASTF($0x3f317200, Z30) // ln2hi
	BCASTF($0x35bfbe8e, Z29) // ln2lo
	BCASTF($0x3f000000, Z28) // 1/2
	BCASTF($0x3e2aaaab, Z27) // 1/6
	BCASTF($0x3d2aaaab, Z26) // 1/24
	BCASTF($0x3c088889, Z25) // 1/120
	BCASTF($0x3ab60b61, Z24) // 1/720
	BCASTF($0xc2ae0000, Z23) // -87
	BCASTF($0x3f800000, Z22) // 1
	BCASTF($0x80000000, Z21) // sign bit
	BCASTF($127, Z20)
	VPXORD Z19, Z19, Z19

loop:
	VMOVUPS    (SI), Z0
	VCMPPS     $0x1D, Z19, Z0, K1 // g ≥ 0
	VMOVAPS    Z0, Z2
	VXORPS     Z21, Z0, K1, Z2    // x = −g there, g elsewhere
	VCMPPS     $0x11, Z23, Z2, K2 // x < −87: e^x = 0
	VMULPS     Z31, Z2, Z3
	VSUBPS     Z28, Z3, Z3
	VCVTTPS2DQ Z3, Z4
	VCVTDQ2PS  Z4, Z5             // k
	VMULPS     Z30, Z5, Z6
	VSUBPS     Z6, Z2, Z6
	VMULPS     Z29, Z5, Z7
	VSUBPS     Z7, Z6, Z6         // r = x − k·ln2hi − k·ln2lo
	VMULPS     Z24, Z6, Z7
	VADDPS     Z7, Z25, Z7
	VMULPS     Z7, Z6, Z7
	VADDPS     Z7, Z26, Z7
	VMULPS     Z7, Z6, Z7
	VADDPS     Z7, Z27, Z7
	VMULPS     Z7, Z6, Z7
	VADDPS     Z7, Z28, Z7
	VMULPS     Z7, Z6, Z7
	VADDPS     Z7, Z22, Z7
	VMULPS     Z7, Z6, Z7
	VADDPS     Z7, Z22, Z7        // p
	VCVTTPS2DQ Z5, Z8
	VPADDD     Z20, Z8, Z8
	VPSLLD     $23, Z8, Z8        // 2^k
	VMULPS     Z8, Z7, Z7
	VMOVAPS    Z19, K2, Z7        // e
	VADDPS     Z7, Z22, Z9        // 1 + e
	VMOVAPS    Z7, Z10
	VMOVAPS    Z22, K1, Z10       // 1 for g ≥ 0, e below
	VDIVPS     Z9, Z10, Z10       // σ
	VMULPS     Z10, Z0, Z10
	VMULPS     (DX), Z10, Z10
	VMOVUPS    Z10, (DI)
	ADDQ       $64, SI
	ADDQ       $64, DX
	ADDQ       $64, DI
	SUBQ       $16, CX
	JNZ        loop
	VZEROUPPER
	RET
