//go:build !purego

package tensor

import "encoding/binary"

// quantQ8KAVX512 quantizes nb blocks of 256 values at x to Q8_K at dst, as
// quantQ8K does. It returns false, with dst partly written, if the values
// hold a NaN.
//
//go:noescape
func quantQ8KAVX512(x *float32, nb int, dst *byte) bool

// quantQ8_0AVX512 quantizes nb blocks of 32 values at x to Q8_0 at dst as
// quantQ8_0 does, except that it leaves each block's f16 scale unwritten
// and stores the unrounded float32 scale d in ds[i] instead. It returns
// false, with dst partly written, if the values hold a NaN.
//
//go:noescape
func quantQ8_0AVX512(x *float32, nb int, dst *byte, ds *float32) bool

// quantQ8_0AVX2 is quantQ8_0AVX512 for AVX2.
//
//go:noescape
func quantQ8_0AVX2(x *float32, nb int, dst *byte, ds *float32) bool

// quantQ8KAVX2 is quantQ8KAVX512 for AVX2.
//
//go:noescape
func quantQ8KAVX2(x *float32, nb int, dst *byte) bool

// quantActFast runs the assembly activation quantizers where they apply
// (sizes already checked) and reports whether it did: AVX-512 or AVX2, for
// Q8_0 and Q8_K.
func quantActFast(t Type, src []float32, dst []byte) bool {
	if len(src) == 0 || !dotAVX2 {
		return false
	}
	switch t {
	case Q8_K:
		if dotAVX512 {
			return quantQ8KAVX512(&src[0], len(src)/256, &dst[0])
		}
		return quantQ8KAVX2(&src[0], len(src)/256, &dst[0])
	case Q8_0:
		var ds [64]float32
		for len(src) > 0 {
			nb := min(len(src)/32, len(ds))
			// Direct calls: through a function value ds would escape.
			var ok bool
			if dotAVX512 {
				ok = quantQ8_0AVX512(&src[0], nb, &dst[0], &ds[0])
			} else {
				ok = quantQ8_0AVX2(&src[0], nb, &dst[0], &ds[0])
			}
			if !ok {
				return false
			}
			for i, d := range ds[:nb] {
				binary.LittleEndian.PutUint16(dst[i*sizeQ8_0:], F32ToF16(d))
			}
			src, dst = src[nb*32:], dst[nb*sizeQ8_0:]
		}
		return true
	}
	return false
}

// quantActHasFast reports whether quantActFast handles t on this CPU.
func quantActHasFast(t Type) bool {
	return dotAVX2 && (t == Q8_0 || t == Q8_K)
}
