package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/glmrun/glmrun/tensor"
)

// DType is a safetensors element type, spelled as in the header ("BF16").
type DType string

// The dtypes of the safetensors format. The sub-byte float types and C64
// are recognised (their sizes are checked) but ToFloat32 does not convert
// them.
const (
	BOOL   DType = "BOOL"
	U8     DType = "U8"
	I8     DType = "I8"
	U16    DType = "U16"
	I16    DType = "I16"
	U32    DType = "U32"
	I32    DType = "I32"
	U64    DType = "U64"
	I64    DType = "I64"
	F16    DType = "F16"
	BF16   DType = "BF16"
	F32    DType = "F32"
	F64    DType = "F64"
	C64    DType = "C64"
	F8E4M3 DType = "F8_E4M3" // OCP FP8 E4M3 ("fn": no infinities, one NaN per sign)
	F8E5M2 DType = "F8_E5M2" // OCP FP8 E5M2 (IEEE-like, with infinities)
	F8E8M0 DType = "F8_E8M0" // unsigned power of two (MX block scales)
	F4     DType = "F4"      // FP4 E2M1, two per byte
	F6E2M3 DType = "F6_E2M3" // FP6, four per three bytes
	F6E3M2 DType = "F6_E3M2" // FP6, four per three bytes
)

// dtypeBits is the size of one element in bits; a dtype absent here is
// unknown.
var dtypeBits = map[DType]int{
	BOOL: 8, U8: 8, I8: 8, U16: 16, I16: 16, U32: 32, I32: 32, U64: 64, I64: 64,
	F16: 16, BF16: 16, F32: 32, F64: 64, C64: 64,
	F8E4M3: 8, F8E5M2: 8, F8E8M0: 8,
	F4: 4, F6E2M3: 6, F6E3M2: 6,
}

// Bits returns the size of one element in bits, or 0 for an unknown dtype.
func (d DType) Bits() int { return dtypeBits[d] }

// Known reports whether d is a safetensors dtype.
func (d DType) Known() bool { return d.Bits() > 0 }

// IsFloat reports whether d is a floating-point type (FP8 included), the
// types a weight is stored in.
func (d DType) IsFloat() bool {
	switch d {
	case F16, BF16, F32, F64, F8E4M3, F8E5M2, F8E8M0, F4, F6E2M3, F6E3M2:
		return true
	}
	return false
}

// IsFP8 reports whether d is one of the 8-bit float types that checkpoints
// pair with block scales (F8_E4M3, F8_E5M2).
func (d DType) IsFP8() bool { return d == F8E4M3 || d == F8E5M2 }

// CanConvert reports whether ToFloat32 converts d.
func CanConvert(d DType) bool {
	switch d {
	case C64, F4, F6E2M3, F6E3M2:
		return false
	}
	return d.Known()
}

// ByteSize returns the bytes that n elements of d take, or an error if
// that is not a whole number of bytes or overflows.
func (d DType) ByteSize(n int64) (int64, error) {
	bits := int64(d.Bits())
	if bits == 0 {
		return 0, fmt.Errorf("unknown dtype %q", string(d))
	}
	if n < 0 || n > math.MaxInt64/bits {
		return 0, fmt.Errorf("%d elements of %s overflow", n, d)
	}
	if n*bits%8 != 0 {
		return 0, fmt.Errorf("%d elements of %s are not a whole number of bytes", n, d)
	}
	return n * bits / 8, nil
}

// ToFloat32 converts the len(dst) elements of dtype d in src to float32.
// src must hold exactly d.ByteSize(len(dst)) bytes. Every conversion is
// exact except from the 64-bit types (F64 rounds to nearest even; I64, U64
// and U32 beyond 2^24 round), which is what torch's .float() gives.
func ToFloat32(d DType, src []byte, dst []float32) error {
	if !CanConvert(d) {
		if !d.Known() {
			return fmt.Errorf("unknown dtype %q", string(d))
		}
		return fmt.Errorf("converting dtype %s to float32 is not supported", d)
	}
	want, err := d.ByteSize(int64(len(dst)))
	if err != nil {
		return err
	}
	if int64(len(src)) != want {
		return fmt.Errorf("%d elements of %s take %d bytes, got %d", len(dst), d, want, len(src))
	}
	le := binary.LittleEndian
	switch d {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(le.Uint32(src[4*i:]))
		}
	case BF16:
		for i := range dst {
			dst[i] = math.Float32frombits(uint32(le.Uint16(src[2*i:])) << 16)
		}
	case F16:
		for i := range dst {
			dst[i] = tensor.F16ToF32(le.Uint16(src[2*i:]))
		}
	case F64:
		for i := range dst {
			dst[i] = float32(math.Float64frombits(le.Uint64(src[8*i:])))
		}
	case F8E4M3:
		for i, b := range src {
			dst[i] = fp8e4m3[b]
		}
	case F8E5M2:
		for i, b := range src {
			dst[i] = fp8e5m2[b]
		}
	case F8E8M0:
		for i, b := range src {
			dst[i] = fp8e8m0[b]
		}
	case BOOL, U8:
		for i, b := range src {
			dst[i] = float32(b)
		}
	case I8:
		for i, b := range src {
			dst[i] = float32(int8(b))
		}
	case U16:
		for i := range dst {
			dst[i] = float32(le.Uint16(src[2*i:]))
		}
	case I16:
		for i := range dst {
			dst[i] = float32(int16(le.Uint16(src[2*i:])))
		}
	case U32:
		for i := range dst {
			dst[i] = float32(le.Uint32(src[4*i:]))
		}
	case I32:
		for i := range dst {
			dst[i] = float32(int32(le.Uint32(src[4*i:])))
		}
	case U64:
		for i := range dst {
			dst[i] = float32(le.Uint64(src[8*i:]))
		}
	case I64:
		for i := range dst {
			dst[i] = float32(int64(le.Uint64(src[8*i:])))
		}
	}
	return nil
}

// The FP8 types have 256 values each: tables built once.
var fp8e4m3, fp8e5m2, fp8e8m0 [256]float32

func init() {
	for i := range 256 {
		fp8e4m3[i] = decodeE4M3(uint8(i))
		fp8e5m2[i] = decodeE5M2(uint8(i))
		fp8e8m0[i] = decodeE8M0(uint8(i))
	}
}

// decodeE4M3 decodes OCP E4M3 ("e4m3fn"): 1 sign, 4 exponent bits with
// bias 7, 3 mantissa bits; exponent 0 is subnormal (m/8 · 2^-6), and
// S.1111.111 is NaN (there are no infinities; the largest value is 448).
func decodeE4M3(b uint8) float32 {
	sign := float32(1)
	if b&0x80 != 0 {
		sign = -1
	}
	e, m := int(b>>3)&0xf, float32(b&7)
	switch {
	case e == 0xf && b&7 == 7:
		// The NaN bits torch's conversion produces.
		return math.Float32frombits(uint32(b&0x80)<<24 | 0x7ff00000)
	case e == 0:
		return sign * m / 8 * 0x1p-6
	}
	return sign * (1 + m/8) * float32(math.Ldexp(1, e-7))
}

// decodeE5M2 decodes OCP E5M2: 1 sign, 5 exponent bits with bias 15, 2
// mantissa bits, IEEE-style subnormals, infinities and NaNs. It is the
// upper byte of a binary16 value, which is how it is widened; a NaN is made
// quiet, as torch does.
func decodeE5M2(b uint8) float32 {
	f := tensor.F16ToF32(uint16(b) << 8)
	if f != f {
		return math.Float32frombits(math.Float32bits(f) | 0x00400000)
	}
	return f
}

// decodeE8M0 decodes E8M0: 2^(b−127), 0xff is NaN. Values below float32's
// normal range (b < 1) are subnormal float32, still exact.
func decodeE8M0(b uint8) float32 {
	if b == 0xff {
		return math.Float32frombits(0x7fc00001) // torch's NaN bits
	}
	return float32(math.Ldexp(1, int(b)-127))
}
