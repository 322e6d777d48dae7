//go:build !amd64 || purego

package tensor

// Without amd64 assembly every multi-token product runs the single-row
// kernel (the twin, or a NEON kernel on arm64) per token.

// gemmImpls returns the implementations of the multi-token product for
// weight type t: here only the one built on the single-row kernel.
func gemmImpls(t Type) []gemmKernel {
	if f := dotChosen(t); f != nil {
		return []gemmKernel{{name: "generic", size: 1, dot: f, typ: t}}
	}
	return nil
}

// gemmBest returns the implementation that pairs with DotKernel's choice.
func gemmBest(t Type) *gemmKernel {
	return &gemmImpls(t)[0]
}

// packLanesValues is its pure-Go twin here, where no lanes kernel reads it.
func packLanesValues(q, act *byte, lda, nb int) { packLanesValuesGo(q, act, lda, nb) }
