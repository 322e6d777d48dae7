//go:build !purego

#include "textflag.h"
#include "rows_amd64.h"

// AVX-512 versions of dot4AVX2, dot1AVX2 and axpy4AVX2: n is a multiple
// of 16; dot1 does exactly what one row of dot4 does.

// func dot4AVX512(q *float32, ldq int, k *float32, n int, out *float32)
TEXT ·dot4AVX512(SB), NOSPLIT, $0-40
	ROWS4(q+0(FP), ldq+8(FP))
	MOVQ   k+16(FP), SI
	MOVQ   n+24(FP), CX
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	VXORPS Z4, Z4, Z4
	VXORPS Z5, Z5, Z5
	VXORPS Z6, Z6, Z6
	VXORPS Z7, Z7, Z7

loop32:
	CMPQ        CX, $32
	JL          loop16
	VMOVUPS     (SI), Z8
	VMOVUPS     64(SI), Z9
	VFMADD231PS (DI), Z8, Z0
	VFMADD231PS 64(DI), Z9, Z4
	VFMADD231PS (R8), Z8, Z1
	VFMADD231PS 64(R8), Z9, Z5
	VFMADD231PS (R9), Z8, Z2
	VFMADD231PS 64(R9), Z9, Z6
	VFMADD231PS (R10), Z8, Z3
	VFMADD231PS 64(R10), Z9, Z7
	ADDQ        $128, SI
	ADDQ        $128, DI
	ADDQ        $128, R8
	ADDQ        $128, R9
	ADDQ        $128, R10
	SUBQ        $32, CX
	JMP         loop32

loop16:
	CMPQ        CX, $16
	JL          reduce
	VMOVUPS     (SI), Z8
	VFMADD231PS (DI), Z8, Z0
	VFMADD231PS (R8), Z8, Z1
	VFMADD231PS (R9), Z8, Z2
	VFMADD231PS (R10), Z8, Z3

reduce:
	MOVQ          out+32(FP), DX
	VADDPS        Z4, Z0, Z0
	VADDPS        Z5, Z1, Z1
	VADDPS        Z6, Z2, Z2
	VADDPS        Z7, Z3, Z3
	VEXTRACTF32X8 $1, Z0, Y8
	VADDPS        Y8, Y0, Y0
	VEXTRACTF128  $1, Y0, X8
	VADDPS        X8, X0, X0
	VHADDPS       X0, X0, X0
	VHADDPS       X0, X0, X0
	VMOVSS        X0, (DX)
	VEXTRACTF32X8 $1, Z1, Y8
	VADDPS        Y8, Y1, Y1
	VEXTRACTF128  $1, Y1, X8
	VADDPS        X8, X1, X1
	VHADDPS       X1, X1, X1
	VHADDPS       X1, X1, X1
	VMOVSS        X1, 4(DX)
	VEXTRACTF32X8 $1, Z2, Y8
	VADDPS        Y8, Y2, Y2
	VEXTRACTF128  $1, Y2, X8
	VADDPS        X8, X2, X2
	VHADDPS       X2, X2, X2
	VHADDPS       X2, X2, X2
	VMOVSS        X2, 8(DX)
	VEXTRACTF32X8 $1, Z3, Y8
	VADDPS        Y8, Y3, Y3
	VEXTRACTF128  $1, Y3, X8
	VADDPS        X8, X3, X3
	VHADDPS       X3, X3, X3
	VHADDPS       X3, X3, X3
	VMOVSS        X3, 12(DX)
	VZEROUPPER
	RET

// func dot1AVX512(q *float32, k *float32, n int) float32
TEXT ·dot1AVX512(SB), NOSPLIT, $0-28
	MOVQ   q+0(FP), DI
	MOVQ   k+8(FP), SI
	MOVQ   n+16(FP), CX
	VXORPS Z0, Z0, Z0
	VXORPS Z4, Z4, Z4

loop32:
	CMPQ        CX, $32
	JL          loop16
	VMOVUPS     (SI), Z8
	VMOVUPS     64(SI), Z9
	VFMADD231PS (DI), Z8, Z0
	VFMADD231PS 64(DI), Z9, Z4
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JMP         loop32

loop16:
	CMPQ        CX, $16
	JL          reduce
	VMOVUPS     (SI), Z8
	VFMADD231PS (DI), Z8, Z0

reduce:
	VADDPS        Z4, Z0, Z0
	VEXTRACTF32X8 $1, Z0, Y8
	VADDPS        Y8, Y0, Y0
	VEXTRACTF128  $1, Y0, X8
	VADDPS        X8, X0, X0
	VHADDPS       X0, X0, X0
	VHADDPS       X0, X0, X0
	VMOVSS        X0, ret+24(FP)
	VZEROUPPER
	RET

// func axpy4AVX512(o *float32, ldo int, e *float32, c *float32, n int)
TEXT ·axpy4AVX512(SB), NOSPLIT, $0-40
	ROWS4(o+0(FP), ldo+8(FP))
	MOVQ         e+16(FP), DX
	VBROADCASTSS (DX), Z0
	VBROADCASTSS 4(DX), Z1
	VBROADCASTSS 8(DX), Z2
	VBROADCASTSS 12(DX), Z3
	MOVQ         c+24(FP), SI
	MOVQ         n+32(FP), CX

loop:
	CMPQ        CX, $16
	JL          done
	VMOVUPS     (SI), Z8
	VMOVUPS     (DI), Z9
	VMOVUPS     (R8), Z10
	VMOVUPS     (R9), Z11
	VMOVUPS     (R10), Z12
	VFMADD231PS Z8, Z0, Z9
	VFMADD231PS Z8, Z1, Z10
	VFMADD231PS Z8, Z2, Z11
	VFMADD231PS Z8, Z3, Z12
	VMOVUPS     Z9, (DI)
	VMOVUPS     Z10, (R8)
	VMOVUPS     Z11, (R9)
	VMOVUPS     Z12, (R10)
	ADDQ        $64, SI
	ADDQ        $64, DI
	ADDQ        $64, R8
	ADDQ        $64, R9
	ADDQ        $64, R10
	SUBQ        $16, CX
	JMP         loop

done:
	VZEROUPPER
	RET

// func prefetchAVX(p *byte, n int)
// Issues PREFETCHT0 for every 64-byte line of p[:n].
TEXT ·prefetchAVX(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	ADDQ SI, CX

loop:
	CMPQ       SI, CX
	JAE        done
	PREFETCHT0 (SI)
	ADDQ       $64, SI
	JMP        loop

done:
	RET

// OROWS applies M(mem, reg) to 64 columns (at byte offset R13) of the four
// output rows DI, R8, R9, R10 and the registers Z0-Z15 that hold them;
// LOADZ and STOREZ move them in and out.
#define OROWS(M) \
	M(0(DI)(R13*1), Z0) \
	M(64(DI)(R13*1), Z1) \
	M(128(DI)(R13*1), Z2) \
	M(192(DI)(R13*1), Z3) \
	M(0(R8)(R13*1), Z4) \
	M(64(R8)(R13*1), Z5) \
	M(128(R8)(R13*1), Z6) \
	M(192(R8)(R13*1), Z7) \
	M(0(R9)(R13*1), Z8) \
	M(64(R9)(R13*1), Z9) \
	M(128(R9)(R13*1), Z10) \
	M(192(R9)(R13*1), Z11) \
	M(0(R10)(R13*1), Z12) \
	M(64(R10)(R13*1), Z13) \
	M(128(R10)(R13*1), Z14) \
	M(192(R10)(R13*1), Z15)

#define LOADZ(m, r) VMOVUPS m, r
#define STOREZ(m, r) VMOVUPS r, m

// func axpyKeys4AVX512(o *float32, ldo int, e *[4]float32, lat *float32, offs *int32, nk, n int)
//
// For each key i < nk, in order, adds e[i][j]·lat[offs[i]+d] to
// o[j·ldo+d] for the four rows j and d < n (a multiple of 64): what nk
// calls of axpy4AVX512 do, element by element the same fused multiply-adds
// in the same order, but 64 columns of the four rows stay in Z0-Z15 over
// all the keys, where axpy4 loads and stores them once per key (four
// stores per four multiply-adds bound it).
TEXT ·axpyKeys4AVX512(SB), NOSPLIT, $0-56
	ROWS4(o+0(FP), ldo+8(FP))
	MOVQ lat+24(FP), SI
	MOVQ n+48(FP), R12
	SHLQ $2, R12                   // columns in bytes
	XORQ R13, R13                  // column offset in bytes

cols:
	CMPQ    R13, R12
	JGE     kdone
	OROWS(LOADZ)
	MOVQ    e+16(FP), DX
	MOVQ    offs+32(FP), BX
	MOVQ    nk+40(FP), CX

keys:
	MOVLQSX      (BX), R11
	LEAQ         (SI)(R11*4), R11
	ADDQ         R13, R11
	VMOVUPS      (R11), Z16
	VMOVUPS      64(R11), Z17
	VMOVUPS      128(R11), Z18
	VMOVUPS      192(R11), Z19
	VBROADCASTSS (DX), Z20
	VBROADCASTSS 4(DX), Z21
	VBROADCASTSS 8(DX), Z22
	VBROADCASTSS 12(DX), Z23
	VFMADD231PS  Z16, Z20, Z0
	VFMADD231PS  Z17, Z20, Z1
	VFMADD231PS  Z18, Z20, Z2
	VFMADD231PS  Z19, Z20, Z3
	VFMADD231PS  Z16, Z21, Z4
	VFMADD231PS  Z17, Z21, Z5
	VFMADD231PS  Z18, Z21, Z6
	VFMADD231PS  Z19, Z21, Z7
	VFMADD231PS  Z16, Z22, Z8
	VFMADD231PS  Z17, Z22, Z9
	VFMADD231PS  Z18, Z22, Z10
	VFMADD231PS  Z19, Z22, Z11
	VFMADD231PS  Z16, Z23, Z12
	VFMADD231PS  Z17, Z23, Z13
	VFMADD231PS  Z18, Z23, Z14
	VFMADD231PS  Z19, Z23, Z15
	ADDQ         $16, DX
	ADDQ         $4, BX
	DECQ         CX
	JNZ          keys

	OROWS(STOREZ)
	ADDQ    $256, R13
	JMP     cols

kdone:
	VZEROUPPER
	RET

// func dot4x4AVX512(q *float32, ldq int, lat *float32, offs *int32, n int, out *[16]float32)
//
// out[4h+k] = Σ_d q[h·ldq+d]·lat[offs[k]+d] for four query rows h and
// four keys k, n a multiple of 16: each 16-column step loads the four
// query and four key vectors once for sixteen multiply-adds (dot4 loads
// five vectors for four). The sixteen sums end in one reduction tree
// (dot4x4Generic spells out its order).
TEXT ·dot4x4AVX512(SB), NOSPLIT, $0-48
	ROWS4(q+0(FP), ldq+8(FP))
	MOVQ    lat+16(FP), SI
	MOVQ    offs+24(FP), AX
	MOVLQSX 0(AX), R11
	MOVLQSX 4(AX), R12
	MOVLQSX 8(AX), R13
	MOVLQSX 12(AX), R14
	LEAQ    (SI)(R11*4), R11
	LEAQ    (SI)(R12*4), R12
	LEAQ    (SI)(R13*4), R13
	LEAQ    (SI)(R14*4), R14
	MOVQ    n+32(FP), CX
	SHLQ    $2, CX
	XORQ    BX, BX
	VXORPS  Z0, Z0, Z0
	VXORPS  Z1, Z1, Z1
	VXORPS  Z2, Z2, Z2
	VXORPS  Z3, Z3, Z3
	VXORPS  Z4, Z4, Z4
	VXORPS  Z5, Z5, Z5
	VXORPS  Z6, Z6, Z6
	VXORPS  Z7, Z7, Z7
	VXORPS  Z8, Z8, Z8
	VXORPS  Z9, Z9, Z9
	VXORPS  Z10, Z10, Z10
	VXORPS  Z11, Z11, Z11
	VXORPS  Z12, Z12, Z12
	VXORPS  Z13, Z13, Z13
	VXORPS  Z14, Z14, Z14
	VXORPS  Z15, Z15, Z15

loop:
	CMPQ        BX, CX
	JGE         reduce
	VMOVUPS     (DI)(BX*1), Z16
	VMOVUPS     (R8)(BX*1), Z17
	VMOVUPS     (R9)(BX*1), Z18
	VMOVUPS     (R10)(BX*1), Z19
	VMOVUPS     (R11)(BX*1), Z20
	VMOVUPS     (R12)(BX*1), Z21
	VMOVUPS     (R13)(BX*1), Z22
	VMOVUPS     (R14)(BX*1), Z23
	// Accumulator 4k+h: key k, query row h.
	VFMADD231PS Z16, Z20, Z0
	VFMADD231PS Z17, Z20, Z1
	VFMADD231PS Z18, Z20, Z2
	VFMADD231PS Z19, Z20, Z3
	VFMADD231PS Z16, Z21, Z4
	VFMADD231PS Z17, Z21, Z5
	VFMADD231PS Z18, Z21, Z6
	VFMADD231PS Z19, Z21, Z7
	VFMADD231PS Z16, Z22, Z8
	VFMADD231PS Z17, Z22, Z9
	VFMADD231PS Z18, Z22, Z10
	VFMADD231PS Z19, Z22, Z11
	VFMADD231PS Z16, Z23, Z12
	VFMADD231PS Z17, Z23, Z13
	VFMADD231PS Z18, Z23, Z14
	VFMADD231PS Z19, Z23, Z15
	ADDQ        $64, BX
	JMP         loop

reduce:
	// Level 1, pairs (a, b): [a.l0+a.l2, a.l1+a.l3, b.l0+b.l2, b.l1+b.l3]
	// in 128-bit lanes.
	VSHUFF32X4 $0x44, Z1, Z0, Z16
	VSHUFF32X4 $0xEE, Z1, Z0, Z17
	VADDPS     Z17, Z16, Z0
	VSHUFF32X4 $0x44, Z3, Z2, Z16
	VSHUFF32X4 $0xEE, Z3, Z2, Z17
	VADDPS     Z17, Z16, Z1
	VSHUFF32X4 $0x44, Z5, Z4, Z16
	VSHUFF32X4 $0xEE, Z5, Z4, Z17
	VADDPS     Z17, Z16, Z2
	VSHUFF32X4 $0x44, Z7, Z6, Z16
	VSHUFF32X4 $0xEE, Z7, Z6, Z17
	VADDPS     Z17, Z16, Z3
	VSHUFF32X4 $0x44, Z9, Z8, Z16
	VSHUFF32X4 $0xEE, Z9, Z8, Z17
	VADDPS     Z17, Z16, Z4
	VSHUFF32X4 $0x44, Z11, Z10, Z16
	VSHUFF32X4 $0xEE, Z11, Z10, Z17
	VADDPS     Z17, Z16, Z5
	VSHUFF32X4 $0x44, Z13, Z12, Z16
	VSHUFF32X4 $0xEE, Z13, Z12, Z17
	VADDPS     Z17, Z16, Z6
	VSHUFF32X4 $0x44, Z15, Z14, Z16
	VSHUFF32X4 $0xEE, Z15, Z14, Z17
	VADDPS     Z17, Z16, Z7
	// Level 2: lane L of the result holds accumulator 4m+L's four partial
	// sums.
	VSHUFF32X4 $0x88, Z1, Z0, Z16
	VSHUFF32X4 $0xDD, Z1, Z0, Z17
	VADDPS     Z17, Z16, Z0
	VSHUFF32X4 $0x88, Z3, Z2, Z16
	VSHUFF32X4 $0xDD, Z3, Z2, Z17
	VADDPS     Z17, Z16, Z1
	VSHUFF32X4 $0x88, Z5, Z4, Z16
	VSHUFF32X4 $0xDD, Z5, Z4, Z17
	VADDPS     Z17, Z16, Z2
	VSHUFF32X4 $0x88, Z7, Z6, Z16
	VSHUFF32X4 $0xDD, Z7, Z6, Z17
	VADDPS     Z17, Z16, Z3
	// Levels 3 and 4, within the lanes: element 4L+j ends with the sum of
	// accumulator 4j+L, which is out[4h+k] for h = L, k = j.
	VSHUFPS $0x44, Z1, Z0, Z16
	VSHUFPS $0xEE, Z1, Z0, Z17
	VADDPS  Z17, Z16, Z0
	VSHUFPS $0x44, Z3, Z2, Z16
	VSHUFPS $0xEE, Z3, Z2, Z17
	VADDPS  Z17, Z16, Z1
	VSHUFPS $0x88, Z1, Z0, Z16
	VSHUFPS $0xDD, Z1, Z0, Z17
	VADDPS  Z17, Z16, Z0
	MOVQ    out+40(FP), DX
	VMOVUPS Z0, (DX)
	VZEROUPPER
	RET
