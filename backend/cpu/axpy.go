package cpu

// axpyGeneric adds a·x to y (the twin of the assembly axpy).
func axpyGeneric(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += a * x[i]
	}
}
