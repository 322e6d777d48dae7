package tensor

// Q4_0 and Q4_1 blocks hold 32 elements as 4-bit values: the low nibbles of
// qs[0:16] are elements 0–15, the high nibbles elements 16–31.
//
//	Q4_0 (18 bytes): d f16 · qs[16];            y = d·(q − 8)
//	Q4_1 (20 bytes): d f16 · m f16 · qs[16];    y = d·q + m
const (
	sizeQ4_0 = 18
	sizeQ4_1 = 20
)

func dequantQ4_0(src []byte, dst []float32) {
	for i := range len(dst) / 32 {
		b := (*[sizeQ4_0]byte)(src[i*sizeQ4_0:])
		y := (*[32]float32)(dst[i*32:])
		d := f16(b[0:])
		qs := (*[16]byte)(b[2:])
		for j, q := range qs {
			y[j] = float32(int(q&15)-8) * d
			y[j+16] = float32(int(q>>4)-8) * d
		}
	}
}

func dequantQ4_1(src []byte, dst []float32) {
	for i := range len(dst) / 32 {
		b := (*[sizeQ4_1]byte)(src[i*sizeQ4_1:])
		y := (*[32]float32)(dst[i*32:])
		d, m := f16(b[0:]), f16(b[2:])
		qs := (*[16]byte)(b[4:])
		for j, q := range qs {
			// The explicit conversions round the product, as ggml does, so
			// the compiler cannot fuse it with the addition.
			y[j] = float32(float32(q&15)*d) + m
			y[j+16] = float32(float32(q>>4)*d) + m
		}
	}
}
