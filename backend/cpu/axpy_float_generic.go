//go:build (!amd64 && !arm64) || purego

package cpu

// Without assembly for this architecture the float kernels of the
// attention are their pure-Go twins.

// axpy adds a·x to y.
func axpy(y []float32, a float32, x []float32) { axpyGeneric(y, a, x) }

// dot4 writes to out[j] the dot product of rows j < 4 of q (ldq apart)
// with k[:n].
func dot4(out *[4]float32, q []float32, ldq int, k []float32, n int) { dot4Generic(out, q, ldq, k, n) }

// axpy4 adds e[j]·c[:n] to rows j < 4 of o (ldo apart).
func axpy4(o []float32, ldo int, e *[4]float32, c []float32, n int) { axpy4Generic(o, ldo, e, c, n) }

// dot1 returns the dot product of q[:n] and k[:n], as one row of dot4.
func dot1(q, k []float32, n int) float32 { return dot1Generic(q, k, n) }
