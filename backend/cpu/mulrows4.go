package cpu

// mulRows4 computes out[j·ldo + c] = Σ_{r<kr} a[j·lda + r] · b[r·ldb + c]
// for rows j < 4 and columns c < ncols: four rows of a times a kr × ncols
// matrix b, as a decompressed prefill computes four keys' k_nope from
// their latents and W_UK. ncols must be a multiple of 16. Each output is
// one multiply-add chain over r in order (fused in the vector kernel, so
// it may differ from mulRows4Generic's in the last bits).
func mulRows4(out []float32, ldo int, a []float32, lda int, b []float32, ldb, kr, ncols int) {
	if ncols%16 != 0 {
		panic("cpu: mulRows4: columns not a multiple of 16")
	}
	if kr == 0 || ncols == 0 {
		for j := range 4 {
			clear(out[j*ldo : j*ldo+ncols])
		}
		return
	}
	_ = out[3*ldo+ncols-1]
	_ = a[3*lda+kr-1]
	_ = b[(kr-1)*ldb+ncols-1]
	mulRows4Vec(out, ldo, a, lda, b, ldb, kr, ncols)
}

// mulRows4Generic is mulRows4's twin in Go.
func mulRows4Generic(out []float32, ldo int, a []float32, lda int, b []float32, ldb, kr, ncols int) {
	for j := range 4 {
		o := out[j*ldo : j*ldo+ncols]
		clear(o)
		for r := range kr {
			x := a[j*lda+r]
			for c, v := range b[r*ldb : r*ldb+ncols] {
				o[c] += x * v
			}
		}
	}
}
