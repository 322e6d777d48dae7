// Package tensor holds glmrun's element types and the conversions between
// their GGUF block layouts and float32.
//
// The type table (Type, RowSize, ParseType) follows ggml.h. Dequantize turns
// a row of any implemented type into float32 exactly as ggml's reference
// dequantize_row_* functions do, bit for bit: every product and sum is
// rounded to float32 in ggml's order, never fused. Quantize writes the block
// formats the engine produces itself: Q8_0 and Q8_K exactly as ggml's
// reference quantizers (they quantize activations), Q4_K, Q5_K and Q6_K with
// a least-squares search like ggml's reference ones (close, not identical),
// and F32, F16 and BF16.
//
// The block layouts are described in the design note FORMATS.md, section 3.
// Conversions work on whole rows, never allocate and never start goroutines;
// threading belongs to the caller. They are pure Go; the quantized dot
// products (DotRow and friends, dot.go) add assembly twins on amd64.
package tensor
