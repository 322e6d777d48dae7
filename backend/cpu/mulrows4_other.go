//go:build !amd64 || purego

package cpu

// mulRows4Vec is mulRows4Generic where there is no vector kernel.
func mulRows4Vec(out []float32, ldo int, a []float32, lda int, b []float32, ldb, kr, ncols int) {
	mulRows4Generic(out, ldo, a, lda, b, ldb, kr, ncols)
}
