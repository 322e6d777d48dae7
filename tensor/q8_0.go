package tensor

import (
	"encoding/binary"
	"math"
)

// Q8_0 and Q8_1 blocks hold 32 elements as int8 values qs with one scale d:
// y = d·q.
//
//	Q8_0 (34 bytes): d f16 · qs[32]
//	Q8_1 (36 bytes): d f16 · s f16 · qs[32], where s = d·Σq
const (
	sizeQ8_0 = 34
	sizeQ8_1 = 36
)

func dequantQ8_0(src []byte, dst []float32) {
	for i := range len(dst) / 32 {
		b := (*[sizeQ8_0]byte)(src[i*sizeQ8_0:])
		y := (*[32]float32)(dst[i*32:])
		d := f16(b[0:])
		for j, q := range (*[32]byte)(b[2:]) {
			y[j] = float32(int8(q)) * d
		}
	}
}

func dequantQ8_1(src []byte, dst []float32) {
	for i := range len(dst) / 32 {
		b := (*[sizeQ8_1]byte)(src[i*sizeQ8_1:])
		y := (*[32]float32)(dst[i*32:])
		d := f16(b[0:])
		for j, q := range (*[32]byte)(b[4:]) {
			y[j] = float32(int8(q)) * d
		}
	}
}

// quantQ8_0 is ggml's reference Q8_0 quantizer: d = amax/127 stored as f16,
// q = round(x·(1/d)) with ties away from zero, the inverse taken from the
// unrounded d.
func quantQ8_0(src []float32, dst []byte) {
	for i := range len(src) / 32 {
		b := (*[sizeQ8_0]byte)(dst[i*sizeQ8_0:])
		d, _ := quantBlock32((*[32]float32)(src[i*32:]), (*[32]byte)(b[2:]))
		binary.LittleEndian.PutUint16(b[0:], F32ToF16(d))
	}
}

// quantBlock32 quantizes one block of 32 values to int8 as ggml's Q8_0 and
// Q8_1 reference quantizers do: d = amax/127, q = round(x·(1/d)) with ties
// away from zero, the inverse taken from the unrounded d (0 for an all-zero
// block). It returns the unrounded d and the sum of the quants.
func quantBlock32(x *[32]float32, qs *[32]byte) (d float32, sum int32) {
	var amax float32
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax = a
		}
	}
	d = amax / 127
	var id float32
	if d != 0 {
		id = 1 / d
	}
	for j, v := range x {
		// The conversion keeps the product rounded, as in ggml, where the
		// compiler could otherwise fuse it into roundAway's subtraction.
		q := int8(roundAway(float32(v * id)))
		qs[j] = byte(q)
		sum += int32(q)
	}
	return d, sum
}

// roundAway rounds x to the nearest integer with ties away from zero, as C's
// roundf, for |x| < 2³¹. x − trunc(x) is exact in float32, so comparing it
// with ±0.5 decides the tie exactly.
func roundAway(x float32) int32 {
	q := int32(x) // truncates toward zero
	switch f := x - float32(q); {
	case f >= 0.5:
		q++
	case f <= -0.5:
		q--
	}
	return q
}

func abs32(x float32) float32 {
	return math.Float32frombits(math.Float32bits(x) &^ (1 << 31))
}
