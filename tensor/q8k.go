package tensor

import (
	"encoding/binary"
	"math"
)

// A Q8_K block (292 bytes) holds 256 int8 values with a float32 scale and the
// sums of each run of 16 values, which the k-quant dot products use:
//
//	d f32 @0 · qs i8[256] @4 · bsums i16[16] @260;   y = d·q
const sizeQ8K = 292

func dequantQ8K(src []byte, dst []float32) {
	for i := range len(dst) / 256 {
		b := (*[sizeQ8K]byte)(src[i*sizeQ8K:])
		y := (*[256]float32)(dst[i*256:])
		d := math.Float32frombits(binary.LittleEndian.Uint32(b[0:]))
		for j, q := range (*[256]byte)(b[4:]) {
			y[j] = d * float32(int8(q))
		}
	}
}

// quantQ8K is ggml's reference Q8_K quantizer: with max the value of largest
// magnitude (the first one on ties), iscale = −127/max,
// q = min(127, nearestInt(iscale·x)) and d = 1/iscale; an all-zero block
// has d = 0.
func quantQ8K(src []float32, dst []byte) {
	for i := range len(src) / 256 {
		x := (*[256]float32)(src[i*256:])
		b := (*[sizeQ8K]byte)(dst[i*sizeQ8K:])
		var amax, vmax float32
		for _, v := range x {
			if a := abs32(v); a > amax {
				amax, vmax = a, v
			}
		}
		qs := (*[256]byte)(b[4:])
		if amax == 0 {
			*b = [sizeQ8K]byte{}
			continue
		}
		iscale := -127 / vmax
		for j, v := range x {
			qs[j] = byte(int8(min(127, nearestInt(float32(iscale*v)))))
		}
		for j := range 16 {
			var sum int16
			for _, q := range qs[16*j : 16*j+16] {
				sum += int16(int8(q))
			}
			binary.LittleEndian.PutUint16(b[260+2*j:], uint16(sum))
		}
		binary.LittleEndian.PutUint32(b[0:], math.Float32bits(1/iscale))
	}
}

// nearestInt rounds x to the nearest integer, ties to even, for
// |x| < 2²²: adding 1.5·2²³ leaves the rounded integer in the low mantissa
// bits (ggml's nearest_int).
func nearestInt(x float32) int32 {
	v := x + 12582912
	return int32(math.Float32bits(v)&0x7fffff) - 0x400000
}
