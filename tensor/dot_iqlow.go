package tensor

import "encoding/binary"

// Dot products of the 1- to 3-bit i-quants (iqlow.go) with Q8_K
// activations. Each group of 32 values sums its integer products with the
// activation bytes, times the group's odd integer scale 2s+1 (the float
// scales d·(0.5+s)·0.25 and d·(0.5+s)·0.5 are d·(2s+1)/8 and d·(2s+1)/4);
// a block adds dx·dy·Σ to the float32 sum, and the row's sum is multiplied
// by the common 1/8 or 1/4 at the end, as ggml's generic loops do. IQ1_S
// and IQ1_M add the shift δ = ±1/8 as δ·Σa over the activation block sums
// (bsums), in the same float expression.

// Block sizes of the i-quants (the dequantizers' names, for the kernels).
const (
	dotSizeIQ2XXS = sizeIQ2XXS
	dotSizeIQ2XS  = sizeIQ2XS
	dotSizeIQ2S   = sizeIQ2S
	dotSizeIQ3XXS = sizeIQ3XXS
	dotSizeIQ3S   = sizeIQ3S
	dotSizeIQ1S   = sizeIQ1S
	dotSizeIQ1M   = sizeIQ1M
)

// dotGrid8 returns Σ±grid[j]·a[j] over the 8 values of one grid entry,
// value j negated where bit j of signs is set.
func dotGrid8(e uint64, signs uint8, a []byte) int32 {
	a = a[:8]
	var s int32
	for j := range 8 {
		v := int32(uint8(e>>(8*j))) * int32(int8(a[j]))
		if signs>>j&1 != 0 {
			v = -v
		}
		s += v
	}
	return s
}

// dotGrid4 is dotGrid8 for a 4-value entry and signs bits 0..3.
func dotGrid4(e uint32, signs uint8, a []byte) int32 {
	a = a[:4]
	var s int32
	for j := range 4 {
		v := int32(uint8(e>>(8*j))) * int32(int8(a[j]))
		if signs>>j&1 != 0 {
			v = -v
		}
		s += v
	}
	return s
}

// dotGridSigned8 returns Σ grid[j]·a[j] for an entry of int8 values
// (IQ1_S's −1/0/+1).
func dotGridSigned8(e uint64, a []byte) int32 {
	a = a[:8]
	var s int32
	for j := range 8 {
		s += int32(int8(e>>(8*j))) * int32(int8(a[j]))
	}
	return s
}

func dotIQ2XXSQ8KGeneric(x, y []byte, nb int) float32 {
	var sumf float32
	for i := range nb {
		xb := (*[dotSizeIQ2XXS]byte)(x[i*dotSizeIQ2XXS:])
		yb := (*[dotSizeQ8K]byte)(y[i*dotSizeQ8K:])
		d := dotF16At(xb[:], 0) * dotQ8KD(yb[:], 0)
		var bsum int32
		for g := range 8 {
			q := xb[2+8*g:]
			aux := binary.LittleEndian.Uint32(q[4:])
			var sumi int32
			for l := range 4 {
				sumi += dotGrid8(iq2xxsGrid[q[l]], ksignsIQ2[aux>>(7*l)&127], yb[4+32*g+8*l:])
			}
			bsum += sumi * int32(2*(aux>>28)+1)
		}
		sumf += float32(d * float32(bsum))
	}
	return 0.125 * sumf
}

func dotIQ2XSQ8KGeneric(x, y []byte, nb int) float32 {
	var sumf float32
	for i := range nb {
		xb := (*[dotSizeIQ2XS]byte)(x[i*dotSizeIQ2XS:])
		yb := (*[dotSizeQ8K]byte)(y[i*dotSizeQ8K:])
		d := dotF16At(xb[:], 0) * dotQ8KD(yb[:], 0)
		var bsum int32
		for g := range 8 {
			sc := xb[66+g]
			var sumi [2]int32
			for l := range 4 {
				q := binary.LittleEndian.Uint16(xb[2+8*g+2*l:])
				sumi[l/2] += dotGrid8(iq2xsGrid[q&511], ksignsIQ2[q>>9], yb[4+32*g+8*l:])
			}
			bsum += sumi[0]*int32(2*(sc&15)+1) + sumi[1]*int32(2*(sc>>4)+1)
		}
		sumf += float32(d * float32(bsum))
	}
	return 0.125 * sumf
}

func dotIQ2SQ8KGeneric(x, y []byte, nb int) float32 {
	var sumf float32
	for i := range nb {
		xb := (*[dotSizeIQ2S]byte)(x[i*dotSizeIQ2S:])
		yb := (*[dotSizeQ8K]byte)(y[i*dotSizeQ8K:])
		d := dotF16At(xb[:], 0) * dotQ8KD(yb[:], 0)
		qs, signs, qh, scales := xb[2:34], xb[34:66], xb[66:74], xb[74:82]
		var bsum int32
		for g := range 8 {
			sc := scales[g]
			var sumi [2]int32
			for l := range 4 {
				e := iq2sGrid[int(qs[4*g+l])|int(qh[g])<<(8-2*l)&0x300]
				sumi[l/2] += dotGrid8(e, signs[4*g+l], yb[4+32*g+8*l:])
			}
			bsum += sumi[0]*int32(2*(sc&15)+1) + sumi[1]*int32(2*(sc>>4)+1)
		}
		sumf += float32(d * float32(bsum))
	}
	return 0.125 * sumf
}

func dotIQ3XXSQ8KGeneric(x, y []byte, nb int) float32 {
	var sumf float32
	for i := range nb {
		xb := (*[dotSizeIQ3XXS]byte)(x[i*dotSizeIQ3XXS:])
		yb := (*[dotSizeQ8K]byte)(y[i*dotSizeQ8K:])
		d := dotF16At(xb[:], 0) * dotQ8KD(yb[:], 0)
		qs := xb[2:66]
		var bsum int32
		for g := range 8 {
			aux := binary.LittleEndian.Uint32(xb[66+4*g:])
			var sumi int32
			for l := range 4 {
				signs := ksignsIQ2[aux>>(7*l)&127]
				a := yb[4+32*g+8*l:]
				sumi += dotGrid4(iq3xxsGrid[qs[8*g+2*l]], signs, a) +
					dotGrid4(iq3xxsGrid[qs[8*g+2*l+1]], signs>>4, a[4:])
			}
			bsum += sumi * int32(2*(aux>>28)+1)
		}
		sumf += float32(d * float32(bsum))
	}
	return 0.25 * sumf
}

func dotIQ3SQ8KGeneric(x, y []byte, nb int) float32 {
	var sumf float32
	for i := range nb {
		xb := (*[dotSizeIQ3S]byte)(x[i*dotSizeIQ3S:])
		yb := (*[dotSizeQ8K]byte)(y[i*dotSizeQ8K:])
		d := dotF16At(xb[:], 0) * dotQ8KD(yb[:], 0)
		qs, qh, signs, scales := xb[2:66], xb[66:74], xb[74:106], xb[106:110]
		var bsum int32
		for g := range 8 {
			var sumi int32
			for l := range 4 {
				i1 := int(qs[8*g+2*l]) | int(qh[g])<<(8-2*l)&256
				i2 := int(qs[8*g+2*l+1]) | int(qh[g])<<(7-2*l)&256
				a := yb[4+32*g+8*l:]
				sg := signs[4*g+l]
				sumi += dotGrid4(iq3sGrid[i1], sg, a) + dotGrid4(iq3sGrid[i2], sg>>4, a[4:])
			}
			bsum += sumi * int32(1+2*(scales[g/2]>>(4*(g%2))&15))
		}
		sumf += float32(d * float32(bsum))
	}
	return sumf
}

func dotIQ1SQ8KGeneric(x, y []byte, nb int) float32 {
	var sumf float32
	for i := range nb {
		xb := (*[dotSizeIQ1S]byte)(x[i*dotSizeIQ1S:])
		yb := (*[dotSizeQ8K]byte)(y[i*dotSizeQ8K:])
		var sumi, sumi1 int32
		for g := range 8 {
			qh := binary.LittleEndian.Uint16(xb[34+2*g:])
			ls := int32(2*(qh>>12&7) + 1)
			var lsum int32
			for l := range 4 {
				e := iq1sGrid[int(xb[2+4*g+l])|int(qh>>(3*l)&7)<<8]
				lsum += dotGridSigned8(e, yb[4+32*g+8*l:])
			}
			delta := int32(1)
			if qh&0x8000 != 0 {
				delta = -1
			}
			sumi += ls * lsum
			sumi1 += ls * delta * (dotQ8KBsum(yb, 2*g) + dotQ8KBsum(yb, 2*g+1))
		}
		d := dotF16At(xb[:], 0) * dotQ8KD(yb[:], 0)
		sumf += float32(d * float32(float32(sumi)+float32(iq1Delta*float32(sumi1))))
	}
	return sumf
}

func dotIQ1MQ8KGeneric(x, y []byte, nb int) float32 {
	var sumf float32
	for i := range nb {
		xb := (*[dotSizeIQ1M]byte)(x[i*dotSizeIQ1M:])
		yb := (*[dotSizeQ8K]byte)(y[i*dotSizeQ8K:])
		dx, sc := iq1mScale(xb)
		var sumi1, sumi2 int32
		for g := range 8 {
			w := sc[g/2] >> (6 * (g % 2))
			ls := [2]int32{int32(2*(w&7) + 1), int32(2*(w>>3&7) + 1)}
			for l := range 4 {
				idx, neg := iq1mIndex(xb, g, l)
				a := yb[4+32*g+8*l:]
				var asum int32
				for _, v := range a[:8] {
					asum += int32(int8(v))
				}
				if neg {
					asum = -asum
				}
				sumi1 += ls[l/2] * dotGridSigned8(iq1sGrid[idx], a)
				sumi2 += ls[l/2] * asum
			}
		}
		d := dx * dotQ8KD(yb[:], 0)
		sumf += float32(d * float32(float32(sumi1)+float32(iq1Delta*float32(sumi2))))
	}
	return sumf
}
