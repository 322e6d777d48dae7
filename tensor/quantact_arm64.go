//go:build !purego

package tensor

import "encoding/binary"

// quantQ8KNEON quantizes nb blocks of 256 values at x to Q8_K at dst, as
// quantQ8K does (quantact_arm64.s). It returns false, with dst partly
// written, if the values hold a NaN.
//
//go:noescape
func quantQ8KNEON(x *float32, nb int, dst *byte) bool

// quantQ8_0NEON quantizes nb blocks of 32 values at x to Q8_0 at dst as
// quantQ8_0 does, except that it leaves each block's f16 scale unwritten
// and stores the unrounded float32 scale d in ds[i] instead. It returns
// false, with dst partly written, if the values hold a NaN.
//
//go:noescape
func quantQ8_0NEON(x *float32, nb int, dst *byte, ds *float32) bool

// quantActFast runs the NEON activation quantizers where they apply (sizes
// already checked) and reports whether it did: Q8_K (the activations of
// the K-quants and IQ4_XS) and Q8_0.
func quantActFast(t Type, src []float32, dst []byte) bool {
	if len(src) == 0 {
		return false
	}
	switch t {
	case Q8_K:
		return quantQ8KNEON(&src[0], len(src)/256, &dst[0])
	case Q8_0:
		var ds [64]float32
		for len(src) > 0 {
			nb := min(len(src)/32, len(ds))
			if !quantQ8_0NEON(&src[0], nb, &dst[0], &ds[0]) {
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
func quantActHasFast(t Type) bool { return t == Q8_K || t == Q8_0 }
