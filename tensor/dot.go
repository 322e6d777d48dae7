package tensor

import (
	"fmt"
	"unsafe"
)

// Quantized dot products.
//
// A weight row of type T is multiplied with an activation row that the
// caller has quantized once to T.VecDotType(), as ggml's CPU backend does:
// Q8_0 activations for Q4_0, Q5_0, Q8_0 and IQ4_NL weights, Q8_1 for Q4_1
// and Q5_1, Q8_K for the K-quants and IQ4_XS, and plain float32 for F32, F16
// and BF16. The integer part of every block product is exact; the float
// part follows ggml's generic vec_dot functions (ggml-cpu/quants.c), which
// the pure-Go twins in dot_generic.go reproduce operation for operation
// (every product rounded to float32, never fused). The assembly versions
// (AVX2, and AVX-512 VNNI for Q8_0, Q4_0, Q5_0, IQ4_NL, Q4_K and Q6_K,
// chosen at run time) compute the same integer block sums; the 32-element
// block kernels and IQ4_XS also form each block's (sub-block's) scaled term
// exactly as the twin does, and all of them add the terms in vector lanes,
// so their float32 result may differ from the twin's in the last bits (see
// dotTolerance in the tests). Activation quants must lie in [-127, 127], as
// Q8_0, Q8_1 and Q8_K quantization produces. Every kernel reads whole
// blocks, allocates nothing and starts no goroutines.

// DotFunc returns the dot product of the first n elements of a weight row w
// and an activation row act stored as the weight type's VecDotType. n must be
// a multiple of the weight type's block size and both rows must hold at
// least n elements; otherwise the function panics, as an index out of range
// would. Check shapes once with DotKernel and RowSize when a model loads.
type DotFunc func(w, act []byte, n int) float32

// VecDotType returns the type that activations are quantized to before a dot
// product with a row of type t: Q8_0 for Q4_0, Q5_0, Q8_0 and IQ4_NL; Q8_1
// (Q8_0 plus s = d·Σq per block) for Q4_1 and Q5_1; Q8_K for Q2_K to Q6_K
// and the IQ types; F32 for F32, F16, BF16 and every other type. (ggml pairs F16 and BF16 with themselves; this
// package keeps their activations in float32.) Only types for which DotKernel
// succeeds have a kernel.
func (t Type) VecDotType() Type {
	switch t {
	case Q4_0, Q5_0, Q8_0, IQ4_NL:
		return Q8_0
	case Q4_1, Q5_1:
		return Q8_1
	case Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ2_XXS, IQ2_XS, IQ3_XXS, IQ1_S, IQ3_S, IQ2_S, IQ4_XS, IQ1_M:
		return Q8_K
	}
	return F32
}

// DotKernel returns the dot product for weight rows of type t, the fastest
// one this CPU runs. It fails, wrapping ErrNotSupported, for a type without
// a kernel.
func DotKernel(t Type) (DotFunc, error) {
	switch t {
	case Q8_0:
		return DotQ80Q80, nil
	case Q4_0:
		return DotQ40Q80, nil
	case Q5_0:
		return DotQ50Q80, nil
	case Q4_1:
		return DotQ41Q81, nil
	case Q5_1:
		return DotQ51Q81, nil
	case IQ4_NL:
		return DotIQ4NLQ80, nil
	case Q2_K:
		return DotQ2KQ8K, nil
	case Q3_K:
		return DotQ3KQ8K, nil
	case Q4_K:
		return DotQ4KQ8K, nil
	case Q5_K:
		return DotQ5KQ8K, nil
	case Q6_K:
		return DotQ6KQ8K, nil
	case IQ4_XS:
		return DotIQ4XSQ8K, nil
	case IQ2_XXS:
		return DotIQ2XXSQ8K, nil
	case IQ2_XS:
		return DotIQ2XSQ8K, nil
	case IQ2_S:
		return DotIQ2SQ8K, nil
	case IQ3_XXS:
		return DotIQ3XXSQ8K, nil
	case IQ3_S:
		return DotIQ3SQ8K, nil
	case IQ1_S:
		return DotIQ1SQ8K, nil
	case IQ1_M:
		return DotIQ1MQ8K, nil
	case F32:
		return DotF32F32, nil
	case F16:
		return DotF16F32, nil
	case BF16:
		return DotBF16F32, nil
	}
	return nil, fmt.Errorf("tensor: dot product with %s weights: %w", t, &notSupportedError{t: t})
}

// DotPrefetches reports whether the dot product that DotKernel returns for
// t prefetches the weight bytes ahead of the block it computes (past the
// row's end: the next rows, as a matrix stores them), so that a caller
// streaming a matrix from memory row after row need not prefetch itself.
func DotPrefetches(t Type) bool { return dotPrefetches(t) }

// DotRow returns the dot product of n elements of a weight row w of type t
// and an activation row act of type t.VecDotType(). It panics if t has no
// kernel or the rows are too short; resolve the kernel once with DotKernel
// in code that handles data from files.
func DotRow(t Type, w, act []byte, n int) float32 {
	f, err := DotKernel(t)
	if err != nil {
		panic(err)
	}
	return f(w, act, n)
}

// dotBlocks checks that w and act hold n elements of blocks of bs elements,
// wsize and asize bytes each, and returns the number of blocks.
func dotBlocks(name string, w, act []byte, n, bs, wsize, asize int) int {
	if n < 0 || n%bs != 0 {
		panic(fmt.Sprintf("tensor: %s: %d elements are not a whole number of %d-element blocks", name, n, bs))
	}
	nb := n / bs
	if len(w) < nb*wsize || len(act) < nb*asize {
		panic(fmt.Sprintf("tensor: %s: %d elements need %d weight and %d activation bytes, got %d and %d",
			name, n, nb*wsize, nb*asize, len(w), len(act)))
	}
	return nb
}

// Block sizes in bytes of the types the kernels read.
const (
	dotSizeQ80  = 34  // Q8_0: d f16 · qs i8[32]
	dotSizeQ40  = 18  // Q4_0: d f16 · qs u8[16]
	dotSizeQ50  = 22  // Q5_0: d f16 · qh u8[4] · qs u8[16]
	dotSizeQ41  = 20  // Q4_1: d, m f16 · qs u8[16]
	dotSizeQ51  = 24  // Q5_1: d, m f16 · qh u8[4] · qs u8[16]
	dotSizeQ81  = 36  // Q8_1: d, s f16 · qs i8[32] (s = d·Σqs)
	dotSizeIQNL = 18  // IQ4_NL: d f16 · qs u8[16]
	dotSizeQ8K  = 292 // Q8_K: d f32 · qs i8[256] · bsums i16[16]
	dotSizeQ2K  = 84  // Q2_K: scales[16] · qs[64] · d, dmin f16
	dotSizeQ3K  = 110 // Q3_K: hmask[32] · qs[64] · scales[12] · d f16
	dotSizeQ4K  = 144 // Q4_K: d, dmin f16 · scales[12] · qs[128]
	dotSizeQ5K  = 176 // Q5_K: d, dmin f16 · scales[12] · qh[32] · qs[128]
	dotSizeQ6K  = 210 // Q6_K: ql[128] · qh[64] · scales i8[16] · d f16
	dotSizeIQXS = 136 // IQ4_XS: d f16 · scales_h u16 · scales_l[4] · qs[128]
)

// DotQ80Q80 is the DotFunc of Q8_0 weights (activations Q8_0).
func DotQ80Q80(w, act []byte, n int) float32 {
	nb := dotBlocks("DotQ80Q80", w, act, n, 32, dotSizeQ80, dotSizeQ80)
	return dotQ80Q80(w, act, nb)
}

// DotQ40Q80 is the DotFunc of Q4_0 weights (activations Q8_0).
func DotQ40Q80(w, act []byte, n int) float32 {
	nb := dotBlocks("DotQ40Q80", w, act, n, 32, dotSizeQ40, dotSizeQ80)
	return dotQ40Q80(w, act, nb)
}

// DotQ50Q80 is the DotFunc of Q5_0 weights (activations Q8_0).
func DotQ50Q80(w, act []byte, n int) float32 {
	nb := dotBlocks("DotQ50Q80", w, act, n, 32, dotSizeQ50, dotSizeQ80)
	return dotQ50Q80(w, act, nb)
}

// DotQ41Q81 is the DotFunc of Q4_1 weights (activations Q8_1).
func DotQ41Q81(w, act []byte, n int) float32 {
	nb := dotBlocks("DotQ41Q81", w, act, n, 32, dotSizeQ41, dotSizeQ81)
	return dotQ41Q81(w, act, nb)
}

// DotQ51Q81 is the DotFunc of Q5_1 weights (activations Q8_1).
func DotQ51Q81(w, act []byte, n int) float32 {
	nb := dotBlocks("DotQ51Q81", w, act, n, 32, dotSizeQ51, dotSizeQ81)
	return dotQ51Q81(w, act, nb)
}

// DotIQ4NLQ80 is the DotFunc of IQ4_NL weights (activations Q8_0).
func DotIQ4NLQ80(w, act []byte, n int) float32 {
	nb := dotBlocks("DotIQ4NLQ80", w, act, n, 32, dotSizeIQNL, dotSizeQ80)
	return dotIQ4NLQ80(w, act, nb)
}

// DotQ2KQ8K is the DotFunc of Q2_K weights (activations Q8_K).
func DotQ2KQ8K(w, act []byte, n int) float32 {
	return dotQ2KQ8K(w, act, dotBlocks("DotQ2KQ8K", w, act, n, 256, dotSizeQ2K, dotSizeQ8K))
}

// DotQ3KQ8K is the DotFunc of Q3_K weights (activations Q8_K).
func DotQ3KQ8K(w, act []byte, n int) float32 {
	return dotQ3KQ8K(w, act, dotBlocks("DotQ3KQ8K", w, act, n, 256, dotSizeQ3K, dotSizeQ8K))
}

// DotQ4KQ8K is the DotFunc of Q4_K weights (activations Q8_K).
func DotQ4KQ8K(w, act []byte, n int) float32 {
	nb := dotBlocks("DotQ4KQ8K", w, act, n, 256, dotSizeQ4K, dotSizeQ8K)
	return dotQ4KQ8K(w, act, nb)
}

// DotQ5KQ8K is the DotFunc of Q5_K weights (activations Q8_K).
func DotQ5KQ8K(w, act []byte, n int) float32 {
	nb := dotBlocks("DotQ5KQ8K", w, act, n, 256, dotSizeQ5K, dotSizeQ8K)
	return dotQ5KQ8K(w, act, nb)
}

// DotQ6KQ8K is the DotFunc of Q6_K weights (activations Q8_K).
func DotQ6KQ8K(w, act []byte, n int) float32 {
	nb := dotBlocks("DotQ6KQ8K", w, act, n, 256, dotSizeQ6K, dotSizeQ8K)
	return dotQ6KQ8K(w, act, nb)
}

// DotIQ4XSQ8K is the DotFunc of IQ4_XS weights (activations Q8_K).
func DotIQ4XSQ8K(w, act []byte, n int) float32 {
	nb := dotBlocks("DotIQ4XSQ8K", w, act, n, 256, dotSizeIQXS, dotSizeQ8K)
	return dotIQ4XSQ8K(w, act, nb)
}

// DotF32F32 is the DotFunc of F32 weights; act holds float32 values in
// little-endian byte order.
func DotF32F32(w, act []byte, n int) float32 {
	dotBlocks("DotF32F32", w, act, n, 1, 4, 4)
	return dotF32F32(w, act, n)
}

// DotF16F32 is the DotFunc of F16 weights; act holds float32 values in
// little-endian byte order.
func DotF16F32(w, act []byte, n int) float32 {
	dotBlocks("DotF16F32", w, act, n, 1, 2, 4)
	return dotF16F32(w, act, n)
}

// DotBF16F32 is the DotFunc of BF16 weights; act holds float32 values in
// little-endian byte order.
func DotBF16F32(w, act []byte, n int) float32 {
	dotBlocks("DotBF16F32", w, act, n, 1, 2, 4)
	return dotBF16F32(w, act, n)
}

// DotF32 returns the dot product of x and y[:len(x)] with the kernel of
// DotF32F32. It panics if y is shorter than x.
func DotF32(x, y []float32) float32 {
	return DotF32F32(F32Bytes(x), F32Bytes(y), len(x))
}

// F32Bytes returns the memory of x as bytes (little-endian on the machines
// this package supports), without copying: the activation row of a DotFunc
// for F32, F16 and BF16 weights.
func F32Bytes(x []float32) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x))
}

// dotImpl is one implementation of a dot product kernel (the twin or an
// assembly version), as the tests and benchmarks iterate over them. fn takes
// whole blocks: nb is a block count (an element count for F32, F16, BF16).
type dotImpl struct {
	name string
	fn   func(x, y []byte, nb int) float32
}

// DotIQ2XXSQ8K is the DotFunc of IQ2_XXS weights (activations Q8_K).
func DotIQ2XXSQ8K(w, act []byte, n int) float32 {
	return dotIQ2XXSQ8K(w, act, dotBlocks("DotIQ2XXSQ8K", w, act, n, 256, dotSizeIQ2XXS, dotSizeQ8K))
}

// DotIQ2XSQ8K is the DotFunc of IQ2_XS weights (activations Q8_K).
func DotIQ2XSQ8K(w, act []byte, n int) float32 {
	return dotIQ2XSQ8K(w, act, dotBlocks("DotIQ2XSQ8K", w, act, n, 256, dotSizeIQ2XS, dotSizeQ8K))
}

// DotIQ2SQ8K is the DotFunc of IQ2_S weights (activations Q8_K).
func DotIQ2SQ8K(w, act []byte, n int) float32 {
	return dotIQ2SQ8K(w, act, dotBlocks("DotIQ2SQ8K", w, act, n, 256, dotSizeIQ2S, dotSizeQ8K))
}

// DotIQ3XXSQ8K is the DotFunc of IQ3_XXS weights (activations Q8_K).
func DotIQ3XXSQ8K(w, act []byte, n int) float32 {
	return dotIQ3XXSQ8K(w, act, dotBlocks("DotIQ3XXSQ8K", w, act, n, 256, dotSizeIQ3XXS, dotSizeQ8K))
}

// DotIQ3SQ8K is the DotFunc of IQ3_S weights (activations Q8_K).
func DotIQ3SQ8K(w, act []byte, n int) float32 {
	return dotIQ3SQ8K(w, act, dotBlocks("DotIQ3SQ8K", w, act, n, 256, dotSizeIQ3S, dotSizeQ8K))
}

// DotIQ1SQ8K is the DotFunc of IQ1_S weights (activations Q8_K).
func DotIQ1SQ8K(w, act []byte, n int) float32 {
	return dotIQ1SQ8K(w, act, dotBlocks("DotIQ1SQ8K", w, act, n, 256, dotSizeIQ1S, dotSizeQ8K))
}

// DotIQ1MQ8K is the DotFunc of IQ1_M weights (activations Q8_K).
func DotIQ1MQ8K(w, act []byte, n int) float32 {
	return dotIQ1MQ8K(w, act, dotBlocks("DotIQ1MQ8K", w, act, n, 256, dotSizeIQ1M, dotSizeQ8K))
}
