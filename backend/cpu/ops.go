package cpu

import "math"

// Dot returns Σ a[i]·b[i] over len(a) elements, in float32 with four
// partial sums.
func Dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// Axpy adds a·x to y.
func Axpy(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += a * x[i]
	}
}

// Add adds x to y element-wise.
func Add(y, x []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += x[i]
	}
}

// Scale multiplies x by a.
func Scale(x []float32, a float32) {
	for i := range x {
		x[i] *= a
	}
}

// RMSNorm writes w_i · x_i / sqrt(mean(x²) + eps) to dst for one row
// (len(x) values). The mean is accumulated in float64, as ggml does, and
// the weight is applied after the normalization.
func RMSNorm(dst, x, w []float32, eps float32) {
	var sum float64
	for _, v := range x {
		sum += float64(v * v)
	}
	mean := float32(sum / float64(len(x)))
	scale := 1 / float32(math.Sqrt(float64(mean+eps)))
	dst = dst[:len(x)]
	w = w[:len(x)]
	for i, v := range x {
		dst[i] = v * scale * w[i]
	}
}

// LayerNorm writes w_i · (x_i − mean)/sqrt(var + eps) + b_i to dst for one
// row, with the biased variance, accumulated in float64 as ggml does.
func LayerNorm(dst, x, w, b []float32, eps float32) {
	var sum float64
	for _, v := range x {
		sum += float64(v)
	}
	mean := float32(sum / float64(len(x)))
	dst = dst[:len(x)]
	var sum2 float64
	for i, v := range x {
		d := v - mean
		dst[i] = d
		sum2 += float64(d * d)
	}
	variance := float32(sum2 / float64(len(x)))
	scale := 1 / float32(math.Sqrt(float64(variance+eps)))
	w = w[:len(x)]
	b = b[:len(x)]
	for i := range dst {
		dst[i] = dst[i]*scale*w[i] + b[i]
	}
}

// Softmax replaces x by exp(x − max)/Σ exp(x − max), summing in float64.
// Entries equal to −Inf get probability 0; x must hold a finite entry.
func Softmax(x []float32) {
	maxv := float32(math.Inf(-1))
	for _, v := range x {
		maxv = max(maxv, v)
	}
	var sum float64
	for i, v := range x {
		e := float32(math.Exp(float64(v - maxv)))
		x[i] = e
		sum += float64(e)
	}
	inv := float32(1 / sum)
	for i := range x {
		x[i] *= inv
	}
}

// Sigmoid returns 1/(1 + e^−v).
func Sigmoid(v float32) float32 {
	return 1 / (1 + float32(math.Exp(float64(-v))))
}

// SiLU returns v·σ(v).
func SiLU(v float32) float32 {
	return v / (1 + float32(math.Exp(float64(-v))))
}

// SwiGLU writes silu(gate_i) · up_i to dst.
func SwiGLU(dst, gate, up []float32) {
	gate = gate[:len(dst)]
	up = up[:len(dst)]
	for i := range dst {
		dst[i] = SiLU(gate[i]) * up[i]
	}
}
