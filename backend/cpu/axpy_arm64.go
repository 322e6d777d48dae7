//go:build !purego

package cpu

// The attention's float kernels on arm64 (axpy_arm64.s, NEON). A row of
// dot4 is dot1 and a row of axpy4 is axpy, call for call, so that prefill
// and decode attention give the same bits, as on amd64.

//go:noescape
func dot1NEON(q, k *float32, n int) float32

//go:noescape
func axpyNEON(y *float32, a float32, x *float32, n int)

// axpy adds a·x to y.
func axpy(y []float32, a float32, x []float32) {
	if len(y) == 0 {
		return
	}
	x = x[:len(y)]
	axpyNEON(&y[0], a, &x[0], len(y))
}

// dot1 returns the dot product of q[:n] and k[:n], as one row of dot4.
func dot1(q, k []float32, n int) float32 {
	if n == 0 {
		return 0
	}
	q, k = q[:n], k[:n]
	return dot1NEON(&q[0], &k[0], n)
}

// dot4 writes to out[j] the dot product of rows j < 4 of q (ldq apart)
// with k[:n].
func dot4(out *[4]float32, q []float32, ldq int, k []float32, n int) {
	for j := range out {
		out[j] = dot1(q[j*ldq:], k, n)
	}
}

// axpy4 adds e[j]·c[:n] to rows j < 4 of o (ldo apart).
func axpy4(o []float32, ldo int, e *[4]float32, c []float32, n int) {
	for j, a := range e {
		axpy(o[j*ldo:j*ldo+n], a, c[:n])
	}
}
