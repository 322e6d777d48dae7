//go:build !purego

#include "textflag.h"
#include "rows_amd64.h"

// func mulRows4AVX2(out *float32, ldo int, a *float32, lda int, b *float32, ldb, kr, ncols int)
// out[j·ldo + c] = Σ_{r<kr} a[j·lda + r]·b[r·ldb + c] for j < 4, c < ncols
// (a multiple of 16; kr > 0). Sixteen columns at a time: the four rows'
// sums in Y0-Y7 (two vectors a row), b's two vectors of row r loaded
// once for the four rows' broadcast a values.
TEXT ·mulRows4AVX2(SB), NOSPLIT, $0-64
	ROWS4(a+16(FP), lda+24(FP))
	MOVQ out+0(FP), R11
	MOVQ ldo+8(FP), R12
	SHLQ $2, R12                   // output row stride in bytes
	LEAQ (R11)(R12*2), R13         // output row 2
	MOVQ b+32(FP), R14
	MOVQ ldb+40(FP), R15
	SHLQ $2, R15                   // b row stride in bytes
	MOVQ ncols+56(FP), DX
	SHLQ $2, DX                    // columns in bytes
	XORQ BX, BX                    // column offset in bytes

cols:
	CMPQ   BX, DX
	JGE    done
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	LEAQ   (R14)(BX*1), SI         // b[0][col]
	XORQ   AX, AX                  // r in bytes
	MOVQ   kr+48(FP), CX

rows:
	VMOVUPS      (SI), Y8
	VMOVUPS      32(SI), Y9
	VBROADCASTSS (DI)(AX*1), Y10
	VBROADCASTSS (R8)(AX*1), Y11
	VBROADCASTSS (R9)(AX*1), Y12
	VBROADCASTSS (R10)(AX*1), Y13
	VFMADD231PS  Y8, Y10, Y0
	VFMADD231PS  Y9, Y10, Y1
	VFMADD231PS  Y8, Y11, Y2
	VFMADD231PS  Y9, Y11, Y3
	VFMADD231PS  Y8, Y12, Y4
	VFMADD231PS  Y9, Y12, Y5
	VFMADD231PS  Y8, Y13, Y6
	VFMADD231PS  Y9, Y13, Y7
	ADDQ         R15, SI
	ADDQ         $4, AX
	DECQ         CX
	JNZ          rows

	VMOVUPS Y0, (R11)(BX*1)
	VMOVUPS Y1, 32(R11)(BX*1)
	LEAQ    (R11)(R12*1), SI
	VMOVUPS Y2, (SI)(BX*1)
	VMOVUPS Y3, 32(SI)(BX*1)
	VMOVUPS Y4, (R13)(BX*1)
	VMOVUPS Y5, 32(R13)(BX*1)
	LEAQ    (R13)(R12*1), SI
	VMOVUPS Y6, (SI)(BX*1)
	VMOVUPS Y7, 32(SI)(BX*1)
	ADDQ    $64, BX
	JMP     cols

done:
	VZEROUPPER
	RET
