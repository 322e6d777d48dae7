package tensor

// gemmTwin is the definition of a GemmFunc for the weight type whose
// single-row kernel (twin signature) is dot: every output is that kernel's
// dot product of one weight row and one activation row. The tests hold
// every variant to it.
func gemmTwin(dot func(x, y []byte, nb int) float32, w []byte, ldw int, act []byte, lda int,
	out []float32, ldo int, rows, m, nb int) {
	for r := range rows {
		for j := range m {
			out[j*ldo+r] = dot(w[r*ldw:], act[j*lda:], nb)
		}
	}
}
