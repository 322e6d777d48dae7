//go:build !amd64 || purego

package cpu

// axpy adds a·x to y.
func axpy(y []float32, a float32, x []float32) { axpyGeneric(y, a, x) }
