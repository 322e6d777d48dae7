package tensor

// QuantizeActivations is Quantize for the activation rows of the fast
// matrix products: the same bytes as Quantize for every type (it is
// Quantize, with the same errors), with AVX-512 kernels for Q8_0 and Q8_K
// (the VecDotType of most weight types) where the CPU has them. Those
// kernels replay the reference quantizers' float32 operations lane by
// lane (the same maximum, the same divisions, the same roundings), so
// that a decode step's activations do not depend on which path ran. A row
// holding a NaN goes to the reference quantizer.
func QuantizeActivations(t Type, src []float32, dst []byte) error {
	if err := checkSizes(t, len(dst), len(src)); err != nil || !quantActFast(t, src, dst) {
		return Quantize(t, src, dst)
	}
	return nil
}
