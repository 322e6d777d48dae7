package cpu

// axpyGeneric adds a·x to y (the twin of the assembly axpy).
func axpyGeneric(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += a * x[i]
	}
}

// dot4Generic is the twin of dot4.
func dot4Generic(out *[4]float32, q []float32, ldq int, k []float32, n int) {
	for j := range out {
		var s float32
		row := q[j*ldq : j*ldq+n]
		for i, v := range k[:n] {
			s += row[i] * v
		}
		out[j] = s
	}
}

// axpy4Generic is the twin of axpy4.
func axpy4Generic(o []float32, ldo int, e *[4]float32, c []float32, n int) {
	for j, a := range e {
		axpyGeneric(o[j*ldo:j*ldo+n], a, c[:n])
	}
}

// dot1Generic is one row of dot4Generic.
func dot1Generic(q, k []float32, n int) float32 {
	var s float32
	for i, v := range k[:n] {
		s += q[i] * v
	}
	return s
}

// dot4x4Generic is the twin of dot4x4: out[4h+k] is row h of q (ldq
// apart) dotted with lat[offs[k]:][:n].
func dot4x4Generic(out *[16]float32, q []float32, ldq int, lat []float32, offs *[4]int32, n int) {
	dot4x4By(dot4Generic, out, q, ldq, lat, offs, n)
}

// dot4x4By is dot4x4 as one dot (dot4 or its twin) per key.
func dot4x4By(dot func(*[4]float32, []float32, int, []float32, int), out *[16]float32, q []float32, ldq int, lat []float32, offs *[4]int32, n int) {
	var v [4]float32
	for k, off := range offs {
		dot(&v, q, ldq, lat[off:], n)
		for h, x := range v {
			out[4*h+k] = x
		}
	}
}
