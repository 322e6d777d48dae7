//go:build !purego

#include "textflag.h"
#include "dot_amd64.h"

// AVX-512 (F, BW, VL, VNNI) dot products of Q4_K and Q6_K blocks with Q8_K
// activations. As the AVX2 kernels (dotk_amd64.s), with 512-bit registers
// that hold 64 weights whose activations are contiguous, and VPDPWSSD
// fusing the sub-block scale multiply with the int32 accumulation. The
// integer sums are exact; each block's sixteen int32 lanes are scaled by
// d·dy and accumulated with FMA.

DATA dotShufK4Z<>+0(SB)/8, $0x0100010001000100
DATA dotShufK4Z<>+8(SB)/8, $0x0100010001000100
DATA dotShufK4Z<>+16(SB)/8, $0x0100010001000100
DATA dotShufK4Z<>+24(SB)/8, $0x0100010001000100
DATA dotShufK4Z<>+32(SB)/8, $0x0302030203020302
DATA dotShufK4Z<>+40(SB)/8, $0x0302030203020302
DATA dotShufK4Z<>+48(SB)/8, $0x0302030203020302
DATA dotShufK4Z<>+56(SB)/8, $0x0302030203020302
DATA dotShufK4Z<>+64(SB)/8, $0x0504050405040504
DATA dotShufK4Z<>+72(SB)/8, $0x0504050405040504
DATA dotShufK4Z<>+80(SB)/8, $0x0504050405040504
DATA dotShufK4Z<>+88(SB)/8, $0x0504050405040504
DATA dotShufK4Z<>+96(SB)/8, $0x0706070607060706
DATA dotShufK4Z<>+104(SB)/8, $0x0706070607060706
DATA dotShufK4Z<>+112(SB)/8, $0x0706070607060706
DATA dotShufK4Z<>+120(SB)/8, $0x0706070607060706
DATA dotShufK4Z<>+128(SB)/8, $0x0908090809080908
DATA dotShufK4Z<>+136(SB)/8, $0x0908090809080908
DATA dotShufK4Z<>+144(SB)/8, $0x0908090809080908
DATA dotShufK4Z<>+152(SB)/8, $0x0908090809080908
DATA dotShufK4Z<>+160(SB)/8, $0x0B0A0B0A0B0A0B0A
DATA dotShufK4Z<>+168(SB)/8, $0x0B0A0B0A0B0A0B0A
DATA dotShufK4Z<>+176(SB)/8, $0x0B0A0B0A0B0A0B0A
DATA dotShufK4Z<>+184(SB)/8, $0x0B0A0B0A0B0A0B0A
DATA dotShufK4Z<>+192(SB)/8, $0x0D0C0D0C0D0C0D0C
DATA dotShufK4Z<>+200(SB)/8, $0x0D0C0D0C0D0C0D0C
DATA dotShufK4Z<>+208(SB)/8, $0x0D0C0D0C0D0C0D0C
DATA dotShufK4Z<>+216(SB)/8, $0x0D0C0D0C0D0C0D0C
DATA dotShufK4Z<>+224(SB)/8, $0x0F0E0F0E0F0E0F0E
DATA dotShufK4Z<>+232(SB)/8, $0x0F0E0F0E0F0E0F0E
DATA dotShufK4Z<>+240(SB)/8, $0x0F0E0F0E0F0E0F0E
DATA dotShufK4Z<>+248(SB)/8, $0x0F0E0F0E0F0E0F0E
GLOBL dotShufK4Z<>(SB), RODATA|NOPTR, $256
DATA dotShufQ6Z<>+0(SB)/8, $0x0100010001000100
DATA dotShufQ6Z<>+8(SB)/8, $0x0100010001000100
DATA dotShufQ6Z<>+16(SB)/8, $0x0302030203020302
DATA dotShufQ6Z<>+24(SB)/8, $0x0302030203020302
DATA dotShufQ6Z<>+32(SB)/8, $0x0504050405040504
DATA dotShufQ6Z<>+40(SB)/8, $0x0504050405040504
DATA dotShufQ6Z<>+48(SB)/8, $0x0706070607060706
DATA dotShufQ6Z<>+56(SB)/8, $0x0706070607060706
DATA dotShufQ6Z<>+64(SB)/8, $0x0908090809080908
DATA dotShufQ6Z<>+72(SB)/8, $0x0908090809080908
DATA dotShufQ6Z<>+80(SB)/8, $0x0B0A0B0A0B0A0B0A
DATA dotShufQ6Z<>+88(SB)/8, $0x0B0A0B0A0B0A0B0A
DATA dotShufQ6Z<>+96(SB)/8, $0x0D0C0D0C0D0C0D0C
DATA dotShufQ6Z<>+104(SB)/8, $0x0D0C0D0C0D0C0D0C
DATA dotShufQ6Z<>+112(SB)/8, $0x0F0E0F0E0F0E0F0E
DATA dotShufQ6Z<>+120(SB)/8, $0x0F0E0F0E0F0E0F0E
GLOBL dotShufQ6Z<>(SB), RODATA|NOPTR, $128

// dotShiftK4Z shifts the words of the low half of a register by 0 and of
// the high half by 4 (VPSRLVW): the 32 quant bytes of a Q4_K chunk
// broadcast to both halves become its low nibbles then its high nibbles
// (after the 0x0F mask) with no cross-lane shuffle.
DATA dotShiftK4Z<>+0(SB)/8, $0
DATA dotShiftK4Z<>+8(SB)/8, $0
DATA dotShiftK4Z<>+16(SB)/8, $0
DATA dotShiftK4Z<>+24(SB)/8, $0
DATA dotShiftK4Z<>+32(SB)/8, $0x0004000400040004
DATA dotShiftK4Z<>+40(SB)/8, $0x0004000400040004
DATA dotShiftK4Z<>+48(SB)/8, $0x0004000400040004
DATA dotShiftK4Z<>+56(SB)/8, $0x0004000400040004
GLOBL dotShiftK4Z<>(SB), RODATA|NOPTR, $64

// dotShiftQ6Z likewise shifts the high half by 2, and dotShiftQ6LZ shifts
// left, the low half by 4 and the high half by 2 (see HALFQ6).
DATA dotShiftQ6LZ<>+0(SB)/8, $0x0004000400040004
DATA dotShiftQ6LZ<>+8(SB)/8, $0x0004000400040004
DATA dotShiftQ6LZ<>+16(SB)/8, $0x0004000400040004
DATA dotShiftQ6LZ<>+24(SB)/8, $0x0004000400040004
DATA dotShiftQ6LZ<>+32(SB)/8, $0x0002000200020002
DATA dotShiftQ6LZ<>+40(SB)/8, $0x0002000200020002
DATA dotShiftQ6LZ<>+48(SB)/8, $0x0002000200020002
DATA dotShiftQ6LZ<>+56(SB)/8, $0x0002000200020002
GLOBL dotShiftQ6LZ<>(SB), RODATA|NOPTR, $64

DATA dotShiftQ6Z<>+0(SB)/8, $0
DATA dotShiftQ6Z<>+8(SB)/8, $0
DATA dotShiftQ6Z<>+16(SB)/8, $0
DATA dotShiftQ6Z<>+24(SB)/8, $0
DATA dotShiftQ6Z<>+32(SB)/8, $0x0002000200020002
DATA dotShiftQ6Z<>+40(SB)/8, $0x0002000200020002
DATA dotShiftQ6Z<>+48(SB)/8, $0x0002000200020002
DATA dotShiftQ6Z<>+56(SB)/8, $0x0002000200020002
GLOBL dotShiftQ6Z<>(SB), RODATA|NOPTR, $64

// SCALESK4 unpacks the 6-bit scales and mins of the Q4_K block at SI:
// Z8 = eight int16 scales in each 128-bit lane, X9 = eight int16 mins.
// Clobbers AX, BX, DX, R8-R10.
#define SCALESK4 \
	UNPACKK4(SI, R8, R9, AX, BX, DX, R10); \
	VMOVQ R8, X8; \
	VPMOVZXBW X8, X8; \
	VSHUFI32X4 $0, Z8, Z8, Z8; \
	VMOVQ R9, X9; \
	VPMOVZXBW X9, X9

// MINSK4 adds dmin·dy · Σ m_j·(bsums[2j]+bsums[2j+1]) to X1 (four lanes) and
// leaves d·dy broadcast in Z4. Clobbers X5, X6.
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
	VBROADCASTSS X4, Z4

// CHUNKK4 multiplies the 64 weights of chunk c (32 quant bytes at qoff:
// low nibbles then high nibbles) with the 64 activations at yoff and adds
// them, weighted by the scales picked by mask smem, to Z7 with OP.
#define CHUNKK4(qoff, yoff, smem, OP) \
	VBROADCASTI64X4 qoff(SI), Z2; \
	VPSRLVW Z13, Z2, Z2; \
	VPANDD Z14, Z2, Z2; \
	VPMADDUBSW yoff(DI), Z2, Z2; \
	VPSHUFB smem, Z8, Z3; \
	OP Z3, Z2, Z7

// func dotQ4KQ8KAVX512(x, y *byte, nb int) float32
TEXT ·dotQ4KQ8KAVX512(SB), NOSPLIT, $0-28
	MOVQ   x+0(FP), SI
	MOVQ   y+8(FP), DI
	MOVQ   nb+16(FP), CX
	VPXORD Z0, Z0, Z0
	VXORPS X1, X1, X1
	MOVL   $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z14
	VMOVDQU64 dotShiftK4Z<>(SB), Z13

q4kloop:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	PREFETCHT0 (DOTPF+128)(SI)
	SCALESK4
	MINSK4
	CHUNKK4(16, 4, dotShufK4Z<>+0(SB), VPMADDWD)
	CHUNKK4(48, 68, dotShufK4Z<>+64(SB), VPDPWSSD)
	CHUNKK4(80, 132, dotShufK4Z<>+128(SB), VPDPWSSD)
	CHUNKK4(112, 196, dotShufK4Z<>+192(SB), VPDPWSSD)
	VCVTDQ2PS   Z7, Z7
	VFMADD231PS Z4, Z7, Z0
	ADDQ        $144, SI
	ADDQ        $292, DI
	DECQ        CX
	JNZ         q4kloop

	KSUBZ
	VMOVSS   X0, ret+24(FP)
	VZEROUPPER
	RET

// HALFQ6 handles the 128 elements of Q6_K half h: ql at qlo (64 bytes),
// qh at qho (32 bytes), scales at sco (8 bytes), activations at yo. The
// weights q = low 4 bits from ql | 2 bits from qh << 4: the qh bytes,
// broadcast to both register halves, are shifted (VPSLLVW by Z13, VPSRLVW
// by Z11) so that each byte's two bits land at bits 4-5, masked with Z12
// (0x30) and merged with the ql nibble by VPTERNLOGD (a | b&c).
#define HALFQ6(qlo, qho, sco, yo) \
	VPBROADCASTQ sco(SI), Y9; \
	VPMOVSXBW Y9, Z9; \
	VMOVDQU64 qlo(SI), Z2; \
	VBROADCASTI64X4 qho(SI), Z10; \
	VPSLLVW Z13, Z10, Z5; \
	VPANDD Z12, Z5, Z5; \
	VPTERNLOGD $0xF8, Z14, Z2, Z5; \
	VPMADDUBSW yo(DI), Z5, Z4; \
	VPSHUFB dotShufQ6Z<>+0(SB), Z9, Z5; \
	VPDPWSSD Z5, Z4, Z7; \
	VPSRLVW Z11, Z10, Z10; \
	VPANDD Z12, Z10, Z10; \
	VPSRLW $4, Z2, Z4; \
	VPTERNLOGD $0xF8, Z14, Z4, Z10; \
	VPMADDUBSW yo+64(DI), Z10, Z4; \
	VPSHUFB dotShufQ6Z<>+64(SB), Z9, Z5; \
	VPDPWSSD Z5, Z4, Z7

// func dotQ6KQ8KAVX512(x, y *byte, nb int) float32
TEXT ·dotQ6KQ8KAVX512(SB), NOSPLIT, $0-28
	MOVQ   x+0(FP), SI
	MOVQ   y+8(FP), DI
	MOVQ   nb+16(FP), CX
	VPXORD Z0, Z0, Z0
	MOVL   $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z14
	MOVL   $0x30303030, AX
	VPBROADCASTD AX, Z12
	VMOVDQU64 dotShiftQ6LZ<>(SB), Z13
	VMOVDQU64 dotShiftQ6Z<>(SB), Z11

q6kloop:
	PREFETCHT0 (DOTPF+0)(SI)
	PREFETCHT0 (DOTPF+64)(SI)
	PREFETCHT0 (DOTPF+128)(SI)
	PREFETCHT0 (DOTPF+192)(SI)
	// 32·Σ scale_s·bsums[s]: the offset of the weights q − 32.
	VPMOVSXBW 192(SI), Y6
	VPMADDWD  260(DI), Y6, Y6
	VPSLLD    $5, Y6, Y6
	VPXORD    Z7, Z7, Z7
	HALFQ6(0, 128, 192, 4)
	HALFQ6(64, 160, 200, 132)
	VPSUBD       Z6, Z7, Z7
	VCVTDQ2PS    Z7, Z7
	MOVWLZX      208(SI), AX
	VMOVD        AX, X4
	VCVTPH2PS    X4, X4
	VMULSS       0(DI), X4, X4
	VBROADCASTSS X4, Z4
	VFMADD231PS  Z4, Z7, Z0
	ADDQ         $210, SI
	ADDQ         $292, DI
	DECQ         CX
	JNZ          q6kloop

	VEXTRACTF64X4 $1, Z0, Y2
	VADDPS        Y2, Y0, Y0
	HSUM(Y0, X0, X1)
	VMOVSS        X0, ret+24(FP)
	VZEROUPPER
	RET
