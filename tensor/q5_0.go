package tensor

import (
	"encoding/binary"
	"math"
)

// Q5_0 and Q5_1 blocks hold 32 elements as 5-bit values: the low 4 bits as in
// Q4_0, and bit j of the little-endian uint32 qh is bit 4 of element j.
//
//	Q5_0 (22 bytes): d f16 · qh[4] · qs[16];           y = d·(q − 16)
//	Q5_1 (24 bytes): d f16 · m f16 · qh[4] · qs[16];   y = d·q + m
const (
	sizeQ5_0 = 22
	sizeQ5_1 = 24
)

func dequantQ5_0(src []byte, dst []float32) {
	for i := range len(dst) / 32 {
		b := (*[sizeQ5_0]byte)(src[i*sizeQ5_0:])
		y := (*[32]float32)(dst[i*32:])
		d := f16(b[0:])
		qh := binary.LittleEndian.Uint32(b[2:])
		qs := (*[16]byte)(b[6:])
		for j, q := range qs {
			lo := int(q&15) | int(qh>>j&1)<<4
			hi := int(q>>4) | int(qh>>(j+16)&1)<<4
			y[j] = float32(lo-16) * d
			y[j+16] = float32(hi-16) * d
		}
	}
}

func dequantQ5_1(src []byte, dst []float32) {
	for i := range len(dst) / 32 {
		b := (*[sizeQ5_1]byte)(src[i*sizeQ5_1:])
		y := (*[32]float32)(dst[i*32:])
		d, m := f16(b[0:]), f16(b[2:])
		qh := binary.LittleEndian.Uint32(b[4:])
		qs := (*[16]byte)(b[8:])
		for j, q := range qs {
			lo := q&15 | byte(qh>>j&1)<<4
			hi := q>>4 | byte(qh>>(j+16)&1)<<4
			y[j] = float32(float32(lo)*d) + m
			y[j+16] = float32(float32(hi)*d) + m
		}
	}
}

// quantQ5_0 is ggml's reference Q5_0 quantizer, which llama-quantize uses
// without an importance matrix: d = max/−16, where max is the first element
// of largest magnitude, stored as f16; q = min(31, trunc(x·(1/d) + 16.5)),
// the inverse taken from the unrounded d (0 for an all-zero block).
func quantQ5_0(src []float32, dst []byte) {
	for i := range len(src) / 32 {
		x := (*[32]float32)(src[i*32:])
		b := (*[sizeQ5_0]byte)(dst[i*sizeQ5_0:])
		var amax, vmax float32
		for _, v := range x {
			if a := abs32(v); a > amax {
				amax, vmax = a, v
			}
		}
		d := vmax / -16
		var id float32
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(b[0:], F32ToF16(d))
		// The conversions keep each product rounded before the addition,
		// as in ggml, where a fused multiply-add would round differently.
		level := func(v float32) uint32 { return uint32(uint8(min(31, int32(float32(v*id)+16.5)))) }
		var qh uint32
		qs := (*[16]byte)(b[6:])
		for j := range 16 {
			lo, hi := level(x[j]), level(x[j+16])
			qs[j] = byte(lo&15 | (hi&15)<<4)
			qh |= (lo>>4&1)<<j | (hi>>4&1)<<(j+16)
		}
		binary.LittleEndian.PutUint32(b[2:], qh)
	}
}

// quantQ5_1 is ggml's reference Q5_1 quantizer: m = min, d = (max − min)/31,
// both stored as f16; q = trunc((x − min)·(1/d) + 0.5) with the unrounded d
// and min, so a block's values map onto 0…31.
func quantQ5_1(src []float32, dst []byte) {
	for i := range len(src) / 32 {
		x := (*[32]float32)(src[i*32:])
		b := (*[sizeQ5_1]byte)(dst[i*sizeQ5_1:])
		lo, hi := float32(math.MaxFloat32), float32(-math.MaxFloat32)
		for _, v := range x {
			// Comparisons, not min and max: those order −0 below +0 and
			// propagate NaN, which ggml's loop does not.
			if v < lo {
				lo = v
			}
			if v > hi {
				hi = v
			}
		}
		d := (hi - lo) / 31
		var id float32
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(b[0:], F32ToF16(d))
		binary.LittleEndian.PutUint16(b[2:], F32ToF16(lo))
		level := func(v float32) uint32 { return uint32(uint8(int32(float32(float32(v-lo)*id) + 0.5))) }
		var qh uint32
		qs := (*[16]byte)(b[8:])
		for j := range 16 {
			l, h := level(x[j]), level(x[j+16])
			qs[j] = byte(l&15 | (h&15)<<4)
			qh |= (l>>4&1)<<j | (h>>4&1)<<(j+16)
		}
		binary.LittleEndian.PutUint32(b[4:], qh)
	}
}
