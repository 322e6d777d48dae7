//go:build !amd64 || purego

package tensor

// Without amd64 assembly every dot product is its pure-Go twin, except
// those arm64 has NEON kernels for (dot_arm64.go).

var dotTwins = map[Type]func(x, y []byte, nb int) float32{
	Q8_0:    dotQ80Q80Generic,
	Q4_0:    dotQ40Q80Generic,
	Q5_0:    dotQ50Q80Generic,
	Q4_1:    dotQ41Q81Generic,
	Q5_1:    dotQ51Q81Generic,
	IQ4_NL:  dotIQ4NLQ80Generic,
	Q2_K:    dotQ2KQ8KGeneric,
	Q3_K:    dotQ3KQ8KGeneric,
	Q4_K:    dotQ4KQ8KGeneric,
	Q5_K:    dotQ5KQ8KGeneric,
	Q6_K:    dotQ6KQ8KGeneric,
	IQ4_XS:  dotIQ4XSQ8KGeneric,
	IQ2_XXS: dotIQ2XXSQ8KGeneric,
	IQ2_XS:  dotIQ2XSQ8KGeneric,
	IQ2_S:   dotIQ2SQ8KGeneric,
	IQ3_XXS: dotIQ3XXSQ8KGeneric,
	IQ3_S:   dotIQ3SQ8KGeneric,
	IQ1_S:   dotIQ1SQ8KGeneric,
	IQ1_M:   dotIQ1MQ8KGeneric,
	F32:     dotF32F32Generic,
	F16:     dotF16F32Generic,
	BF16:    dotBF16F32Generic,
}

// dotImpls returns the implementations of the dot product for weight type t
// that run on this CPU, the pure-Go twin first.
func dotImpls(t Type) []dotImpl {
	if f, ok := dotTwins[t]; ok {
		return append([]dotImpl{{"generic", f}}, dotArchImpls(t)...)
	}
	return nil
}

// dotChosen returns the dot product of weight type t that DotKernel's
// entry point runs here.
func dotChosen(t Type) func(x, y []byte, nb int) float32 {
	switch t {
	case Q8_0:
		return dotQ80Q80
	case Q4_K:
		return dotQ4KQ8K
	case Q5_K:
		return dotQ5KQ8K
	case Q6_K:
		return dotQ6KQ8K
	case IQ4_XS:
		return dotIQ4XSQ8K
	}
	return dotTwins[t]
}

func dotQ80Q80(x, y []byte, nb int) float32    { return dotQ80Q80Arch(x, y, nb) }
func dotQ40Q80(x, y []byte, nb int) float32    { return dotQ40Q80Generic(x, y, nb) }
func dotQ50Q80(x, y []byte, nb int) float32    { return dotQ50Q80Generic(x, y, nb) }
func dotQ41Q81(x, y []byte, nb int) float32    { return dotQ41Q81Generic(x, y, nb) }
func dotQ51Q81(x, y []byte, nb int) float32    { return dotQ51Q81Generic(x, y, nb) }
func dotIQ4NLQ80(x, y []byte, nb int) float32  { return dotIQ4NLQ80Generic(x, y, nb) }
func dotQ2KQ8K(x, y []byte, nb int) float32    { return dotQ2KQ8KGeneric(x, y, nb) }
func dotQ3KQ8K(x, y []byte, nb int) float32    { return dotQ3KQ8KGeneric(x, y, nb) }
func dotQ4KQ8K(x, y []byte, nb int) float32    { return dotQ4KQ8KArch(x, y, nb) }
func dotQ5KQ8K(x, y []byte, nb int) float32    { return dotQ5KQ8KArch(x, y, nb) }
func dotQ6KQ8K(x, y []byte, nb int) float32    { return dotQ6KQ8KArch(x, y, nb) }
func dotIQ4XSQ8K(x, y []byte, nb int) float32  { return dotIQ4XSQ8KArch(x, y, nb) }
func dotIQ2XXSQ8K(x, y []byte, nb int) float32 { return dotIQ2XXSQ8KGeneric(x, y, nb) }
func dotIQ2XSQ8K(x, y []byte, nb int) float32  { return dotIQ2XSQ8KGeneric(x, y, nb) }
func dotIQ2SQ8K(x, y []byte, nb int) float32   { return dotIQ2SQ8KGeneric(x, y, nb) }
func dotIQ3XXSQ8K(x, y []byte, nb int) float32 { return dotIQ3XXSQ8KGeneric(x, y, nb) }
func dotIQ3SQ8K(x, y []byte, nb int) float32   { return dotIQ3SQ8KGeneric(x, y, nb) }
func dotIQ1SQ8K(x, y []byte, nb int) float32   { return dotIQ1SQ8KGeneric(x, y, nb) }
func dotIQ1MQ8K(x, y []byte, nb int) float32   { return dotIQ1MQ8KGeneric(x, y, nb) }
func dotF32F32(x, y []byte, n int) float32     { return dotF32F32Generic(x, y, n) }
func dotF16F32(x, y []byte, n int) float32     { return dotF16F32Generic(x, y, n) }
func dotBF16F32(x, y []byte, n int) float32    { return dotBF16F32Generic(x, y, n) }

// dotPrefetches: the twins leave prefetching to the hardware.
func dotPrefetches(Type) bool { return false }
