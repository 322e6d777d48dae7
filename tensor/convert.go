package tensor

import (
	"errors"
	"fmt"
)

// ErrNotSupported is wrapped by the error that Dequantize or Quantize
// returns for a known type that this package cannot convert.
var ErrNotSupported = errors.New("not supported")

// notSupportedError names the type (and, for Quantize, the direction) that
// is not implemented. Its text is what callers show after their own prefix
// ("tensor blk.3.ffn_up.weight: quant type IQ2_XXS is not supported yet").
type notSupportedError struct {
	t        Type
	quantize bool
}

func (e *notSupportedError) Error() string {
	if e.quantize {
		return fmt.Sprintf("quantization to %s is not supported yet", e.t)
	}
	return fmt.Sprintf("quant type %s is not supported yet", e.t)
}

func (e *notSupportedError) Unwrap() error { return ErrNotSupported }

// checkSizes returns an error unless t is known and nbytes is exactly the
// size of n elements of t.
func checkSizes(t Type, nbytes, n int) error {
	want, err := t.RowSize(int64(n))
	if err != nil {
		return err
	}
	if int64(nbytes) != want {
		return fmt.Errorf("%d elements of %s take %d bytes, got %d", n, t, want, nbytes)
	}
	return nil
}

// CanDequantize reports whether Dequantize implements t.
func CanDequantize(t Type) bool {
	switch t {
	case F32, F16, BF16, F64, I8, I16, I32, I64,
		Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1,
		Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K,
		IQ4_NL, IQ4_XS, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M:
		return true
	}
	return false
}

// CanQuantize reports whether Quantize implements t.
func CanQuantize(t Type) bool {
	switch t {
	case F32, F16, BF16, Q5_0, Q5_1, Q8_0, Q8_1, Q4_K, Q5_K, Q6_K, Q8_K:
		return true
	}
	return false
}

// Dequantize converts the len(dst) elements stored as t in src to float32.
// src must hold exactly t.RowSize(len(dst)) bytes. The result is bit-exact
// with ggml's dequantization. A known type without an implementation gives
// an error wrapping ErrNotSupported ("quant type IQ2_XXS is not supported
// yet"); an unknown id gives one wrapping ErrUnknownType.
// Dequantize does not allocate.
func Dequantize(t Type, src []byte, dst []float32) error {
	if t.Known() && !CanDequantize(t) {
		return &notSupportedError{t: t}
	}
	if err := checkSizes(t, len(src), len(dst)); err != nil {
		return err
	}
	switch t {
	case F32:
		dequantF32(src, dst)
	case F16:
		dequantF16(src, dst)
	case BF16:
		dequantBF16(src, dst)
	case F64:
		dequantF64(src, dst)
	case I8:
		dequantI8(src, dst)
	case I16:
		dequantI16(src, dst)
	case I32:
		dequantI32(src, dst)
	case I64:
		dequantI64(src, dst)
	case Q4_0:
		dequantQ4_0(src, dst)
	case Q4_1:
		dequantQ4_1(src, dst)
	case Q5_0:
		dequantQ5_0(src, dst)
	case Q5_1:
		dequantQ5_1(src, dst)
	case Q8_0:
		dequantQ8_0(src, dst)
	case Q8_1:
		dequantQ8_1(src, dst)
	case Q2_K:
		dequantQ2K(src, dst)
	case Q3_K:
		dequantQ3K(src, dst)
	case Q4_K:
		dequantQ4K(src, dst)
	case Q5_K:
		dequantQ5K(src, dst)
	case Q6_K:
		dequantQ6K(src, dst)
	case Q8_K:
		dequantQ8K(src, dst)
	case IQ4_NL:
		dequantIQ4NL(src, dst)
	case IQ4_XS:
		dequantIQ4XS(src, dst)
	case IQ2_XXS:
		dequantIQ2XXS(src, dst)
	case IQ2_XS:
		dequantIQ2XS(src, dst)
	case IQ2_S:
		dequantIQ2S(src, dst)
	case IQ3_XXS:
		dequantIQ3XXS(src, dst)
	case IQ3_S:
		dequantIQ3S(src, dst)
	case IQ1_S:
		dequantIQ1S(src, dst)
	case IQ1_M:
		dequantIQ1M(src, dst)
	}
	return nil
}

// Quantize converts the len(src) float32 values in src to type t, writing
// exactly t.RowSize(len(src)) bytes to dst. Every type reproduces ggml's
// reference quantizer (what llama-quantize uses without an importance
// matrix) bit for bit. Types other than F32, F16, BF16, Q5_0, Q5_1, Q8_0,
// Q8_1, Q4_K, Q5_K, Q6_K and Q8_K give an error wrapping ErrNotSupported.
// Quantize does not allocate.
func Quantize(t Type, src []float32, dst []byte) error {
	if t.Known() && !CanQuantize(t) {
		return &notSupportedError{t: t, quantize: true}
	}
	if err := checkSizes(t, len(dst), len(src)); err != nil {
		return err
	}
	switch t {
	case F32:
		quantF32(src, dst)
	case F16:
		quantF16(src, dst)
	case BF16:
		quantBF16(src, dst)
	case Q5_0:
		quantQ5_0(src, dst)
	case Q5_1:
		quantQ5_1(src, dst)
	case Q8_0:
		quantQ8_0(src, dst)
	case Q8_1:
		quantQ8_1(src, dst)
	case Q8_K:
		quantQ8K(src, dst)
	case Q4_K:
		quantQ4K(src, dst)
	case Q5_K:
		quantQ5K(src, dst)
	case Q6_K:
		quantQ6K(src, dst)
	}
	return nil
}
