package tensor

import (
	"encoding/binary"
	"math"
)

// Reference quantizers for Q4_K, Q5_K and Q6_K. They follow the search that
// ggml's reference quantizers use (a weighted least-squares fit of scale and
// min over a few candidate grids, then 6- or 8-bit scales relative to one
// f16 super-scale), written afresh, step by step and with ggml's float32
// rounding, so that they give ggml's bytes: llama-quantize's output without
// an importance matrix (checked by cmd/glmrun's quantize tests).

// groupMaxEps is the magnitude below which a group is treated as all zero.
const groupMaxEps = 1e-15

// fitScaleMin quantizes x to levels 0…nmax as x ≈ scale·L − negMin, where
// the offset −negMin ≤ 0. Each element's error counts with weight w. It
// starts from the plain min/max grid, then tries nstep+1 grids whose range
// is stretched by rmin + rdelta·k levels, refitting scale and offset by
// weighted least squares for each, and keeps the fit with the smallest
// weighted squared error. As in ggml's search, each grid after an
// improvement is laid from the improved offset rather than from the
// minimum, and every product is rounded to float32 before it is added
// (explicit conversions stop the compiler fusing them into multiply-adds),
// so that the result is ggml's bit for bit. L and aux must have len(x)
// elements.
func fitScaleMin(x, w []float32, L, aux []uint8, nmax int32, rmin, rdelta float32, nstep int) (scale, negMin float32) {
	lo, hi := x[0], x[0]
	var sumW, sumX float32
	for i, v := range x {
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
		sumW += w[i]
		sumX += float32(w[i] * v)
	}
	if lo > 0 {
		lo = 0
	}
	if hi == lo {
		clear(L)
		return 0, -lo
	}
	// off is the offset of the best fit so far; the grids start from it.
	off := lo
	quant := func(iscale float32, out []uint8) {
		for i, v := range x {
			out[i] = uint8(min(nmax, max(0, nearestInt(float32(iscale*(v-off))))))
		}
	}
	errOf := func(scale, off float32, l []uint8) float32 {
		var e float32
		for i, v := range x {
			diff := float32(scale*float32(l[i])) + off - v
			e += float32(w[i] * float32(diff*diff))
		}
		return e
	}
	iscale := float32(nmax) / (hi - off)
	scale = 1 / iscale
	quant(iscale, L)
	best := errOf(scale, off, L)
	for k := 0; k <= nstep; k++ {
		iscale := (float32(rmin+float32(rdelta*float32(k))) + float32(nmax)) / (hi - off)
		quant(iscale, aux)
		var sumL, sumL2, sumXL float32
		for i, v := range x {
			l := float32(aux[i])
			wl := float32(w[i] * l)
			sumL += wl
			sumL2 += float32(wl * l)
			sumXL += float32(wl * v)
		}
		det := float32(sumW*sumL2) - float32(sumL*sumL)
		if det <= 0 {
			continue
		}
		s := (float32(sumW*sumXL) - float32(sumX*sumL)) / det
		o := (float32(sumL2*sumX) - float32(sumL*sumXL)) / det
		if o > 0 {
			o, s = 0, sumXL/sumL2
		}
		if e := errOf(s, o, aux); e < best {
			copy(L, aux)
			best, scale, off = e, s, o
		}
	}
	return scale, -off
}

// fitSymmetric quantizes x to levels −nmax…nmax−1 (stored in L shifted by
// nmax) as x ≈ scale·(L − nmax), choosing the scale among 19 grids around
// −nmax/max that maximises the x²-weighted fit. It returns the scale, which
// is negative when the largest-magnitude element is positive.
func fitSymmetric(x []float32, L []uint8, nmax int32) float32 {
	var amax, vmax float32
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, vmax = a, v
		}
	}
	if amax < groupMaxEps {
		clear(L)
		return 0
	}
	fit := func(iscale float32, out []uint8) (sumLX, sumL2 float32) {
		for i, v := range x {
			l := min(nmax-1, max(-nmax, nearestInt(iscale*v)))
			if out != nil {
				out[i] = uint8(l + nmax)
			}
			w := v * v
			sumLX += float32(w * v * float32(l))
			sumL2 += float32(w * float32(l) * float32(l))
		}
		return sumLX, sumL2
	}
	iscale := -float32(nmax) / vmax
	sumLX, sumL2 := fit(iscale, L)
	var scale float32
	if sumL2 > 0 {
		scale = sumLX / sumL2
	}
	best := scale * sumLX
	for k := -9; k <= 9; k++ {
		if k == 0 {
			continue
		}
		iscale := -(float32(nmax) + 0.1*float32(k)) / vmax
		sumLX, sumL2 := fit(iscale, nil)
		if sumL2 > 0 && sumLX*sumLX > best*sumL2 {
			fit(iscale, L)
			scale = sumLX / sumL2
			best = scale * sumLX
		}
	}
	return scale
}

// quantKScaleMin quantizes one 256-element block into Q4_K (nmax 15) or
// Q5_K (nmax 31) values L (0…nmax) and writes d, dmin and the packed scales
// to b[0:16].
func quantKScaleMin(x *[256]float32, b []byte, L *[256]uint8, nmax int32, rmin, rdelta float32, nstep int) {
	var scales, mins [8]float32
	var w [32]float32
	var aux [32]uint8
	var maxScale, maxMin float32
	for j := range 8 {
		xs := x[32*j : 32*j+32]
		var sum2 float32
		for _, v := range xs {
			sum2 += float32(v * v)
		}
		av := float32(math.Sqrt(float64(sum2 / 32)))
		for l, v := range xs {
			w[l] = av + abs32(v)
		}
		scales[j], mins[j] = fitScaleMin(xs, w[:], L[32*j:32*j+32], aux[:], nmax, rmin, rdelta, nstep)
		if scales[j] > maxScale {
			maxScale = scales[j]
		}
		if mins[j] > maxMin {
			maxMin = mins[j]
		}
	}
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	var sc, m [8]byte
	for j := range 8 {
		sc[j] = byte(min(63, max(0, nearestInt(invScale*scales[j]))))
		m[j] = byte(min(63, max(0, nearestInt(invMin*mins[j]))))
	}
	dh, dminh := F32ToF16(maxScale/63), F32ToF16(maxMin/63)
	binary.LittleEndian.PutUint16(b[0:], dh)
	binary.LittleEndian.PutUint16(b[2:], dminh)
	putScaleMinK4((*[12]byte)(b[4:]), &sc, &m)
	// Requantize with the rounded scales so that L matches what a reader
	// reconstructs.
	d, dmin := F16ToF32(dh), F16ToF32(dminh)
	for j := range 8 {
		dl := d * float32(sc[j])
		if dl == 0 {
			continue
		}
		ml := dmin * float32(m[j])
		for l := 32 * j; l < 32*j+32; l++ {
			L[l] = uint8(min(nmax, max(0, nearestInt((x[l]+ml)/dl))))
		}
	}
}

func quantQ4K(src []float32, dst []byte) {
	var L [256]uint8
	for i := range len(src) / 256 {
		x := (*[256]float32)(src[i*256:])
		b := (*[sizeQ4K]byte)(dst[i*sizeQ4K:])
		quantKScaleMin(x, b[:], &L, 15, -1, 0.1, 20)
		for c := range 4 {
			qs := (*[32]byte)(b[16+32*c:])
			for l := range qs {
				qs[l] = L[64*c+l] | L[64*c+32+l]<<4
			}
		}
	}
}

func quantQ5K(src []float32, dst []byte) {
	var L [256]uint8
	for i := range len(src) / 256 {
		x := (*[256]float32)(src[i*256:])
		b := (*[sizeQ5K]byte)(dst[i*sizeQ5K:])
		quantKScaleMin(x, b[:], &L, 31, -0.5, 0.1, 15)
		qh := (*[32]byte)(b[16:])
		*qh = [32]byte{}
		for c := range 4 {
			qs := (*[32]byte)(b[48+32*c:])
			for l := range qs {
				lo, hi := L[64*c+l], L[64*c+32+l]
				qs[l] = lo&15 | hi&15<<4
				qh[l] |= lo>>4<<(2*c) | hi>>4<<(2*c+1)
			}
		}
	}
}

func quantQ6K(src []float32, dst []byte) {
	var L [256]uint8
	for i := range len(src) / 256 {
		x := (*[256]float32)(src[i*256:])
		b := (*[sizeQ6K]byte)(dst[i*sizeQ6K:])
		var scales [16]float32
		var maxScale, maxAbs float32
		for j := range 16 {
			scales[j] = fitSymmetric(x[16*j:16*j+16], L[16*j:16*j+16], 32)
			if a := abs32(scales[j]); a > maxAbs {
				maxAbs, maxScale = a, scales[j]
			}
		}
		if maxAbs < groupMaxEps {
			*b = [sizeQ6K]byte{}
			continue
		}
		iscale := -128 / maxScale
		dh := F32ToF16(1 / iscale)
		binary.LittleEndian.PutUint16(b[208:], dh)
		sc := (*[16]byte)(b[192:])
		for j := range 16 {
			sc[j] = byte(int8(min(127, nearestInt(iscale*scales[j]))))
		}
		d := F16ToF32(dh)
		for j := range 16 {
			dl := d * float32(int8(sc[j]))
			if dl == 0 {
				continue
			}
			for l := 16 * j; l < 16*j+16; l++ {
				L[l] = uint8(min(31, max(-32, nearestInt(x[l]/dl))) + 32)
			}
		}
		putQ6KQuants(b[:], &L)
	}
}
