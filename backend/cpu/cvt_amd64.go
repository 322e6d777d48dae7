//go:build !purego

package cpu

import (
	"golang.org/x/sys/cpu"

	"github.com/glmrun/glmrun/tensor"
)

//go:noescape
func cvtF16AVX2(dst *float32, src *byte, n int)

//go:noescape
func cvtBF16AVX2(dst *float32, src *byte, n int)

//go:noescape
func cvtQ80AVX2(dst *float32, src *byte, blocks int)

// useF16C gates the conversion kernels, which need F16C besides AVX2.
var useF16C = useAVX2 && cpu.X86.HasF16C

// convertRowVec converts src (stored as t) to float32 in dst with the AVX2
// kernels and reports whether it did: not without AVX2 and F16C, for other
// types, or for a length that is not a multiple of 8 (16-bit types) or 32.
func convertRowVec(dst []float32, t tensor.Type, src []byte) bool {
	n := len(dst)
	if !useF16C || n == 0 {
		return false
	}
	switch t {
	case tensor.F16, tensor.BF16:
		if n%8 != 0 || len(src) != 2*n {
			return false
		}
		if t == tensor.F16 {
			cvtF16AVX2(&dst[0], &src[0], n)
		} else {
			cvtBF16AVX2(&dst[0], &src[0], n)
		}
		return true
	case tensor.Q8_0:
		if n%32 != 0 || len(src) != n/32*34 {
			return false
		}
		cvtQ80AVX2(&dst[0], &src[0], n/32)
		return true
	}
	return false
}
