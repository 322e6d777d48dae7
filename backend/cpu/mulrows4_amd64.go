//go:build !purego

package cpu

//go:noescape
func mulRows4AVX2(out *float32, ldo int, a *float32, lda int, b *float32, ldb, kr, ncols int)

// mulRows4Vec runs mulRows4 with AVX2 and FMA where the CPU has them.
func mulRows4Vec(out []float32, ldo int, a []float32, lda int, b []float32, ldb, kr, ncols int) {
	if !useAVX2 {
		mulRows4Generic(out, ldo, a, lda, b, ldb, kr, ncols)
		return
	}
	mulRows4AVX2(&out[0], ldo, &a[0], lda, &b[0], ldb, kr, ncols)
}
