package tensor

import (
	"errors"
	"fmt"
)

// Type is a ggml tensor element type, numbered as in ggml.h and GGUF files.
type Type uint32

// The ggml types that exist in GGUF files today. Ids 4, 5, 31-33 and 36-38
// belonged to types that ggml has removed.
const (
	F32     Type = 0
	F16     Type = 1
	Q4_0    Type = 2
	Q4_1    Type = 3
	Q5_0    Type = 6
	Q5_1    Type = 7
	Q8_0    Type = 8
	Q8_1    Type = 9
	Q2_K    Type = 10
	Q3_K    Type = 11
	Q4_K    Type = 12
	Q5_K    Type = 13
	Q6_K    Type = 14
	Q8_K    Type = 15
	IQ2_XXS Type = 16
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ1_S   Type = 19
	IQ4_NL  Type = 20
	IQ3_S   Type = 21
	IQ2_S   Type = 22
	IQ4_XS  Type = 23
	I8      Type = 24
	I16     Type = 25
	I32     Type = 26
	I64     Type = 27
	F64     Type = 28
	IQ1_M   Type = 29
	BF16    Type = 30
	TQ1_0   Type = 34
	TQ2_0   Type = 35
	MXFP4   Type = 39
	NVFP4   Type = 40
)

// typeInfo is one row of the ggml type table.
type typeInfo struct {
	name      string
	blockSize int // elements per block
	typeSize  int // bytes per block
}

// types is indexed by Type; the zero row marks an id that names no type.
var types = [...]typeInfo{
	F32:     {"F32", 1, 4},
	F16:     {"F16", 1, 2},
	Q4_0:    {"Q4_0", 32, 18},
	Q4_1:    {"Q4_1", 32, 20},
	Q5_0:    {"Q5_0", 32, 22},
	Q5_1:    {"Q5_1", 32, 24},
	Q8_0:    {"Q8_0", 32, 34},
	Q8_1:    {"Q8_1", 32, 36},
	Q2_K:    {"Q2_K", 256, 84},
	Q3_K:    {"Q3_K", 256, 110},
	Q4_K:    {"Q4_K", 256, 144},
	Q5_K:    {"Q5_K", 256, 176},
	Q6_K:    {"Q6_K", 256, 210},
	Q8_K:    {"Q8_K", 256, 292},
	IQ2_XXS: {"IQ2_XXS", 256, 66},
	IQ2_XS:  {"IQ2_XS", 256, 74},
	IQ3_XXS: {"IQ3_XXS", 256, 98},
	IQ1_S:   {"IQ1_S", 256, 50},
	IQ4_NL:  {"IQ4_NL", 32, 18},
	IQ3_S:   {"IQ3_S", 256, 110},
	IQ2_S:   {"IQ2_S", 256, 82},
	IQ4_XS:  {"IQ4_XS", 256, 136},
	I8:      {"I8", 1, 1},
	I16:     {"I16", 1, 2},
	I32:     {"I32", 1, 4},
	I64:     {"I64", 1, 8},
	F64:     {"F64", 1, 8},
	IQ1_M:   {"IQ1_M", 256, 56},
	BF16:    {"BF16", 1, 2},
	TQ1_0:   {"TQ1_0", 256, 54},
	TQ2_0:   {"TQ2_0", 256, 66},
	MXFP4:   {"MXFP4", 32, 17},
	NVFP4:   {"NVFP4", 64, 36},
}

func (t Type) info() (typeInfo, bool) {
	if int(t) >= len(types) || types[t].blockSize == 0 {
		return typeInfo{}, false
	}
	return types[t], true
}

// Known reports whether t is a ggml type id that exists today.
func (t Type) Known() bool {
	_, ok := t.info()
	return ok
}

// String returns ggml's name for t, or "type(N)" for an unknown id.
func (t Type) String() string {
	if ti, ok := t.info(); ok {
		return ti.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockSize returns the number of elements in one block of t (1 for plain
// types), or 0 for an unknown type.
func (t Type) BlockSize() int {
	ti, _ := t.info()
	return ti.blockSize
}

// TypeSize returns the number of bytes in one block of t, or 0 for an
// unknown type.
func (t Type) TypeSize() int {
	ti, _ := t.info()
	return ti.typeSize
}

// ParseType returns the type whose ggml name is name (for example "Q4_K").
func ParseType(name string) (Type, error) {
	for i, ti := range types {
		if ti.blockSize != 0 && ti.name == name {
			return Type(i), nil
		}
	}
	return 0, fmt.Errorf("unknown ggml type %q", name)
}

// ErrUnknownType is returned for a type id that ggml does not define.
var ErrUnknownType = errors.New("unknown ggml type")

// RowSize returns the number of bytes that n elements of type t occupy.
// It fails when t is unknown or n is not a whole number of blocks.
func (t Type) RowSize(n int64) (int64, error) {
	ti, ok := t.info()
	if !ok {
		return 0, fmt.Errorf("%w %d", ErrUnknownType, uint32(t))
	}
	if n < 0 || n%int64(ti.blockSize) != 0 {
		return 0, fmt.Errorf("%d elements of %s are not a whole number of %d-element blocks", n, ti.name, ti.blockSize)
	}
	return n / int64(ti.blockSize) * int64(ti.typeSize), nil
}
