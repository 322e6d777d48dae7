//go:build !amd64 || purego

package cpu

import "github.com/glmrun/glmrun/tensor"

// axpyKeys4 adds, for each key i in order, e[i][j]·lat[offs[i]:][:n] to
// rows j < 4 of o (ldo apart): one axpy4 per key.
func axpyKeys4(o []float32, ldo int, e [][4]float32, lat []float32, offs []int32, n int) {
	for i, off := range offs {
		axpy4(o, ldo, &e[i], lat[off:], n)
	}
}

// prefetch does nothing without assembly.
func prefetch(b []byte) {}

// swigluVec leaves every value to swigluGeneric here.
func swigluVec(dst, gate, up []float32) int { return 0 }

// dot4x4 writes to out[4h+k] the dot product of row h < 4 of q (ldq
// apart) with lat[offs[k]:][:n].
func dot4x4(out *[16]float32, q []float32, ldq int, lat []float32, offs *[4]int32, n int) {
	dot4x4By(dot4, out, q, ldq, lat, offs, n)
}

// convertRowVec leaves every conversion to tensor.Dequantize here.
func convertRowVec(dst []float32, t tensor.Type, src []byte) bool { return false }
