package tensor

import (
	"encoding/binary"
	"math"
)

// The pure-Go twins of the dot product kernels: always built, used where no
// assembly exists, and the definition of what the assembly computes. Each
// follows the matching ggml_vec_dot_*_generic function of ggml-cpu/quants.c:
// integer sums per block, then float32 scaling and accumulation in the same
// order. Explicit float32 conversions around products keep the compiler from
// fusing a multiply and an add (the Go spec allows fusion otherwise).
// x is the weight row, y the activation row, nb the number of blocks.

// dotF16At returns the float16 at b[off:] as a float32.
func dotF16At(b []byte, off int) float32 {
	return F16ToF32(binary.LittleEndian.Uint16(b[off:]))
}

// dotQ80Q80Generic: sumf += sumi·(dx·dy) per block.
func dotQ80Q80Generic(x, y []byte, nb int) float32 {
	var sumf float32
	for i := range nb {
		xb := (*[dotSizeQ80]byte)(x[i*dotSizeQ80:])
		yb := (*[dotSizeQ80]byte)(y[i*dotSizeQ80:])
		var sumi int32
		for j := 2; j < dotSizeQ80; j++ {
			sumi += int32(int8(xb[j])) * int32(int8(yb[j]))
		}
		sumf += float32(float32(sumi) * float32(dotF16At(xb[:], 0)*dotF16At(yb[:], 0)))
	}
	return sumf
}

// dotQ40Q80Generic: sumf += sumi·dx·dy (left to right) per block, with the
// weights (q & 15) − 8 and (q >> 4) − 8.
func dotQ40Q80Generic(x, y []byte, nb int) float32 {
	var sumf float32
	for i := range nb {
		xb := (*[dotSizeQ40]byte)(x[i*dotSizeQ40:])
		yb := (*[dotSizeQ80]byte)(y[i*dotSizeQ80:])
		var sumi0, sumi1 int32
		for j := range 16 {
			q := xb[2+j]
			sumi0 += (int32(q&15) - 8) * int32(int8(yb[2+j]))
			sumi1 += (int32(q>>4) - 8) * int32(int8(yb[2+16+j]))
		}
		sumi := sumi0 + sumi1
		sumf += float32(float32(float32(sumi)*dotF16At(xb[:], 0)) * dotF16At(yb[:], 0))
	}
	return sumf
}

// dotQ50Q80Generic: as Q4_0 with a fifth bit from qh and an offset of 16;
// sumf += (dx·dy)·sumi per block.
func dotQ50Q80Generic(x, y []byte, nb int) float32 {
	var sumf float32
	for i := range nb {
		xb := (*[dotSizeQ50]byte)(x[i*dotSizeQ50:])
		yb := (*[dotSizeQ80]byte)(y[i*dotSizeQ80:])
		qh := binary.LittleEndian.Uint32(xb[2:])
		var sumi0, sumi1 int32
		for j := range 16 {
			q := xb[6+j]
			x0 := int32(q&15|byte(qh>>j&1)<<4) - 16
			x1 := int32(q>>4|byte(qh>>(j+16)&1)<<4) - 16
			sumi0 += x0 * int32(int8(yb[2+j]))
			sumi1 += x1 * int32(int8(yb[2+16+j]))
		}
		sumi := sumi0 + sumi1
		sumf += float32(float32(dotF16At(xb[:], 0)*dotF16At(yb[:], 0)) * float32(sumi))
	}
	return sumf
}

// dotQ41Q81Generic: unsigned nibble weights with a min;
// sumf += (dx·dy)·sumi + mx·sy per block, sy the activation block's f16 d·Σq.
func dotQ41Q81Generic(x, y []byte, nb int) float32 {
	var sumf float32
	for i := range nb {
		xb := (*[dotSizeQ41]byte)(x[i*dotSizeQ41:])
		yb := (*[dotSizeQ81]byte)(y[i*dotSizeQ81:])
		var sumi0, sumi1 int32
		for j := range 16 {
			q := xb[4+j]
			sumi0 += int32(q&15) * int32(int8(yb[4+j]))
			sumi1 += int32(q>>4) * int32(int8(yb[4+16+j]))
		}
		sumi := sumi0 + sumi1
		dd := dotF16At(xb[:], 0) * dotF16At(yb[:], 0)
		sumf += float32(float32(dd*float32(sumi)) + float32(dotF16At(xb[:], 2)*dotF16At(yb[:], 2)))
	}
	return sumf
}

// dotQ51Q81Generic: as Q4_1 with a fifth bit from qh.
func dotQ51Q81Generic(x, y []byte, nb int) float32 {
	var sumf float32
	for i := range nb {
		xb := (*[dotSizeQ51]byte)(x[i*dotSizeQ51:])
		yb := (*[dotSizeQ81]byte)(y[i*dotSizeQ81:])
		qh := binary.LittleEndian.Uint32(xb[4:])
		var sumi0, sumi1 int32
		for j := range 16 {
			q := xb[8+j]
			x0 := int32(q&15 | byte(qh>>j&1)<<4)
			x1 := int32(q>>4 | byte(qh>>(j+16)&1)<<4)
			sumi0 += x0 * int32(int8(yb[4+j]))
			sumi1 += x1 * int32(int8(yb[4+16+j]))
		}
		sumi := sumi0 + sumi1
		dd := dotF16At(xb[:], 0) * dotF16At(yb[:], 0)
		sumf += float32(float32(dd*float32(sumi)) + float32(dotF16At(xb[:], 2)*dotF16At(yb[:], 2)))
	}
	return sumf
}

// dotIQ4NLQ80Generic: weights from the IQ4_NL codebook;
// sumf += (dy·dx)·sumi per block.
func dotIQ4NLQ80Generic(x, y []byte, nb int) float32 {
	var sumf float32
	for i := range nb {
		xb := (*[dotSizeIQNL]byte)(x[i*dotSizeIQNL:])
		yb := (*[dotSizeQ80]byte)(y[i*dotSizeQ80:])
		d := dotF16At(yb[:], 0) * dotF16At(xb[:], 0)
		var sumi1, sumi2 int32
		for j := range 16 {
			q := xb[2+j]
			sumi1 += int32(int8(yb[2+j])) * int32(kvaluesIQ4NL[q&15])
			sumi2 += int32(int8(yb[2+16+j])) * int32(kvaluesIQ4NL[q>>4])
		}
		sumf += float32(d * float32(sumi1+sumi2))
	}
	return sumf
}

// dotScalesK4 unpacks the eight 6-bit scales and mins of a Q4_K or Q5_K
// block from its 12 packed bytes.
func dotScalesK4(s []byte) (sc, m [8]int32) {
	for j := range 4 {
		sc[j] = int32(s[j] & 63)
		m[j] = int32(s[j+4] & 63)
		sc[j+4] = int32(s[j+8]&15 | s[j]>>6<<4)
		m[j+4] = int32(s[j+8]>>4 | s[j+4]>>6<<4)
	}
	return sc, m
}

// dotQ8KD returns the float32 scale of the Q8_K block at y[off:].
func dotQ8KD(y []byte, off int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(y[off:]))
}

// dotQ8KBsum returns bsums[k] of the Q8_K block yb.
func dotQ8KBsum(yb *[dotSizeQ8K]byte, k int) int32 {
	return int32(int16(binary.LittleEndian.Uint16(yb[260+2*k:])))
}

// dotKFinish is the float tail shared by the K-quant twins: the eight lane
// sums are added to sumf in order.
func dotKFinish(sumf float32, sums *[8]float32) float32 {
	for _, s := range sums {
		sumf += s
	}
	return sumf
}

// dotQ2KQ8KGeneric sums each block's integer products per sub-block of 16
// (scale sc&15, min sc>>4): sumf += d·dy·Σ sc·Σ q·a − dmin·dy·Σ m·bsums.
func dotQ2KQ8KGeneric(x, y []byte, nb int) float32 {
	var sumf float32
	for i := range nb {
		xb := (*[dotSizeQ2K]byte)(x[i*dotSizeQ2K:])
		yb := (*[dotSizeQ8K]byte)(y[i*dotSizeQ8K:])
		var summ, isum int32
		for k := range 16 {
			summ += dotQ8KBsum(yb, k) * int32(xb[k]>>4)
		}
		for h := range 2 {
			qs := xb[16+32*h : 48+32*h]
			for p := range 4 {
				shift := 2 * p
				for half := range 2 {
					sub := 8*h + 2*p + half
					a := yb[4+16*sub : 20+16*sub]
					var s int32
					for l := range 16 {
						s += int32(int8(a[l])) * int32(qs[16*half+l]>>shift&3)
					}
					isum += int32(xb[sub]&15) * s
				}
			}
		}
		dy := dotQ8KD(yb[:], 0)
		dall := dotF16At(xb[:], 80) * dy
		dmin := dotF16At(xb[:], 82) * dy
		sumf += float32(dall*float32(isum)) - float32(dmin*float32(summ))
	}
	return sumf
}

// dotQ3KQ8KGeneric keeps eight float lanes as dotQ4KQ8KGeneric does: lane l
// sums d·dy·aux32[l], where aux32[l] collects (S−32)·v·a over the elements
// whose index is l modulo 8, v = q − 4 where the hmask bit is clear.
func dotQ3KQ8KGeneric(x, y []byte, nb int) float32 {
	var sums [8]float32
	for i := range nb {
		xb := (*[dotSizeQ3K]byte)(x[i*dotSizeQ3K:])
		yb := (*[dotSizeQ8K]byte)(y[i*dotSizeQ8K:])
		sc := xb[96:108]
		var aux32 [8]int32
		for h := range 2 {
			qs := xb[32+32*h : 64+32*h]
			for p := range 4 {
				shift, hb := 2*p, 4*h+p
				for half := range 2 {
					sub := 8*h + 2*p + half
					lo := sc[sub%8] >> (4 * (sub / 8)) & 15
					hi := sc[8+sub%4] >> (2 * (sub / 4)) & 3
					scale := int32(lo|hi<<4) - 32
					a := yb[4+16*sub : 20+16*sub]
					for l := range 16 {
						v := int32(qs[16*half+l]>>shift&3) - int32(^xb[16*half+l]>>hb&1)<<2
						aux32[l%8] += scale * (v * int32(int8(a[l])))
					}
				}
			}
		}
		d := dotF16At(xb[:], 108) * dotQ8KD(yb[:], 0)
		for l := range sums {
			sums[l] += float32(d * float32(aux32[l]))
		}
	}
	return dotKFinish(0, &sums)
}

// dotQ4KQ8KGeneric keeps ggml's eight float lanes: lane l sums
// d·aux32[l], where aux32[l] collects sc_j·x·y over the elements whose index
// is l modulo 8; the mins enter through the activation's bsums as
// sumf −= dmin·Σ m_j·(bsums[2j] + bsums[2j+1]).
func dotQ4KQ8KGeneric(x, y []byte, nb int) float32 {
	var sums [8]float32
	var sumf float32
	for i := range nb {
		xb := (*[dotSizeQ4K]byte)(x[i*dotSizeQ4K:])
		yb := (*[dotSizeQ8K]byte)(y[i*dotSizeQ8K:])
		sc, m := dotScalesK4(xb[4:16])
		var summ int32
		for k := range 16 {
			summ += dotQ8KBsum(yb, k) * m[k/2]
		}
		var aux32 [8]int32
		for j := range 8 { // sub-blocks of 32
			qs := xb[16+32*(j/2):]
			shift := 4 * (j % 2)
			for l := range 32 {
				a := int32(qs[l] >> shift & 15)
				aux32[l%8] += sc[j] * (a * int32(int8(yb[4+32*j+l])))
			}
		}
		dy := dotQ8KD(yb[:], 0)
		d := dotF16At(xb[:], 0) * dy
		for l := range sums {
			sums[l] += float32(d * float32(aux32[l]))
		}
		dmin := dotF16At(xb[:], 2) * dy
		sumf -= float32(dmin * float32(summ))
	}
	return dotKFinish(sumf, &sums)
}

// dotQ5KQ8KGeneric is dotQ4KQ8KGeneric with the fifth bit of each weight
// taken from qh (bit j of qh[l] for sub-block j).
func dotQ5KQ8KGeneric(x, y []byte, nb int) float32 {
	var sums [8]float32
	var sumf float32
	for i := range nb {
		xb := (*[dotSizeQ5K]byte)(x[i*dotSizeQ5K:])
		yb := (*[dotSizeQ8K]byte)(y[i*dotSizeQ8K:])
		sc, m := dotScalesK4(xb[4:16])
		var summ int32
		for k := range 16 {
			summ += dotQ8KBsum(yb, k) * m[k/2]
		}
		var aux32 [8]int32
		for j := range 8 {
			qs := xb[48+32*(j/2):]
			shift := 4 * (j % 2)
			for l := range 32 {
				a := int32(qs[l]>>shift&15) | int32(xb[16+l]>>j&1)<<4
				aux32[l%8] += sc[j] * (a * int32(int8(yb[4+32*j+l])))
			}
		}
		dy := dotQ8KD(yb[:], 0)
		d := dotF16At(xb[:], 0) * dy
		for l := range sums {
			sums[l] += float32(d * float32(aux32[l]))
		}
		dmin := dotF16At(xb[:], 2) * dy
		sumf -= float32(dmin * float32(summ))
	}
	return dotKFinish(sumf, &sums)
}

// dotQ6KQ8KGeneric: weights q − 32 with q six bits from ql and qh, sixteen
// int8 scales of 16 elements each, eight float lanes as in Q4_K.
func dotQ6KQ8KGeneric(x, y []byte, nb int) float32 {
	var sums [8]float32
	for i := range nb {
		xb := (*[dotSizeQ6K]byte)(x[i*dotSizeQ6K:])
		yb := (*[dotSizeQ8K]byte)(y[i*dotSizeQ8K:])
		q := q6kQuants(xb[:])
		var aux32 [8]int32
		for k := range 256 {
			scale := int32(int8(xb[192+k/16]))
			aux32[k%8] += scale * ((int32(q[k]) - 32) * int32(int8(yb[4+k])))
		}
		d := dotF16At(xb[:], 208) * dotQ8KD(yb[:], 0)
		for l := range sums {
			sums[l] += float32(d * float32(aux32[l]))
		}
	}
	return dotKFinish(0, &sums)
}

// dotIQ4XSQ8KGeneric: codebook weights with a 6-bit scale ls − 32 per
// sub-block of 32; sumf += d4d8·(ls − 32) · sumi per sub-block.
func dotIQ4XSQ8KGeneric(x, y []byte, nb int) float32 {
	var sumf float32
	for i := range nb {
		xb := (*[dotSizeIQXS]byte)(x[i*dotSizeIQXS:])
		yb := (*[dotSizeQ8K]byte)(y[i*dotSizeQ8K:])
		d4d8 := dotF16At(xb[:], 0) * dotQ8KD(yb[:], 0)
		h := binary.LittleEndian.Uint16(xb[2:])
		for j := range 8 {
			ls := int32(xb[4+j/2]>>(4*(j%2))&15) | int32(h>>(2*j)&3)<<4
			dl := d4d8 * float32(ls-32)
			qs := xb[8+16*j:]
			q8 := yb[4+32*j:]
			var sumi1, sumi2 int32
			for l := range 16 {
				sumi1 += int32(int8(q8[l])) * int32(kvaluesIQ4NL[qs[l]&15])
				sumi2 += int32(int8(q8[l+16])) * int32(kvaluesIQ4NL[qs[l]>>4])
			}
			sumf += float32(dl * float32(sumi1+sumi2))
		}
	}
	return sumf
}

// The float twins follow ggml_vec_dot_f32's generic loop: each product is
// rounded to float32 and the sum is kept in float64.

func dotF32At(b []byte, i int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
}

func dotF32F32Generic(x, y []byte, n int) float32 {
	var sum float64
	for i := range n {
		sum += float64(float32(dotF32At(x, i) * dotF32At(y, i)))
	}
	return float32(sum)
}

func dotF16F32Generic(x, y []byte, n int) float32 {
	var sum float64
	for i := range n {
		sum += float64(float32(dotF16At(x, 2*i) * dotF32At(y, i)))
	}
	return float32(sum)
}

func dotBF16F32Generic(x, y []byte, n int) float32 {
	var sum float64
	for i := range n {
		w := math.Float32frombits(uint32(binary.LittleEndian.Uint16(x[2*i:])) << 16)
		sum += float64(float32(w * dotF32At(y, i)))
	}
	return float32(sum)
}
