// Package tensor holds glmrun's element types and the kernels that read them:
// GGUF block layouts, conversions to and from float32, and the quantized dot
// and matrix products of inference.
//
// The type table (Type, RowSize, ParseType) follows ggml.h. Dequantize turns
// a row of any implemented type into float32 exactly as ggml's reference
// dequantize_row_* functions do, bit for bit: every product and sum is
// rounded to float32 in ggml's order, never fused. Quantize writes the block
// formats the engine produces itself: Q8_0, Q8_1 and Q8_K exactly as ggml's
// reference quantizers (they quantize activations), Q4_K, Q5_K and Q6_K with
// a least-squares search like ggml's reference ones (close, not identical),
// and F32, F16 and BF16. The block layouts and per-element formulas are in
// docs/FILE-LAYOUTS.md, section 3.
//
// DotKernel returns the product of one weight row with one activation row
// quantized to the weight type's VecDotType, as ggml's CPU backend pairs
// them; GemmKernel returns the product of many weight rows with many
// activation rows (prompt processing), whose every output equals the
// DotKernel result for the same pair bit for bit.
//
// The package is not pure Go. Each kernel has a pure-Go twin (the
// *_generic.go files), which defines its result, and on amd64 assembly
// versions (the *_amd64.s files): AVX2 (with FMA and F16C) and, for some
// types, AVX-512 (F, BW, VL and VNNI). The fastest version the CPU supports
// is chosen once when the program starts, from golang.org/x/sys/cpu; the
// GODEBUG settings cpu.avx512f=off and cpu.avx2=off drop a tier, and the
// purego build tag (or another architecture) leaves only the twins. The
// assembly computes the same integer block sums as the twin and may add the
// float terms in another order (see DotKernel).
//
// Kernels work on whole rows and blocks, never allocate and never start
// goroutines; threading belongs to the caller.
package tensor
