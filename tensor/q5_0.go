package tensor

import "encoding/binary"

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
