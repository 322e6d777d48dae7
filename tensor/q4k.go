package tensor

// A Q4_K block (144 bytes) holds 256 elements in 8 sub-blocks of 32, each
// with a 6-bit scale and a 6-bit min packed into scales[12]:
//
//	d f16 @0 · dmin f16 @2 · scales[12] @4 · qs[128] @16
//
// Chunk c (64 elements) takes qs[32c:32c+32]: low nibbles are sub-block 2c,
// high nibbles sub-block 2c+1; y = (d·sc)·q − (dmin·m).
const sizeQ4K = 144

// scaleMinK4 unpacks the 6-bit scale and min of sub-block j (0…7) from the
// 12 packed bytes shared by Q4_K and Q5_K: bytes 0–3 hold sc0–3 in their low
// 6 bits, bytes 4–7 m0–3; bytes 8–11 hold the low 4 bits of sc4–7 (low
// nibble) and m4–7 (high nibble), whose high 2 bits sit in the top bits of
// bytes 0–3 and 4–7.
func scaleMinK4(s *[12]byte, j int) (sc, m byte) {
	if j < 4 {
		return s[j] & 63, s[j+4] & 63
	}
	return s[j+4]&15 | s[j-4]>>6<<4, s[j+4]>>4 | s[j]>>6<<4
}

// putScaleMinK4 packs the 6-bit scales and mins into the layout scaleMinK4
// reads.
func putScaleMinK4(s *[12]byte, sc, m *[8]byte) {
	*s = [12]byte{}
	for j := range 8 {
		if j < 4 {
			s[j] = sc[j]
			s[j+4] = m[j]
		} else {
			s[j+4] = sc[j]&15 | m[j]&15<<4
			s[j-4] |= sc[j] >> 4 << 6
			s[j] |= m[j] >> 4 << 6
		}
	}
}

func dequantQ4K(src []byte, dst []float32) {
	for i := range len(dst) / 256 {
		b := (*[sizeQ4K]byte)(src[i*sizeQ4K:])
		y := (*[256]float32)(dst[i*256:])
		d, dmin := f16(b[0:]), f16(b[2:])
		scales := (*[12]byte)(b[4:])
		for c := range 4 {
			sc1, m1 := scaleMinK4(scales, 2*c)
			sc2, m2 := scaleMinK4(scales, 2*c+1)
			d1, min1 := d*float32(sc1), dmin*float32(m1)
			d2, min2 := d*float32(sc2), dmin*float32(m2)
			qs := (*[32]byte)(b[16+32*c:])
			lo := (*[32]float32)(y[64*c:])
			hi := (*[32]float32)(y[64*c+32:])
			for l, q := range qs {
				lo[l] = float32(d1*float32(q&15)) - min1
				hi[l] = float32(d2*float32(q>>4)) - min2
			}
		}
	}
}
