package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ValueType is the type tag of a GGUF metadata value (docs/FILE-LAYOUTS.md
// section 1.2).
type ValueType uint32

// The GGUF metadata value types, numbered as in the file format.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var valueTypeNames = [...]string{
	TypeUint8: "u8", TypeInt8: "i8", TypeUint16: "u16", TypeInt16: "i16",
	TypeUint32: "u32", TypeInt32: "i32", TypeFloat32: "f32", TypeBool: "bool",
	TypeString: "string", TypeArray: "array", TypeUint64: "u64", TypeInt64: "i64",
	TypeFloat64: "f64",
}

// String returns the short name of t ("u32", "string", ...).
func (t ValueType) String() string {
	if t.valid() {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

func (t ValueType) valid() bool { return t <= TypeFloat64 }

// size returns the encoded size of a fixed-size type, or 0 for string and
// array.
func (t ValueType) size() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

func (t ValueType) isInt() bool {
	switch t {
	case TypeUint8, TypeInt8, TypeUint16, TypeInt16, TypeUint32, TypeInt32, TypeUint64, TypeInt64:
		return true
	}
	return false
}

func (t ValueType) isSigned() bool {
	return t == TypeInt8 || t == TypeInt16 || t == TypeInt32 || t == TypeInt64
}

func (t ValueType) isFloat() bool { return t == TypeFloat32 || t == TypeFloat64 }

// Value is one GGUF metadata value. It remembers its exact GGUF type (and
// element type for arrays) so that a file can be rewritten byte for byte.
// The zero Value is the u8 0. Values are immutable.
type Value struct {
	typ  ValueType
	elem ValueType // element type of an array
	n    int       // array length
	bits uint64    // fixed-size scalar: its little-endian bits, zero-extended
	str  string    // string scalar
	raw  []byte    // fixed-size array elements, packed little-endian
	strs []string  // string array elements
	arrs []Value   // nested array elements
}

// Type returns the GGUF type of v.
func (v Value) Type() ValueType { return v.typ }

// ElemType returns the element type of an array value (meaningless for
// scalars).
func (v Value) ElemType() ValueType { return v.elem }

// Len returns the number of elements of an array value and 0 for a scalar.
func (v Value) Len() int { return v.n }

// Uint8 returns a u8 value.
func Uint8(x uint8) Value { return Value{typ: TypeUint8, bits: uint64(x)} }

// Int8 returns an i8 value.
func Int8(x int8) Value { return Value{typ: TypeInt8, bits: uint64(uint8(x))} }

// Uint16 returns a u16 value.
func Uint16(x uint16) Value { return Value{typ: TypeUint16, bits: uint64(x)} }

// Int16 returns an i16 value.
func Int16(x int16) Value { return Value{typ: TypeInt16, bits: uint64(uint16(x))} }

// Uint32 returns a u32 value.
func Uint32(x uint32) Value { return Value{typ: TypeUint32, bits: uint64(x)} }

// Int32 returns an i32 value.
func Int32(x int32) Value { return Value{typ: TypeInt32, bits: uint64(uint32(x))} }

// Uint64 returns a u64 value.
func Uint64(x uint64) Value { return Value{typ: TypeUint64, bits: x} }

// Int64 returns an i64 value.
func Int64(x int64) Value { return Value{typ: TypeInt64, bits: uint64(x)} }

// Float32 returns an f32 value.
func Float32(x float32) Value { return Value{typ: TypeFloat32, bits: uint64(math.Float32bits(x))} }

// Float64 returns an f64 value.
func Float64(x float64) Value { return Value{typ: TypeFloat64, bits: math.Float64bits(x)} }

// Bool returns a bool value.
func Bool(x bool) Value {
	v := Value{typ: TypeBool}
	if x {
		v.bits = 1
	}
	return v
}

// String returns a string value.
func String(s string) Value { return Value{typ: TypeString, str: s} }

// Scalar is the set of Go types that map to a GGUF scalar type.
type Scalar interface {
	uint8 | int8 | uint16 | int16 | uint32 | int32 | uint64 | int64 | float32 | float64 | bool | string
}

// Array returns an array value whose element type follows from T
// (for example []int32 gives an array of i32).
func Array[T Scalar](xs []T) Value {
	var zero T
	v := Value{typ: TypeArray, n: len(xs)}
	switch any(zero).(type) {
	case string:
		v.elem = TypeString
		v.strs = make([]string, len(xs))
		for i, x := range xs {
			v.strs[i] = any(x).(string)
		}
		return v
	case uint8:
		v.elem = TypeUint8
	case int8:
		v.elem = TypeInt8
	case uint16:
		v.elem = TypeUint16
	case int16:
		v.elem = TypeInt16
	case uint32:
		v.elem = TypeUint32
	case int32:
		v.elem = TypeInt32
	case uint64:
		v.elem = TypeUint64
	case int64:
		v.elem = TypeInt64
	case float32:
		v.elem = TypeFloat32
	case float64:
		v.elem = TypeFloat64
	case bool:
		v.elem = TypeBool
	}
	sz := v.elem.size()
	v.raw = make([]byte, len(xs)*sz)
	for i, x := range xs {
		var bits uint64
		switch x := any(x).(type) {
		case uint8:
			bits = uint64(x)
		case int8:
			bits = uint64(uint8(x))
		case uint16:
			bits = uint64(x)
		case int16:
			bits = uint64(uint16(x))
		case uint32:
			bits = uint64(x)
		case int32:
			bits = uint64(uint32(x))
		case uint64:
			bits = x
		case int64:
			bits = uint64(x)
		case float32:
			bits = uint64(math.Float32bits(x))
		case float64:
			bits = math.Float64bits(x)
		case bool:
			if x {
				bits = 1
			}
		}
		putBits(v.raw[i*sz:], sz, bits)
	}
	return v
}

// NestedArray returns an array whose elements are the arrays elems. It
// returns an error if an element is not an array.
func NestedArray(elems ...Value) (Value, error) {
	for i, e := range elems {
		if e.typ != TypeArray {
			return Value{}, fmt.Errorf("gguf: nested array element %d is %s, not array", i, e.typ)
		}
	}
	return Value{typ: TypeArray, elem: TypeArray, n: len(elems), arrs: append([]Value(nil), elems...)}, nil
}

func putBits(b []byte, size int, bits uint64) {
	switch size {
	case 1:
		b[0] = byte(bits)
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(bits))
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(bits))
	case 8:
		binary.LittleEndian.PutUint64(b, bits)
	}
}

func getBits(b []byte, size int) uint64 {
	switch size {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(binary.LittleEndian.Uint16(b))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b))
	case 8:
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// scalar builds a fixed-size scalar of type t from its bits.
func scalar(t ValueType, bits uint64) Value { return Value{typ: t, bits: bits} }

// Index returns element i of an array value as a Value. It panics if v is
// not an array or i is out of range, like a slice index.
func (v Value) Index(i int) Value {
	if v.typ != TypeArray || i < 0 || i >= v.n {
		panic(fmt.Sprintf("gguf: Value.Index(%d) on %s of length %d", i, v.typ, v.n))
	}
	switch v.elem {
	case TypeString:
		return String(v.strs[i])
	case TypeArray:
		return v.arrs[i]
	}
	sz := v.elem.size()
	return scalar(v.elem, getBits(v.raw[i*sz:], sz))
}

// intParts decodes an integer scalar of type t: its value as int64 if
// signed, as uint64 otherwise.
func intParts(t ValueType, bits uint64) (s int64, u uint64, signed bool) {
	switch t {
	case TypeInt8:
		return int64(int8(bits)), 0, true
	case TypeInt16:
		return int64(int16(bits)), 0, true
	case TypeInt32:
		return int64(int32(bits)), 0, true
	case TypeInt64:
		return int64(bits), 0, true
	}
	return 0, bits, false
}

func wantErr(have ValueType, elem ValueType, want string) error {
	if have == TypeArray {
		return fmt.Errorf("is array of %s, want %s", elem, want)
	}
	return fmt.Errorf("is %s, want %s", have, want)
}

// AsUint returns an integer value of any GGUF integer type as uint64; it
// fails for other types and for negative values.
func (v Value) AsUint() (uint64, error) {
	if !v.typ.isInt() {
		return 0, wantErr(v.typ, v.elem, "unsigned integer")
	}
	s, u, signed := intParts(v.typ, v.bits)
	if signed {
		if s < 0 {
			return 0, fmt.Errorf("%s value %d is negative", v.typ, s)
		}
		return uint64(s), nil
	}
	return u, nil
}

// AsInt returns an integer value of any GGUF integer type as int64; it
// fails for other types and for u64 values above math.MaxInt64.
func (v Value) AsInt() (int64, error) {
	if !v.typ.isInt() {
		return 0, wantErr(v.typ, v.elem, "integer")
	}
	s, u, signed := intParts(v.typ, v.bits)
	if signed {
		return s, nil
	}
	if u > math.MaxInt64 {
		return 0, fmt.Errorf("%s value %d overflows int64", v.typ, u)
	}
	return int64(u), nil
}

// AsFloat returns an f32, f64 or integer value as float64.
func (v Value) AsFloat() (float64, error) {
	switch {
	case v.typ == TypeFloat32:
		return float64(math.Float32frombits(uint32(v.bits))), nil
	case v.typ == TypeFloat64:
		return math.Float64frombits(v.bits), nil
	case v.typ.isInt():
		s, u, signed := intParts(v.typ, v.bits)
		if signed {
			return float64(s), nil
		}
		return float64(u), nil
	}
	return 0, wantErr(v.typ, v.elem, "number")
}

// AsBool returns a bool value.
func (v Value) AsBool() (bool, error) {
	if v.typ != TypeBool {
		return false, wantErr(v.typ, v.elem, "bool")
	}
	return v.bits != 0, nil
}

// AsString returns a string value.
func (v Value) AsString() (string, error) {
	if v.typ != TypeString {
		return "", wantErr(v.typ, v.elem, "string")
	}
	return v.str, nil
}

// AsStrings returns the elements of an array of strings. The slice is a
// copy.
func (v Value) AsStrings() ([]string, error) {
	if v.typ != TypeArray || v.elem != TypeString {
		return nil, wantErr(v.typ, v.elem, "array of string")
	}
	return append([]string(nil), v.strs...), nil
}

// AsInts returns the elements of an array of any integer type as int64.
func (v Value) AsInts() ([]int64, error) {
	if v.typ != TypeArray || !v.elem.isInt() {
		return nil, wantErr(v.typ, v.elem, "array of integer")
	}
	out := make([]int64, v.n)
	for i := range out {
		x, err := v.Index(i).AsInt()
		if err != nil {
			return nil, fmt.Errorf("element %d: %w", i, err)
		}
		out[i] = x
	}
	return out, nil
}

// AsFloats returns the elements of an array of f32, f64 or integers as
// float64.
func (v Value) AsFloats() ([]float64, error) {
	if v.typ != TypeArray || !(v.elem.isFloat() || v.elem.isInt()) {
		return nil, wantErr(v.typ, v.elem, "array of float")
	}
	out := make([]float64, v.n)
	for i := range out {
		out[i], _ = v.Index(i).AsFloat()
	}
	return out, nil
}

// String formats v for people: numbers and bools plainly, strings quoted,
// arrays as [a, b, c] with at most 8 elements shown.
func (v Value) String() string {
	switch {
	case v.typ == TypeString:
		return strconv.Quote(v.str)
	case v.typ == TypeBool:
		return strconv.FormatBool(v.bits != 0)
	case v.typ == TypeFloat32:
		return strconv.FormatFloat(float64(math.Float32frombits(uint32(v.bits))), 'g', -1, 32)
	case v.typ == TypeFloat64:
		return strconv.FormatFloat(math.Float64frombits(v.bits), 'g', -1, 64)
	case v.typ.isInt():
		s, u, signed := intParts(v.typ, v.bits)
		if signed {
			return strconv.FormatInt(s, 10)
		}
		return strconv.FormatUint(u, 10)
	case v.typ == TypeArray:
		const show = 8
		var sb strings.Builder
		sb.WriteByte('[')
		for i := 0; i < v.n && i < show; i++ {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(v.Index(i).String())
		}
		if v.n > show {
			fmt.Fprintf(&sb, ", ... (%d total)", v.n)
		}
		sb.WriteByte(']')
		return sb.String()
	}
	return v.typ.String()
}
