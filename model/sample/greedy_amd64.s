//go:build !purego

#include "textflag.h"

// func maxCheckAVX2(x *float32, n int) (m float32, bad bool)
//
// n is a positive multiple of 32. Four accumulators of eight lanes keep
// the maxima independent; a lane holding NaN or +Inf (!(v <= MaxFloat32),
// compare predicate NLE_UQ) sets bad, and m is then meaningless.
TEXT ·maxCheckAVX2(SB), NOSPLIT, $0-21
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	SHRQ $5, CX
	MOVL $0x7f7fffff, AX
	VMOVD AX, X8
	VBROADCASTSS X8, Y8           // MaxFloat32
	MOVL $0xff800000, AX
	VMOVD AX, X0
	VBROADCASTSS X0, Y0           // -Inf
	VMOVAPS Y0, Y1
	VMOVAPS Y0, Y2
	VMOVAPS Y0, Y3
	VXORPS Y9, Y9, Y9             // bad lanes

loop:
	VMOVUPS (SI), Y4
	VMOVUPS 32(SI), Y5
	VMOVUPS 64(SI), Y6
	VMOVUPS 96(SI), Y7
	VMAXPS Y4, Y0, Y0
	VMAXPS Y5, Y1, Y1
	VMAXPS Y6, Y2, Y2
	VMAXPS Y7, Y3, Y3
	VCMPPS $6, Y8, Y4, Y4         // NLE_UQ: !(v <= MaxFloat32)
	VCMPPS $6, Y8, Y5, Y5
	VCMPPS $6, Y8, Y6, Y6
	VCMPPS $6, Y8, Y7, Y7
	VORPS Y4, Y5, Y5
	VORPS Y6, Y7, Y7
	VORPS Y5, Y9, Y9
	VORPS Y7, Y9, Y9
	ADDQ $128, SI
	DECQ CX
	JNZ loop

	VMAXPS Y1, Y0, Y0
	VMAXPS Y3, Y2, Y2
	VMAXPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS X1, X0, X0
	VMOVHLPS X0, X0, X1
	VMAXPS X1, X0, X0
	VMOVSHDUP X0, X1
	VMAXSS X1, X0, X0
	VMOVSS X0, m+16(FP)
	VMOVMSKPS Y9, AX
	TESTL AX, AX
	SETNE bad+20(FP)
	VZEROUPPER
	RET

// func indexAVX2(x *float32, n int, v float32) int
//
// indexAVX2 returns the index of the first of the n values at x equal to
// v, or n; n is a multiple of 32.
TEXT ·indexAVX2(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS v+16(FP), Y8
	XORQ DX, DX

iloop:
	CMPQ DX, CX
	JGE  inone
	VCMPPS $0, (SI)(DX*4), Y8, Y4 // EQ_OQ
	VCMPPS $0, 32(SI)(DX*4), Y8, Y5
	VCMPPS $0, 64(SI)(DX*4), Y8, Y6
	VCMPPS $0, 96(SI)(DX*4), Y8, Y7
	VORPS Y4, Y5, Y0
	VORPS Y6, Y7, Y1
	VORPS Y0, Y1, Y0
	VMOVMSKPS Y0, AX
	TESTL AX, AX
	JNZ ifound
	ADDQ $32, DX
	JMP iloop

ifound:
	VMOVMSKPS Y4, AX
	VMOVMSKPS Y5, BX
	SHLL $8, BX
	ORL BX, AX
	VMOVMSKPS Y6, BX
	SHLL $16, BX
	ORL BX, AX
	VMOVMSKPS Y7, BX
	SHLL $24, BX
	ORL BX, AX
	BSFL AX, AX
	ADDQ AX, DX

inone:
	MOVQ DX, ret+24(FP)
	VZEROUPPER
	RET
