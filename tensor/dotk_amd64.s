//go:build !purego

#include "textflag.h"
#include "dot_amd64.h"

// AVX2 dot products of 256-element K-quant blocks (Q4_K, Q5_K, Q6_K,
// IQ4_XS) with Q8_K activations. The integer sums are exact: weights are
// decoded to unsigned bytes, multiplied with the activation bytes by
// VPMADDUBSW and weighted by the sub-block scales with VPMADDWD; the mins of
// Q4_K/Q5_K and the offset −32 of Q6_K enter through the activation's bsums.
// Each block's int32 lanes are then scaled by d·dy and accumulated with FMA.
// IQ4_XS instead reduces each 32-element sub-block to one integer and forms
// the scaled sub-block sums exactly as the pure-Go twin does, so only the
// order of the final additions differs.

DATA dotShufK4<>+0(SB)/8, $0x0100010001000100
DATA dotShufK4<>+8(SB)/8, $0x0100010001000100
DATA dotShufK4<>+16(SB)/8, $0x0100010001000100
DATA dotShufK4<>+24(SB)/8, $0x0100010001000100
DATA dotShufK4<>+32(SB)/8, $0x0302030203020302
DATA dotShufK4<>+40(SB)/8, $0x0302030203020302
DATA dotShufK4<>+48(SB)/8, $0x0302030203020302
DATA dotShufK4<>+56(SB)/8, $0x0302030203020302
DATA dotShufK4<>+64(SB)/8, $0x0504050405040504
DATA dotShufK4<>+72(SB)/8, $0x0504050405040504
DATA dotShufK4<>+80(SB)/8, $0x0504050405040504
DATA dotShufK4<>+88(SB)/8, $0x0504050405040504
DATA dotShufK4<>+96(SB)/8, $0x0706070607060706
DATA dotShufK4<>+104(SB)/8, $0x0706070607060706
DATA dotShufK4<>+112(SB)/8, $0x0706070607060706
DATA dotShufK4<>+120(SB)/8, $0x0706070607060706
DATA dotShufK4<>+128(SB)/8, $0x0908090809080908
DATA dotShufK4<>+136(SB)/8, $0x0908090809080908
DATA dotShufK4<>+144(SB)/8, $0x0908090809080908
DATA dotShufK4<>+152(SB)/8, $0x0908090809080908
DATA dotShufK4<>+160(SB)/8, $0x0B0A0B0A0B0A0B0A
DATA dotShufK4<>+168(SB)/8, $0x0B0A0B0A0B0A0B0A
DATA dotShufK4<>+176(SB)/8, $0x0B0A0B0A0B0A0B0A
DATA dotShufK4<>+184(SB)/8, $0x0B0A0B0A0B0A0B0A
DATA dotShufK4<>+192(SB)/8, $0x0D0C0D0C0D0C0D0C
DATA dotShufK4<>+200(SB)/8, $0x0D0C0D0C0D0C0D0C
DATA dotShufK4<>+208(SB)/8, $0x0D0C0D0C0D0C0D0C
DATA dotShufK4<>+216(SB)/8, $0x0D0C0D0C0D0C0D0C
DATA dotShufK4<>+224(SB)/8, $0x0F0E0F0E0F0E0F0E
DATA dotShufK4<>+232(SB)/8, $0x0F0E0F0E0F0E0F0E
DATA dotShufK4<>+240(SB)/8, $0x0F0E0F0E0F0E0F0E
DATA dotShufK4<>+248(SB)/8, $0x0F0E0F0E0F0E0F0E
GLOBL dotShufK4<>(SB), RODATA|NOPTR, $256
DATA dotShufQ6<>+0(SB)/8, $0x0100010001000100
DATA dotShufQ6<>+8(SB)/8, $0x0100010001000100
DATA dotShufQ6<>+16(SB)/8, $0x0302030203020302
DATA dotShufQ6<>+24(SB)/8, $0x0302030203020302
DATA dotShufQ6<>+32(SB)/8, $0x0504050405040504
DATA dotShufQ6<>+40(SB)/8, $0x0504050405040504
DATA dotShufQ6<>+48(SB)/8, $0x0706070607060706
DATA dotShufQ6<>+56(SB)/8, $0x0706070607060706
DATA dotShufQ6<>+64(SB)/8, $0x0908090809080908
DATA dotShufQ6<>+72(SB)/8, $0x0908090809080908
DATA dotShufQ6<>+80(SB)/8, $0x0B0A0B0A0B0A0B0A
DATA dotShufQ6<>+88(SB)/8, $0x0B0A0B0A0B0A0B0A
DATA dotShufQ6<>+96(SB)/8, $0x0D0C0D0C0D0C0D0C
DATA dotShufQ6<>+104(SB)/8, $0x0D0C0D0C0D0C0D0C
DATA dotShufQ6<>+112(SB)/8, $0x0F0E0F0E0F0E0F0E
DATA dotShufQ6<>+120(SB)/8, $0x0F0E0F0E0F0E0F0E
GLOBL dotShufQ6<>(SB), RODATA|NOPTR, $128
DATA dotShiftXS<>+0(SB)/8, $0x0000000400000000
DATA dotShiftXS<>+8(SB)/8, $0x0000000C00000008
DATA dotShiftXS<>+16(SB)/8, $0x0000001400000010
DATA dotShiftXS<>+24(SB)/8, $0x0000001C00000018
DATA dotShiftXS<>+32(SB)/8, $0x0000000200000000
DATA dotShiftXS<>+40(SB)/8, $0x0000000600000004
DATA dotShiftXS<>+48(SB)/8, $0x0000000A00000008
DATA dotShiftXS<>+56(SB)/8, $0x0000000E0000000C
GLOBL dotShiftXS<>(SB), RODATA|NOPTR, $64

DATA dotIQ4XSTable<>+0(SB)/8, $0xF6EADDCFBFAD9881
DATA dotIQ4XSTable<>+8(SB)/8, $0x7159453526190D01
DATA dotIQ4XSTable<>+16(SB)/8, $0xF6EADDCFBFAD9881
DATA dotIQ4XSTable<>+24(SB)/8, $0x7159453526190D01
GLOBL dotIQ4XSTable<>(SB), RODATA|NOPTR, $32

DATA dotXS32<>+0(SB)/8, $0x0000002000000020
DATA dotXS32<>+8(SB)/8, $0x0000002000000020
DATA dotXS32<>+16(SB)/8, $0x0000002000000020
DATA dotXS32<>+24(SB)/8, $0x0000002000000020
GLOBL dotXS32<>(SB), RODATA|NOPTR, $32

// SCALESK4 unpacks the 6-bit scales and mins of the Q4_K/Q5_K block at SI:
// Y8 = eight int16 scales in both 128-bit lanes, X9 = eight int16 mins.
// Clobbers AX, BX, DX, R8-R10.
#define SCALESK4 \
	UNPACKK4(SI, R8, R9, AX, BX, DX, R10); \
	VMOVQ R8, X8; \
	VPMOVZXBW X8, X8; \
	VINSERTI128 $1, X8, Y8, Y8; \
	VMOVQ R9, X9; \
	VPMOVZXBW X9, X9

// MINSK4 adds dmin·dy · Σ m_j·(bsums[2j]+bsums[2j+1]) to X1 (four lanes) and
// leaves d·dy broadcast in Y4. Clobbers X5, X6.
#define MINSK4 \
	VMOVDQU 260(DI), X6; \
	VPHADDW 276(DI), X6, X6; \
	VPMADDWD X9, X6, X6; \
	VCVTDQ2PS X6, X6; \
	VMOVD 0(SI), X4; \
	VCVTPH2PS X4, X4; \
	VBROADCASTSS 0(DI), X5; \
	VMULPS X5, X4, X4; \
	VMOVSHDUP X4, X5; \
	VBROADCASTSS X5, X5; \
	VFMADD231PS X5, X6, X1; \
	VBROADCASTSS X4, Y4

// NIBK4 loads 32 bytes of quants at qmem: low nibbles to Y2, high to Y3.
#define NIBK4(qmem) \
	VMOVDQU qmem, Y2; \
	VPSRLW $4, Y2, Y3; \
	VPAND Y14, Y2, Y2; \
	VPAND Y14, Y3, Y3

// HIQ5K ors the next two bits of qh (Y10, consumed bit by bit) into Y2 and
// Y3 as bit 4.
#define HIQ5K \
	VPAND Y13, Y10, Y5; \
	VPSLLW $4, Y5, Y5; \
	VPOR Y5, Y2, Y2; \
	VPSRLW $1, Y10, Y10; \
	VPAND Y13, Y10, Y5; \
	VPSLLW $4, Y5, Y5; \
	VPOR Y5, Y3, Y3; \
	VPSRLW $1, Y10, Y10

// ACCK4 multiplies the unsigned weights in Y2 and Y3 with the activations
// at ylo and yhi, weights them by the scales of sub-blocks 2c and 2c+1
// (shuffle masks slo, shi on Y8) and adds them to Y7.
#define ACCK4(ylo, yhi, slo, shi) \
	VPMADDUBSW ylo, Y2, Y2; \
	VPMADDUBSW yhi, Y3, Y3; \
	VPSHUFB slo, Y8, Y5; \
	VPMADDWD Y5, Y2, Y2; \
	VPSHUFB shi, Y8, Y6; \
	VPMADDWD Y6, Y3, Y3; \
	VPADDD Y2, Y7, Y7; \
	VPADDD Y3, Y7, Y7

// KEND stores hsum(Y0) − hsum(X1) as the result.
#define KEND \
	KSUB; \
	VMOVSS X0, ret+24(FP); \
	VZEROUPPER; \
	RET

// func dotQ4KQ8KAVX2(x, y *byte, nb int) float32
TEXT ·dotQ4KQ8KAVX2(SB), NOSPLIT, $0-28
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ nb+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	BCAST8($0x0F0F0F0F, X14, Y14)

q4kloop:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	PREFETCHT0 (DOTPF+128)(SI)
	SCALESK4
	MINSK4
	VPXOR Y7, Y7, Y7
	NIBK4(16(SI))
	ACCK4(4(DI), 36(DI), dotShufK4<>+0(SB), dotShufK4<>+32(SB))
	NIBK4(48(SI))
	ACCK4(68(DI), 100(DI), dotShufK4<>+64(SB), dotShufK4<>+96(SB))
	NIBK4(80(SI))
	ACCK4(132(DI), 164(DI), dotShufK4<>+128(SB), dotShufK4<>+160(SB))
	NIBK4(112(SI))
	ACCK4(196(DI), 228(DI), dotShufK4<>+192(SB), dotShufK4<>+224(SB))
	VCVTDQ2PS   Y7, Y7
	VFMADD231PS Y4, Y7, Y0
	ADDQ        $144, SI
	ADDQ        $292, DI
	DECQ        CX
	JNZ         q4kloop
	KEND

// func dotQ5KQ8KAVX2(x, y *byte, nb int) float32
TEXT ·dotQ5KQ8KAVX2(SB), NOSPLIT, $0-28
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ nb+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	BCAST8($0x0F0F0F0F, X14, Y14)
	BCAST8($0x01010101, X13, Y13)

q5kloop:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	PREFETCHT0 (DOTPF+128)(SI)
	SCALESK4
	MINSK4
	VPXOR   Y7, Y7, Y7
	VMOVDQU 16(SI), Y10
	NIBK4(48(SI))
	HIQ5K
	ACCK4(4(DI), 36(DI), dotShufK4<>+0(SB), dotShufK4<>+32(SB))
	NIBK4(80(SI))
	HIQ5K
	ACCK4(68(DI), 100(DI), dotShufK4<>+64(SB), dotShufK4<>+96(SB))
	NIBK4(112(SI))
	HIQ5K
	ACCK4(132(DI), 164(DI), dotShufK4<>+128(SB), dotShufK4<>+160(SB))
	NIBK4(144(SI))
	HIQ5K
	ACCK4(196(DI), 228(DI), dotShufK4<>+192(SB), dotShufK4<>+224(SB))
	VCVTDQ2PS   Y7, Y7
	VFMADD231PS Y4, Y7, Y0
	ADDQ        $176, SI
	ADDQ        $292, DI
	DECQ        CX
	JNZ         q5kloop
	KEND

// ACCQ6 multiplies the unsigned 6-bit weights in Y4 with the activations at
// ymem, weights them by the scale pair selected by mask smem on Y9 and adds
// them to Y7.
#define ACCQ6(ymem, smem) \
	VPMADDUBSW ymem, Y4, Y4; \
	VPSHUFB smem, Y9, Y5; \
	VPMADDWD Y5, Y4, Y4; \
	VPADDD Y4, Y7, Y7

// HALFQ6 handles the 128 elements of half h: ql at qlo, qh at qho, scales
// at sco, activations at yo.
#define HALFQ6(qlo, qho, sco, yo) \
	VPMOVSXBW sco(SI), X9; \
	VINSERTI128 $1, X9, Y9, Y9; \
	VMOVDQU qlo(SI), Y2; \
	VMOVDQU qlo+32(SI), Y3; \
	VMOVDQU qho(SI), Y10; \
	VPAND Y14, Y2, Y4; \
	VPAND Y12, Y10, Y5; \
	VPSLLW $4, Y5, Y5; \
	VPOR Y5, Y4, Y4; \
	ACCQ6(yo(DI), dotShufQ6<>+0(SB)); \
	VPAND Y14, Y3, Y4; \
	VPSRLW $2, Y10, Y5; \
	VPAND Y12, Y5, Y5; \
	VPSLLW $4, Y5, Y5; \
	VPOR Y5, Y4, Y4; \
	ACCQ6(yo+32(DI), dotShufQ6<>+32(SB)); \
	VPSRLW $4, Y2, Y4; \
	VPAND Y14, Y4, Y4; \
	VPSRLW $4, Y10, Y5; \
	VPAND Y12, Y5, Y5; \
	VPSLLW $4, Y5, Y5; \
	VPOR Y5, Y4, Y4; \
	ACCQ6(yo+64(DI), dotShufQ6<>+64(SB)); \
	VPSRLW $4, Y3, Y4; \
	VPAND Y14, Y4, Y4; \
	VPSRLW $6, Y10, Y5; \
	VPAND Y12, Y5, Y5; \
	VPSLLW $4, Y5, Y5; \
	VPOR Y5, Y4, Y4; \
	ACCQ6(yo+96(DI), dotShufQ6<>+96(SB))

// func dotQ6KQ8KAVX2(x, y *byte, nb int) float32
// FMAD16 adds d·dy times the int32 lanes A (converted) to the float lanes
// ACC: d the f16 at off(SI), dy the Q8_K block's scale at 0(DI). Clobbers
// AX and Y4.
#define FMAD16(off, A, ACC) \
	VCVTDQ2PS    A, A; \
	MOVWLZX      off(SI), AX; \
	VMOVD        AX, X4; \
	VCVTPH2PS    X4, X4; \
	VMULSS       0(DI), X4, X4; \
	VBROADCASTSS X4, Y4; \
	VFMADD231PS  Y4, A, ACC

TEXT ·dotQ6KQ8KAVX2(SB), NOSPLIT, $0-28
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ nb+16(FP), CX
	VXORPS Y0, Y0, Y0
	BCAST8($0x0F0F0F0F, X14, Y14)
	BCAST8($0x03030303, X12, Y12)

q6kloop:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	PREFETCHT0 (DOTPF+128)(SI)
	PREFETCHT0 (DOTPF+192)(SI)
	// 32·Σ scale_s·bsums[s]: the offset of the weights q − 32.
	VPMOVSXBW 192(SI), Y6
	VPMADDWD  260(DI), Y6, Y6
	VPSLLD    $5, Y6, Y6
	VPXOR     Y7, Y7, Y7
	HALFQ6(0, 128, 192, 4)
	HALFQ6(64, 160, 200, 132)
	VPSUBD       Y6, Y7, Y7
	FMAD16(208, Y7, Y0)
	ADDQ         $210, SI
	ADDQ         $292, DI
	DECQ         CX
	JNZ          q6kloop
	HSUM(Y0, X0, X1)
	VMOVSS       X0, ret+24(FP)
	VZEROUPPER
	RET

// SUBXS reduces IQ4_XS sub-block j (quants at qoff, activations at yoff) to
// eight int32 lane sums in V.
#define SUBXS(qoff, yoff, V) \
	VMOVDQU qoff(SI), X2; \
	VPSRLW $4, X2, X3; \
	VINSERTI128 $1, X3, Y2, Y2; \
	VPAND Y14, Y2, Y2; \
	VPSHUFB Y2, Y12, Y2; \
	VMOVDQU yoff(DI), Y3; \
	VPSIGNB Y2, Y3, Y3; \
	VPABSB Y2, Y2; \
	VPMADDUBSW Y3, Y2, Y2; \
	VPMADDWD Y15, Y2, V

// func dotIQ4XSQ8KAVX2(x, y *byte, nb int) float32
TEXT ·dotIQ4XSQ8KAVX2(SB), NOSPLIT, $0-28
	MOVQ    x+0(FP), SI
	MOVQ    y+8(FP), DI
	MOVQ    nb+16(FP), CX
	VXORPS  Y0, Y0, Y0
	BCAST8($0x0F0F0F0F, X14, Y14)
	BCAST8($0x0000000F, X13, Y13)
	BCAST8($0x00000030, X1, Y1)
	ONES16(Y15)
	VMOVDQU dotIQ4XSTable<>(SB), Y12

iqxsloop:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	PREFETCHT0 (DOTPF+128)(SI)
	SUBXS(8, 4, Y4)
	SUBXS(24, 36, Y5)
	SUBXS(40, 68, Y6)
	SUBXS(56, 100, Y7)
	SUBXS(72, 132, Y8)
	SUBXS(88, 164, Y9)
	SUBXS(104, 196, Y10)
	SUBXS(120, 228, Y11)

	// Sub-block sums s_j in the eight lanes of Y5.
	VPHADDD    Y5, Y4, Y4
	VPHADDD    Y7, Y6, Y6
	VPHADDD    Y9, Y8, Y8
	VPHADDD    Y11, Y10, Y10
	VPHADDD    Y6, Y4, Y4
	VPHADDD    Y10, Y8, Y8
	VPERM2I128 $0x20, Y8, Y4, Y5
	VPERM2I128 $0x31, Y8, Y4, Y6
	VPADDD     Y6, Y5, Y5

	// Scales ls_j − 32 as floats in Y2.
	VPBROADCASTD 4(SI), Y2
	VPSRLVD      dotShiftXS<>+0(SB), Y2, Y2
	VPAND        Y13, Y2, Y2
	VPBROADCASTW 2(SI), Y3
	VPSRLVD      dotShiftXS<>+32(SB), Y3, Y3
	VPSLLD       $4, Y3, Y3
	VPAND        Y1, Y3, Y3
	VPOR         Y3, Y2, Y2
	VPSUBD       dotXS32<>(SB), Y2, Y2
	VCVTDQ2PS    Y2, Y2

	// dl_j = d·dy·(ls_j − 32); sumf += dl_j·s_j.
	MOVWLZX      0(SI), AX
	VMOVD        AX, X3
	VCVTPH2PS    X3, X3
	VMULSS       0(DI), X3, X3
	VBROADCASTSS X3, Y3
	VMULPS       Y3, Y2, Y2
	VCVTDQ2PS    Y5, Y5
	VMULPS       Y5, Y2, Y2
	VADDPS       Y2, Y0, Y0

	ADDQ $136, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  iqxsloop
	HSUM(Y0, X0, X1)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// Q2_K and Q3_K: sixteen sub-blocks of 16 like Q6_K, so they share its
// scale-pair masks (dotShufQ6) and ACCQ6. Plane p of half h is 32 weights
// of sub-blocks 8h+2p and 8h+2p+1: their 2-bit values are bits 2p of the
// half's 32 quant bytes, taken by a word shift and a byte mask (the bits a
// shift pulls in from the next byte are masked off).

// PLANE2 accumulates plane p of the half whose quant bytes are in Y2:
// weights (Y2 >> 2p) & 3 (Y12) against the activations at yo.
#define PLANE2(p, yo) \
	VPSRLW $(2*p), Y2, Y4; \
	VPAND  Y12, Y4, Y4; \
	ACCQ6(yo(DI), dotShufQ6<>+(32*p)(SB))

// PLANE3 is PLANE2 with Q3_K's third bit: bit b of the hmask bytes in Y10
// (Y13: bytes of 1), so that each weight is q + 4·hbit, in 0…7.
#define PLANE3(p, b, yo) \
	VPSRLW $(2*p), Y2, Y4; \
	VPAND  Y12, Y4, Y4; \
	VPSRLW $b, Y10, Y5; \
	VPAND  Y13, Y5, Y5; \
	VPSLLW $2, Y5, Y5; \
	VPOR   Y5, Y4, Y4; \
	ACCQ6(yo(DI), dotShufQ6<>+(32*p)(SB))

// dotQ2KQ8KAVX2: Σ sc·q·a per block in Y7 (sc = scales&15), Σ m·bsums in Y6
// (m = scales>>4); Y0 += d·dy·Y7 and Y1 += dmin·dy·Y6, and the result is
// hsum(Y0) − hsum(Y1).
TEXT ·dotQ2KQ8KAVX2(SB), NOSPLIT, $0-28
	MOVQ   x+0(FP), SI
	MOVQ   y+8(FP), DI
	MOVQ   nb+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	BCAST8($0x0F0F0F0F, X11, Y11)
	BCAST8($0x03030303, X12, Y12)

q2kloop:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	Q2KSCALES
	VPMOVZXBW  X8, Y8
	VPMADDWD   260(DI), Y8, Y6
	VPMOVZXBW  X9, Y8
	VPXOR      Y7, Y7, Y7
	Q2KPLANES(PLANE2)
	FMAD16(80, Y7, Y0)
	FMAD16(82, Y6, Y1)
	ADDQ         $84, SI
	ADDQ         $292, DI
	DECQ         CX
	JNZ          q2kloop
	HSUM(Y0, X0, X2)
	HSUM(Y1, X1, X2)
	VSUBSS       X1, X0, X0
	VMOVSS       X0, ret+24(FP)
	VZEROUPPER
	RET

// dotQ3KQ8KAVX2: the weights q + 4·hbit (0…7) against the activations,
// weighted by the signed scales S − 32, less 4·Σ (S−32)·bsums (the offset
// of v = q + 4·hbit − 4); Y0 += d·dy·sum per block.
TEXT ·dotQ3KQ8KAVX2(SB), NOSPLIT, $0-28
	MOVQ   x+0(FP), SI
	MOVQ   y+8(FP), DI
	MOVQ   nb+16(FP), CX
	VXORPS Y0, Y0, Y0
	BCAST8($0x03030303, X12, Y12)
	BCAST8($0x01010101, X13, Y13)
	BCAST8($0x20202020, X15, Y15)
	MOVQ   $0x0F0F0F0F0F0F0F0F, R8

q3kloop:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	Q3KSCALES(R11, X15)
	VPMADDWD  260(DI), Y8, Y6
	VPSLLD    $2, Y6, Y6
	VPXOR     Y7, Y7, Y7
	Q3KPLANES(PLANE3)
	VPSUBD       Y6, Y7, Y7
	FMAD16(108, Y7, Y0)
	ADDQ         $110, SI
	ADDQ         $292, DI
	DECQ         CX
	JNZ          q3kloop
	HSUM(Y0, X0, X1)
	VMOVSS       X0, ret+24(FP)
	VZEROUPPER
	RET
