package tensor

import (
	"encoding/binary"
	"math/bits"
)

// The 1- to 3-bit "i-quants". Each 256-element block is 8 groups of 32;
// a group stores indices into a fixed codebook (iqgrid_tables.go) of 8 or 4
// values, sign bits where the codebook holds magnitudes, and a small odd
// scale. Layouts (d is an f16 unless said otherwise; multi-byte fields are
// little-endian):
//
//	IQ2_XXS (66 bytes): d · qs u16[32]. Group g is the 8 bytes qs[4g:4g+4]:
//	    four 8-bit grid indices, then a u32 whose bits 7l..7l+6 pick the
//	    signs of the l-th 8 values (ksignsIQ2) and whose top 4 bits are the
//	    scale s: y = d·(0.5+s)·0.25 · grid · sign.
//	IQ2_XS (74 bytes): d · qs u16[32] · scales[8]. Each u16 is a 9-bit grid
//	    index and a 7-bit sign pattern; group g has scales[g]'s low nibble
//	    for its first 16 values and the high one for the last 16.
//	IQ2_S (82 bytes): d · qs[32] (low 8 index bits) · signs[32] (one byte
//	    per 8 values) · qh[8] (2 more index bits per 8 values, group g in
//	    qh[g]) · scales[8] as IQ2_XS.
//	IQ3_XXS (98 bytes): d · qs[64] (8-bit indices into a 4-value grid) ·
//	    u32[8], one per group: four 7-bit sign patterns and a 4-bit scale s;
//	    y = d·(0.5+s)·0.5 · grid · sign.
//	IQ3_S (110 bytes): d · qs[64] · qh[8] (the 9th index bit) · signs[32] ·
//	    scales[4] (a nibble per group); y = d·(1+2s) · grid · sign.
//	IQ1_S (50 bytes): d · qs[32] · qh u16[8]. Group g: four 11-bit indices
//	    (qs[4g+l] and 3 bits of qh[g] at 3l) into a grid of −1/0/+1, the
//	    scale s = qh[g]>>12 & 7 and a shift δ = ±1/8 (bit 15):
//	    y = d·(2s+1) · (grid + δ).
//	IQ1_M (56 bytes): qs[32] · qh[16] · scales u16[4]. No d field: d is the
//	    f16 made of the top nibbles of the four scale words. Each qh byte
//	    holds 3 index bits and the δ sign bit of two indices; each group has
//	    two 3-bit scales, one per 16 values.
const (
	sizeIQ2XXS = 66
	sizeIQ2XS  = 74
	sizeIQ2S   = 82
	sizeIQ3XXS = 98
	sizeIQ3S   = 110
	sizeIQ1S   = 50
	sizeIQ1M   = 56
)

// iq1Delta is IQ1_S's and IQ1_M's shift δ of the grid values.
const iq1Delta = 0.125

// ksignsIQ2 maps a 7-bit sign pattern to the 8 signs of a group of 8
// values: bit j set is −1. The 8th sign is the pattern's parity, so that
// the number of negative signs is always even.
var ksignsIQ2 = func() (t [128]uint8) {
	for i := range t {
		t[i] = uint8(i) | uint8(bits.OnesCount8(uint8(i))&1)<<7
	}
	return t
}()

// iqSigned returns v, negated where bit j of signs is set.
func iqSigned(v float32, signs uint8, j int) float32 {
	if signs>>j&1 != 0 {
		return -v
	}
	return v
}

// gridByte returns value j of a grid entry.
func gridByte[E uint32 | uint64](e E, j int) uint8 { return uint8(e >> (8 * j)) }

func dequantIQ2XXS(src []byte, dst []float32) {
	for i := range len(dst) / 256 {
		b := (*[sizeIQ2XXS]byte)(src[i*sizeIQ2XXS:])
		d := f16(b[0:])
		for g := range 8 {
			q := b[2+8*g:]
			aux := binary.LittleEndian.Uint32(q[4:])
			db := float32(d*(0.5+float32(aux>>28))) * 0.25
			for l := range 4 {
				e := iq2xxsGrid[q[l]]
				signs := ksignsIQ2[aux>>(7*l)&127]
				y := dst[256*i+32*g+8*l:]
				for j := range 8 {
					y[j] = iqSigned(db*float32(gridByte(e, j)), signs, j)
				}
			}
		}
	}
}

func dequantIQ2XS(src []byte, dst []float32) {
	for i := range len(dst) / 256 {
		b := (*[sizeIQ2XS]byte)(src[i*sizeIQ2XS:])
		d := f16(b[0:])
		for g := range 8 {
			sc := b[66+g]
			db := [2]float32{float32(d*(0.5+float32(sc&15))) * 0.25, float32(d*(0.5+float32(sc>>4))) * 0.25}
			for l := range 4 {
				q := binary.LittleEndian.Uint16(b[2+8*g+2*l:])
				e := iq2xsGrid[q&511]
				signs := ksignsIQ2[q>>9]
				y := dst[256*i+32*g+8*l:]
				for j := range 8 {
					y[j] = iqSigned(db[l/2]*float32(gridByte(e, j)), signs, j)
				}
			}
		}
	}
}

func dequantIQ2S(src []byte, dst []float32) {
	for i := range len(dst) / 256 {
		b := (*[sizeIQ2S]byte)(src[i*sizeIQ2S:])
		d := f16(b[0:])
		qs, signs, qh, scales := b[2:34], b[34:66], b[66:74], b[74:82]
		for g := range 8 {
			sc := scales[g]
			db := [2]float32{float32(d*(0.5+float32(sc&15))) * 0.25, float32(d*(0.5+float32(sc>>4))) * 0.25}
			for l := range 4 {
				e := iq2sGrid[int(qs[4*g+l])|int(qh[g])<<(8-2*l)&0x300]
				y := dst[256*i+32*g+8*l:]
				for j := range 8 {
					y[j] = iqSigned(db[l/2]*float32(gridByte(e, j)), signs[4*g+l], j)
				}
			}
		}
	}
}

func dequantIQ3XXS(src []byte, dst []float32) {
	for i := range len(dst) / 256 {
		b := (*[sizeIQ3XXS]byte)(src[i*sizeIQ3XXS:])
		d := f16(b[0:])
		qs := b[2:66]
		for g := range 8 {
			aux := binary.LittleEndian.Uint32(b[66+4*g:])
			db := float32(d*(0.5+float32(aux>>28))) * 0.5
			for l := range 4 {
				signs := ksignsIQ2[aux>>(7*l)&127]
				e1, e2 := iq3xxsGrid[qs[8*g+2*l]], iq3xxsGrid[qs[8*g+2*l+1]]
				y := dst[256*i+32*g+8*l:]
				for j := range 4 {
					y[j] = iqSigned(db*float32(gridByte(e1, j)), signs, j)
					y[j+4] = iqSigned(db*float32(gridByte(e2, j)), signs, j+4)
				}
			}
		}
	}
}

func dequantIQ3S(src []byte, dst []float32) {
	for i := range len(dst) / 256 {
		b := (*[sizeIQ3S]byte)(src[i*sizeIQ3S:])
		d := f16(b[0:])
		qs, qh, signs, scales := b[2:66], b[66:74], b[74:106], b[106:110]
		for g := range 8 {
			s := scales[g/2] >> (4 * (g % 2)) & 15
			db := d * float32(1+2*int(s))
			for l := range 4 {
				i1 := int(qs[8*g+2*l]) | int(qh[g])<<(8-2*l)&256
				i2 := int(qs[8*g+2*l+1]) | int(qh[g])<<(7-2*l)&256
				e1, e2 := iq3sGrid[i1], iq3sGrid[i2]
				sg := signs[4*g+l]
				y := dst[256*i+32*g+8*l:]
				for j := range 4 {
					y[j] = iqSigned(db*float32(gridByte(e1, j)), sg, j)
					y[j+4] = iqSigned(db*float32(gridByte(e2, j)), sg, j+4)
				}
			}
		}
	}
}

func dequantIQ1S(src []byte, dst []float32) {
	for i := range len(dst) / 256 {
		b := (*[sizeIQ1S]byte)(src[i*sizeIQ1S:])
		d := f16(b[0:])
		for g := range 8 {
			qh := binary.LittleEndian.Uint16(b[34+2*g:])
			dl := d * float32(2*int(qh>>12&7)+1)
			delta := float32(iq1Delta)
			if qh&0x8000 != 0 {
				delta = -iq1Delta
			}
			for l := range 4 {
				e := iq1sGrid[int(b[2+4*g+l])|int(qh>>(3*l)&7)<<8]
				y := dst[256*i+32*g+8*l:]
				for j := range 8 {
					y[j] = dl * (float32(int8(gridByte(e, j))) + delta)
				}
			}
		}
	}
}

// iq1mScale returns IQ1_M's block scale d and its four scale words.
func iq1mScale(b *[sizeIQ1M]byte) (float32, [4]uint16) {
	var sc [4]uint16
	for k := range sc {
		sc[k] = binary.LittleEndian.Uint16(b[48+2*k:])
	}
	h := sc[0]>>12 | sc[1]>>8&0x00f0 | sc[2]>>4&0x0f00 | sc[3]&0xf000
	return F16ToF32(h), sc
}

// iq1mIndex returns the grid index and the δ sign of value group l (of 8
// values, 0..3) of IQ1_M group g.
func iq1mIndex(b *[sizeIQ1M]byte, g, l int) (idx int, negDelta bool) {
	h := b[32+2*g+l/2]
	hi := h
	if l%2 == 1 {
		hi >>= 4
	}
	return int(b[4*g+l]) | int(hi&7)<<8, hi&8 != 0
}

func dequantIQ1M(src []byte, dst []float32) {
	for i := range len(dst) / 256 {
		b := (*[sizeIQ1M]byte)(src[i*sizeIQ1M:])
		d, sc := iq1mScale(b)
		for g := range 8 {
			w := sc[g/2] >> (6 * (g % 2))
			dl := [2]float32{d * float32(2*int(w&7)+1), d * float32(2*int(w>>3&7)+1)}
			for l := range 4 {
				idx, neg := iq1mIndex(b, g, l)
				delta := float32(iq1Delta)
				if neg {
					delta = -iq1Delta
				}
				e := iq1sGrid[idx]
				y := dst[256*i+32*g+8*l:]
				for j := range 8 {
					y[j] = dl[l/2] * (float32(int8(gridByte(e, j))) + delta)
				}
			}
		}
	}
}
