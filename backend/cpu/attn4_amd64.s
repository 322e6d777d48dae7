//go:build !purego

#include "textflag.h"
#include "rows_amd64.h"

// func dot4AVX2(q *float32, ldq int, k *float32, n int, out *float32)
// out[j] = Σ_{i<n} q[j·ldq + i]·k[i] for j < 4; n is a multiple of 8.
TEXT ·dot4AVX2(SB), NOSPLIT, $0-40
	ROWS4(q+0(FP), ldq+8(FP))
	MOVQ   k+16(FP), SI
	MOVQ   n+24(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

loop16:
	CMPQ        CX, $16
	JL          loop8
	VMOVUPS     (SI), Y8
	VMOVUPS     32(SI), Y9
	VFMADD231PS (DI), Y8, Y0
	VFMADD231PS 32(DI), Y9, Y4
	VFMADD231PS (R8), Y8, Y1
	VFMADD231PS 32(R8), Y9, Y5
	VFMADD231PS (R9), Y8, Y2
	VFMADD231PS 32(R9), Y9, Y6
	VFMADD231PS (R10), Y8, Y3
	VFMADD231PS 32(R10), Y9, Y7
	ADDQ        $64, SI
	ADDQ        $64, DI
	ADDQ        $64, R8
	ADDQ        $64, R9
	ADDQ        $64, R10
	SUBQ        $16, CX
	JMP         loop16

loop8:
	CMPQ        CX, $8
	JL          reduce
	VMOVUPS     (SI), Y8
	VFMADD231PS (DI), Y8, Y0
	VFMADD231PS (R8), Y8, Y1
	VFMADD231PS (R9), Y8, Y2
	VFMADD231PS (R10), Y8, Y3

reduce:
	MOVQ         out+32(FP), DX
	VADDPS       Y4, Y0, Y0
	VADDPS       Y5, Y1, Y1
	VADDPS       Y6, Y2, Y2
	VADDPS       Y7, Y3, Y3
	VEXTRACTF128 $1, Y0, X8
	VADDPS       X8, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VMOVSS       X0, (DX)
	VEXTRACTF128 $1, Y1, X8
	VADDPS       X8, X1, X1
	VHADDPS      X1, X1, X1
	VHADDPS      X1, X1, X1
	VMOVSS       X1, 4(DX)
	VEXTRACTF128 $1, Y2, X8
	VADDPS       X8, X2, X2
	VHADDPS      X2, X2, X2
	VHADDPS      X2, X2, X2
	VMOVSS       X2, 8(DX)
	VEXTRACTF128 $1, Y3, X8
	VADDPS       X8, X3, X3
	VHADDPS      X3, X3, X3
	VHADDPS      X3, X3, X3
	VMOVSS       X3, 12(DX)
	VZEROUPPER
	RET

// func axpy4AVX2(o *float32, ldo int, e *float32, c *float32, n int)
// o[j·ldo + i] += e[j]·c[i] for j < 4, i < n; n is a multiple of 8.
TEXT ·axpy4AVX2(SB), NOSPLIT, $0-40
	ROWS4(o+0(FP), ldo+8(FP))
	MOVQ         e+16(FP), DX
	VBROADCASTSS (DX), Y0
	VBROADCASTSS 4(DX), Y1
	VBROADCASTSS 8(DX), Y2
	VBROADCASTSS 12(DX), Y3
	MOVQ         c+24(FP), SI
	MOVQ         n+32(FP), CX

loop:
	CMPQ        CX, $8
	JL          done
	VMOVUPS     (SI), Y8
	VMOVUPS     (DI), Y9
	VMOVUPS     (R8), Y10
	VMOVUPS     (R9), Y11
	VMOVUPS     (R10), Y12
	VFMADD231PS Y8, Y0, Y9
	VFMADD231PS Y8, Y1, Y10
	VFMADD231PS Y8, Y2, Y11
	VFMADD231PS Y8, Y3, Y12
	VMOVUPS     Y9, (DI)
	VMOVUPS     Y10, (R8)
	VMOVUPS     Y11, (R9)
	VMOVUPS     Y12, (R10)
	ADDQ        $32, SI
	ADDQ        $32, DI
	ADDQ        $32, R8
	ADDQ        $32, R9
	ADDQ        $32, R10
	SUBQ        $8, CX
	JMP         loop

done:
	VZEROUPPER
	RET

// func dot1AVX2(q *float32, k *float32, n int) float32
// Σ_{i<n} q[i]·k[i], n a multiple of 8, with exactly the operations of one
// row of dot4AVX2 (so that one query and four give the same scores).
TEXT ·dot1AVX2(SB), NOSPLIT, $0-28
	MOVQ   q+0(FP), DI
	MOVQ   k+8(FP), SI
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y4, Y4, Y4

loop16:
	CMPQ        CX, $16
	JL          loop8
	VMOVUPS     (SI), Y8
	VMOVUPS     32(SI), Y9
	VFMADD231PS (DI), Y8, Y0
	VFMADD231PS 32(DI), Y9, Y4
	ADDQ        $64, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	JMP         loop16

loop8:
	CMPQ        CX, $8
	JL          reduce
	VMOVUPS     (SI), Y8
	VFMADD231PS (DI), Y8, Y0

reduce:
	VADDPS       Y4, Y0, Y0
	VEXTRACTF128 $1, Y0, X8
	VADDPS       X8, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VMOVSS       X0, ret+24(FP)
	VZEROUPPER
	RET

// func axpyKeys4AVX2(o *float32, ldo int, e *[4]float32, lat *float32, offs *int32, nk, n int)
//
// For each key i < nk, in order, adds e[i][j]·lat[offs[i]+d] to
// o[j·ldo+d] for the four rows j and d < n (a multiple of 16): what nk
// calls of axpy4AVX2 do, element by element the same fused multiply-adds
// in the same order, with 16 columns of the four rows in Y0-Y7 over all
// the keys instead of a load and a store of them per key.
TEXT ·axpyKeys4AVX2(SB), NOSPLIT, $0-56
	ROWS4(o+0(FP), ldo+8(FP))
	MOVQ lat+24(FP), SI
	MOVQ n+48(FP), R12
	SHLQ $2, R12                   // columns in bytes
	XORQ R13, R13                  // column offset in bytes

cols:
	CMPQ    R13, R12
	JGE     done
	VMOVUPS (DI)(R13*1), Y0
	VMOVUPS 32(DI)(R13*1), Y1
	VMOVUPS (R8)(R13*1), Y2
	VMOVUPS 32(R8)(R13*1), Y3
	VMOVUPS (R9)(R13*1), Y4
	VMOVUPS 32(R9)(R13*1), Y5
	VMOVUPS (R10)(R13*1), Y6
	VMOVUPS 32(R10)(R13*1), Y7
	MOVQ    e+16(FP), DX
	MOVQ    offs+32(FP), BX
	MOVQ    nk+40(FP), CX

keys:
	MOVLQSX      (BX), R11
	LEAQ         (SI)(R11*4), R11
	ADDQ         R13, R11
	VMOVUPS      (R11), Y8
	VMOVUPS      32(R11), Y9
	VBROADCASTSS (DX), Y10
	VBROADCASTSS 4(DX), Y11
	VBROADCASTSS 8(DX), Y12
	VBROADCASTSS 12(DX), Y13
	VFMADD231PS  Y8, Y10, Y0
	VFMADD231PS  Y9, Y10, Y1
	VFMADD231PS  Y8, Y11, Y2
	VFMADD231PS  Y9, Y11, Y3
	VFMADD231PS  Y8, Y12, Y4
	VFMADD231PS  Y9, Y12, Y5
	VFMADD231PS  Y8, Y13, Y6
	VFMADD231PS  Y9, Y13, Y7
	ADDQ         $16, DX
	ADDQ         $4, BX
	DECQ         CX
	JNZ          keys

	VMOVUPS Y0, (DI)(R13*1)
	VMOVUPS Y1, 32(DI)(R13*1)
	VMOVUPS Y2, (R8)(R13*1)
	VMOVUPS Y3, 32(R8)(R13*1)
	VMOVUPS Y4, (R9)(R13*1)
	VMOVUPS Y5, 32(R9)(R13*1)
	VMOVUPS Y6, (R10)(R13*1)
	VMOVUPS Y7, 32(R10)(R13*1)
	ADDQ    $64, R13
	JMP     cols

done:
	VZEROUPPER
	RET
