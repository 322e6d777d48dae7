//go:build !amd64 || purego

package cpu

import "github.com/glmrun/glmrun/tensor"

// axpy adds a·x to y.
func axpy(y []float32, a float32, x []float32) { axpyGeneric(y, a, x) }

// dot4 writes to out[j] the dot product of rows j < 4 of q (ldq apart)
// with k[:n].
func dot4(out *[4]float32, q []float32, ldq int, k []float32, n int) { dot4Generic(out, q, ldq, k, n) }

// axpy4 adds e[j]·c[:n] to rows j < 4 of o (ldo apart).
func axpy4(o []float32, ldo int, e *[4]float32, c []float32, n int) { axpy4Generic(o, ldo, e, c, n) }

// axpyKeys4 adds, for each key i in order, e[i][j]·lat[offs[i]:][:n] to
// rows j < 4 of o (ldo apart): one axpy4 per key.
func axpyKeys4(o []float32, ldo int, e [][4]float32, lat []float32, offs []int32, n int) {
	for i, off := range offs {
		axpy4(o, ldo, &e[i], lat[off:], n)
	}
}

// dot1 returns the dot product of q[:n] and k[:n], as one row of dot4.
func dot1(q, k []float32, n int) float32 { return dot1Generic(q, k, n) }

// prefetch does nothing without assembly.
func prefetch(b []byte) {}

// swigluVec leaves every value to swigluGeneric here.
func swigluVec(dst, gate, up []float32) int { return 0 }

// dot4x4 writes to out[4h+k] the dot product of row h < 4 of q (ldq
// apart) with lat[offs[k]:][:n].
func dot4x4(out *[16]float32, q []float32, ldq int, lat []float32, offs *[4]int32, n int) {
	dot4x4Generic(out, q, ldq, lat, offs, n)
}

// convertRowVec leaves every conversion to tensor.Dequantize here.
func convertRowVec(dst []float32, t tensor.Type, src []byte) bool { return false }
