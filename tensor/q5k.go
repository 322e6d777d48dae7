package tensor

// A Q5_K block (176 bytes) is a Q4_K block with a fifth bit per element:
//
//	d f16 @0 · dmin f16 @2 · scales[12] @4 · qh[32] @16 · qs[128] @48
//
// In chunk c, element l of the low-nibble half adds 16·(qh[l]>>2c & 1) and
// element l of the high-nibble half 16·(qh[l]>>(2c+1) & 1).
const sizeQ5K = 176

func dequantQ5K(src []byte, dst []float32) {
	for i := range len(dst) / 256 {
		b := (*[sizeQ5K]byte)(src[i*sizeQ5K:])
		y := (*[256]float32)(dst[i*256:])
		d, dmin := f16(b[0:]), f16(b[2:])
		scales := (*[12]byte)(b[4:])
		qh := (*[32]byte)(b[16:])
		for c := range 4 {
			sc1, m1 := scaleMinK4(scales, 2*c)
			sc2, m2 := scaleMinK4(scales, 2*c+1)
			d1, min1 := d*float32(sc1), dmin*float32(m1)
			d2, min2 := d*float32(sc2), dmin*float32(m2)
			qs := (*[32]byte)(b[48+32*c:])
			lo := (*[32]float32)(y[64*c:])
			hi := (*[32]float32)(y[64*c+32:])
			s1, s2 := 2*c, 2*c+1
			for l, q := range qs {
				h := qh[l]
				lo[l] = float32(d1*float32(q&15|h>>s1&1<<4)) - min1
				hi[l] = float32(d2*float32(q>>4|h>>s2&1<<4)) - min2
			}
		}
	}
}
