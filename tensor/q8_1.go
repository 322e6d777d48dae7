package tensor

import "encoding/binary"

// quantQ8_1 is ggml's reference Q8_1 quantizer (quantize_row_q8_1_ref), the
// activation format of the Q4_1 and Q5_1 dot products: per block of 32,
// d = amax/127 stored as f16, q = round(x·(1/d)) with ties away from zero
// (the inverse taken from the unrounded d, 0 for an all-zero block), and
// s = d·Σq stored as f16, the sum taken over the rounded quants as an
// integer and multiplied by the unrounded d in float32.
func quantQ8_1(src []float32, dst []byte) {
	for i := range len(src) / 32 {
		b := (*[sizeQ8_1]byte)(dst[i*sizeQ8_1:])
		d, sum := quantBlock32((*[32]float32)(src[i*32:]), (*[32]byte)(b[4:]))
		binary.LittleEndian.PutUint16(b[0:], F32ToF16(d))
		binary.LittleEndian.PutUint16(b[2:], F32ToF16(float32(sum)*d))
	}
}
