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

// swigluAVX2's constants, eight lanes each.
#define CONST8(name, bits) \
	DATA name<>+0(SB)/4, bits; \
	DATA name<>+4(SB)/4, bits; \
	DATA name<>+8(SB)/4, bits; \
	DATA name<>+12(SB)/4, bits; \
	DATA name<>+16(SB)/4, bits; \
	DATA name<>+20(SB)/4, bits; \
	DATA name<>+24(SB)/4, bits; \
	DATA name<>+28(SB)/4, bits; \
	GLOBL name<>(SB), RODATA|NOPTR, $32

CONST8(sgLog2e, $0x3fb8aa3b)
CONST8(sgLn2hi, $0x3f317200)
CONST8(sgLn2lo, $0x35bfbe8e)
CONST8(sgHalf, $0x3f000000)
CONST8(sgSixth, $0x3e2aaaab)
CONST8(sg24th, $0x3d2aaaab)
CONST8(sg120th, $0x3c088889)
CONST8(sg720th, $0x3ab60b61)
CONST8(sgMin, $0xc2ae0000)
CONST8(sgOne, $0x3f800000)
CONST8(sgSign, $0x80000000)
CONST8(sgBias, $127)

// func swigluAVX2(dst, gate, up *float32, n int)
// swigluAVX512 on 8 lanes, n a positive multiple of 8, with blends where
// that one has masks: the same float32 operations in the same order, so
// the same bits as swigluGeneric.
TEXT ·swigluAVX2(SB), NOSPLIT, $0-32
	MOVQ    dst+0(FP), DI
	MOVQ    gate+8(FP), SI
	MOVQ    up+16(FP), DX
	MOVQ    n+24(FP), CX
	VMOVUPS sgOne<>(SB), Y15
	VMOVUPS sgHalf<>(SB), Y14
	VMOVUPS sgSign<>(SB), Y13
	VMOVUPS sgMin<>(SB), Y12
	VPXOR   Y11, Y11, Y11

loop2:
	VMOVUPS    (SI), Y0
	VCMPPS     $0x1D, Y11, Y0, Y1 // g ≥ 0
	VANDPS     Y13, Y1, Y2
	VXORPS     Y2, Y0, Y2         // x = −g there, g elsewhere
	VCMPPS     $0x11, Y12, Y2, Y9 // x < −87: e^x = 0
	VMULPS     sgLog2e<>(SB), Y2, Y3
	VSUBPS     Y14, Y3, Y3
	VCVTTPS2DQ Y3, Y4
	VCVTDQ2PS  Y4, Y5             // k
	VMULPS     sgLn2hi<>(SB), Y5, Y6
	VSUBPS     Y6, Y2, Y6
	VMULPS     sgLn2lo<>(SB), Y5, Y7
	VSUBPS     Y7, Y6, Y6         // r = x − k·ln2hi − k·ln2lo
	VMULPS     sg720th<>(SB), Y6, Y7
	VADDPS     sg120th<>(SB), Y7, Y7
	VMULPS     Y7, Y6, Y7
	VADDPS     sg24th<>(SB), Y7, Y7
	VMULPS     Y7, Y6, Y7
	VADDPS     sgSixth<>(SB), Y7, Y7
	VMULPS     Y7, Y6, Y7
	VADDPS     Y14, Y7, Y7
	VMULPS     Y7, Y6, Y7
	VADDPS     Y15, Y7, Y7
	VMULPS     Y7, Y6, Y7
	VADDPS     Y15, Y7, Y7        // p
	VCVTTPS2DQ Y5, Y8
	VPADDD     sgBias<>(SB), Y8, Y8
	VPSLLD     $23, Y8, Y8        // 2^k
	VMULPS     Y8, Y7, Y7
	VANDNPS    Y7, Y9, Y7         // e
	VADDPS     Y15, Y7, Y10       // 1 + e
	VBLENDVPS  Y1, Y15, Y7, Y7    // 1 for g ≥ 0, e below
	VDIVPS     Y10, Y7, Y7        // σ
	VMULPS     Y7, Y0, Y7
	VMULPS     (DX), Y7, Y7
	VMOVUPS    Y7, (DI)
	ADDQ       $32, SI
	ADDQ       $32, DX
	ADDQ       $32, DI
	SUBQ       $8, CX
	JNZ        loop2
	VZEROUPPER
	RET
