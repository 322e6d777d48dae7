package tensor

import "encoding/binary"

// IQ4_NL and IQ4_XS store 4-bit indices into the non-linear codebook
// kvaluesIQ4NL.
//
//	IQ4_NL (18 bytes, 32 elements): d f16 · qs[16]; y[j] = d·K[qs[j]&15],
//	    y[j+16] = d·K[qs[j]>>4]
//	IQ4_XS (136 bytes, 256 elements): d f16 · scales_h u16 · scales_l[4] ·
//	    qs[128]; sub-block j (32 elements) has the 6-bit scale
//	    ls = (scales_l[j/2] >> 4(j%2) & 15) | (scales_h >> 2j & 3)<<4 and
//	    y = (d·(ls−32))·K[q], nibbles of qs[16j:16j+16] as in IQ4_NL.
const (
	sizeIQ4NL = 18
	sizeIQ4XS = 136
)

// kvaluesIQ4NL is ggml's IQ4_NL codebook.
var kvaluesIQ4NL = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

func dequantIQ4NL(src []byte, dst []float32) {
	for i := range len(dst) / 32 {
		b := (*[sizeIQ4NL]byte)(src[i*sizeIQ4NL:])
		y := (*[32]float32)(dst[i*32:])
		d := f16(b[0:])
		for j, q := range (*[16]byte)(b[2:]) {
			y[j] = d * float32(kvaluesIQ4NL[q&15])
			y[j+16] = d * float32(kvaluesIQ4NL[q>>4])
		}
	}
}

func dequantIQ4XS(src []byte, dst []float32) {
	for i := range len(dst) / 256 {
		b := (*[sizeIQ4XS]byte)(src[i*sizeIQ4XS:])
		y := (*[256]float32)(dst[i*256:])
		d := f16(b[0:])
		scalesH := binary.LittleEndian.Uint16(b[2:])
		scalesL := (*[4]byte)(b[4:])
		for j := range 8 {
			ls := int(scalesL[j/2]>>(4*(j%2))&15) | int(scalesH>>(2*j)&3)<<4
			dl := d * float32(ls-32)
			out := (*[32]float32)(y[32*j:])
			for l, q := range (*[16]byte)(b[8+16*j:]) {
				out[l] = dl * float32(kvaluesIQ4NL[q&15])
				out[l+16] = dl * float32(kvaluesIQ4NL[q>>4])
			}
		}
	}
}
