package gguf

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/tensor"
)

// baseFile returns a small valid GGUF whose fields the corruption cases
// find by their unique names.
func baseFile(t testing.TB) []byte {
	w := NewWriter()
	w.SetKV("general.architecture", String("test"))
	w.SetKV("key.str", String("hello"))
	w.SetKV("key.bool", Bool(true))
	w.SetKV("key.u32", Uint32(7))
	w.SetKV("key.arr", Array([]int32{1, 2, 3}))
	w.SetKV("key.strs", Array([]string{"a", "bc"}))
	w.SetKV("key.bools", Array([]bool{false, true}))
	w.SetKV("key.dup", Uint8(1))
	w.SetKV("key.dvp", Uint8(2))
	w.SetKV("key.align", Uint32(16)) // general.alignment once patched
	nested, _ := NestedArray(Array([]uint8{1}))
	w.SetKV("key.nest", nested)
	mustAdd := func(name string, typ tensor.Type, dims []int64) {
		n := int64(1)
		for _, d := range dims {
			n *= d
		}
		size, _ := typ.RowSize(n)
		if err := w.AddTensor(name, typ, dims, bytes.Repeat([]byte{1}, int(size))); err != nil {
			t.Fatal(err)
		}
	}
	mustAdd("tensor.one", tensor.F32, []int64{8, 2})
	mustAdd("tensor.two", tensor.Q8_0, []int64{64, 2})
	mustAdd("tensor.thr", tensor.F32, []int64{4})
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// badAlignment returns a file whose general.alignment is v, written
// with a valid alignment and then patched.
func badAlignment(t testing.TB, v Value) []byte {
	w := NewWriter()
	w.SetKV("general.architecture", String("test"))
	w.SetKV(KeyAlignment, Uint64(32))
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	p := at(t, b, KeyAlignment)
	w.SetKV(KeyAlignment, v)
	var tail bytes.Buffer
	e := &encoder{w: bufio.NewWriter(&tail)}
	e.u32(uint32(v.Type()))
	e.value(v)
	e.w.Flush()
	return append(b[:p:p], tail.Bytes()...)
}

// at returns the offset just after the length-prefixed string s in b.
func at(t testing.TB, b []byte, s string) int {
	t.Helper()
	pat := binary.LittleEndian.AppendUint64(nil, uint64(len(s)))
	pat = append(pat, s...)
	i := bytes.Index(b, pat)
	if i < 0 || bytes.Index(b[i+1:], pat) >= 0 {
		t.Fatalf("string %q not found exactly once", s)
	}
	return i + len(pat)
}

func put32(b []byte, off int, x uint32) { binary.LittleEndian.PutUint32(b[off:], x) }
func put64(b []byte, off int, x uint64) { binary.LittleEndian.PutUint64(b[off:], x) }

// tensorField returns the offset of a field of the info of tensor name:
// "ndims", "ne0", "ne1", "type" (assuming 2 dims, or ndims given), "offset".
func tensorField(t testing.TB, b []byte, name, field string) int {
	p := at(t, b, name)
	nd := int(binary.LittleEndian.Uint32(b[p:]))
	switch field {
	case "ndims":
		return p
	case "ne0":
		return p + 4
	case "ne1":
		return p + 12
	case "type":
		return p + 4 + 8*nd
	case "offset":
		return p + 8 + 8*nd
	}
	t.Fatalf("unknown field %s", field)
	return 0
}

func TestValidation(t *testing.T) {
	base := baseFile(t)
	if _, err := Parse("base.gguf", base); err != nil {
		t.Fatalf("base file: %v", err)
	}
	tests := []struct {
		name    string
		corrupt func(t *testing.T, b []byte) []byte
		key     string // FormatError.Key wanted
		tensor  string // FormatError.Tensor wanted
		want    string // in the message
	}{
		{"empty file", func(t *testing.T, b []byte) []byte { return nil }, "", "", "too short for the magic"},
		{"3 bytes", func(t *testing.T, b []byte) []byte { return b[:3] }, "", "", "too short for the magic"},
		{"bad magic", func(t *testing.T, b []byte) []byte { b[0] = 'X'; return b }, "", "", "not a GGUF file"},
		{"big-endian magic", func(t *testing.T, b []byte) []byte { copy(b, "FUGG"); return b }, "", "", "big-endian"},
		{"version 1", func(t *testing.T, b []byte) []byte { put32(b, 4, 1); return b }, "", "", "unsupported GGUF version 1"},
		{"version 4", func(t *testing.T, b []byte) []byte { put32(b, 4, 4); return b }, "", "", "unsupported GGUF version 4"},
		{"big-endian version", func(t *testing.T, b []byte) []byte { put32(b, 4, 3<<24); return b }, "", "", "big-endian"},
		{"header only", func(t *testing.T, b []byte) []byte { return b[:12] }, "", "", "truncated file: tensor count"},
		{"truncated metadata", func(t *testing.T, b []byte) []byte { return b[:at(t, b, "key.nest")+14] }, "key.nest", "", "truncated file"},
		{"truncated infos", func(t *testing.T, b []byte) []byte { return b[:at(t, b, "tensor.two")+10] }, "", "tensor.two", "truncated file"},
		{"truncated data", func(t *testing.T, b []byte) []byte { return b[:len(b)-40] }, "", "tensor.thr", "outside the data section"},
		{"no data section", func(t *testing.T, b []byte) []byte { return b[:tensorField(t, b, "tensor.thr", "offset")+8] }, "", "tensor.one", "outside the data section"},
		{"metadata count huge", func(t *testing.T, b []byte) []byte { put64(b, 16, 1<<40); return b }, "", "", "metadata count 1099511627776 past the end"},
		{"tensor count huge", func(t *testing.T, b []byte) []byte { put64(b, 8, math.MaxUint64); return b }, "", "", "tensor count 18446744073709551615 past the end"},
		{"key length huge", func(t *testing.T, b []byte) []byte { put64(b, at(t, b, "key.str")-15, 1<<50); return b }, "", "", "key 1 length 1125899906842624 past the end"},
		{"string length past end", func(t *testing.T, b []byte) []byte { put64(b, at(t, b, "key.str")+4, uint64(len(b))); return b }, "key.str", "", "string length"},
		{"array count past end", func(t *testing.T, b []byte) []byte { put64(b, at(t, b, "key.arr")+8, 1<<61); return b }, "key.arr", "", "i32 array length 2305843009213693952 past the end"},
		{"string array count past end", func(t *testing.T, b []byte) []byte { put64(b, at(t, b, "key.strs")+8, 1<<40); return b }, "key.strs", "", "string array length"},
		{"string in array past end", func(t *testing.T, b []byte) []byte {
			put64(b, at(t, b, "key.strs")+16+9, 1<<40)
			return b
		}, "key.strs", "", "string 1 of 2: length 1099511627776 past the end"},
		{"nested array count past end", func(t *testing.T, b []byte) []byte { put64(b, at(t, b, "key.nest")+8, 1<<40); return b }, "key.nest", "", "nested array length"},
		{"unknown value type", func(t *testing.T, b []byte) []byte { put32(b, at(t, b, "key.u32"), 13); return b }, "key.u32", "", "unknown value type 13"},
		{"unknown element type", func(t *testing.T, b []byte) []byte { put32(b, at(t, b, "key.arr")+4, 99); return b }, "key.arr", "", "unknown array element type 99"},
		{"bool 2", func(t *testing.T, b []byte) []byte { b[at(t, b, "key.bool")+4] = 2; return b }, "key.bool", "", "bool value 2 is not 0 or 1"},
		{"bool array 7", func(t *testing.T, b []byte) []byte { b[at(t, b, "key.bools")+17] = 7; return b }, "key.bools", "", "bool array element 1 is 7"},
		{"duplicate key", func(t *testing.T, b []byte) []byte { b[at(t, b, "key.dvp")-2] = 'u'; return b }, "key.dup", "", "duplicate key"},
		{"alignment 48", func(t *testing.T, b []byte) []byte { return badAlignment(t, Uint32(48)) }, "general.alignment", "", "alignment 48 is not a power of two"},
		{"alignment 0", func(t *testing.T, b []byte) []byte { return badAlignment(t, Uint32(0)) }, "general.alignment", "", "alignment 0 is not a power of two"},
		{"alignment 2^40", func(t *testing.T, b []byte) []byte { return badAlignment(t, Uint64(1<<40)) }, "general.alignment", "", "alignment 1099511627776 is not a power of two up to"},
		{"alignment string", func(t *testing.T, b []byte) []byte { return badAlignment(t, String("32")) }, "general.alignment", "", "alignment is string, want unsigned integer"},
		{"5 dims", func(t *testing.T, b []byte) []byte { put32(b, tensorField(t, b, "tensor.one", "ndims"), 5); return b }, "", "tensor.one", "5 dimensions, at most 4"},
		{"dim above int64", func(t *testing.T, b []byte) []byte { put64(b, tensorField(t, b, "tensor.one", "ne1"), 1<<63); return b }, "", "tensor.one", "too large"},
		{"element count overflow", func(t *testing.T, b []byte) []byte {
			put64(b, tensorField(t, b, "tensor.one", "ne0"), 1<<40)
			put64(b, tensorField(t, b, "tensor.one", "ne1"), 1<<40)
			return b
		}, "", "tensor.one", "element count of dims [1099511627776 1099511627776] overflows"},
		{"byte size overflow", func(t *testing.T, b []byte) []byte {
			put64(b, tensorField(t, b, "tensor.one", "ne0"), 1<<31)
			put64(b, tensorField(t, b, "tensor.one", "ne1"), 1<<31)
			return b
		}, "", "tensor.one", "byte size of dims [2147483648 2147483648] overflows"},
		{"huge tensor", func(t *testing.T, b []byte) []byte { put64(b, tensorField(t, b, "tensor.one", "ne1"), 1<<40); return b }, "", "tensor.one", "outside the data section"},
		{"unknown ggml type", func(t *testing.T, b []byte) []byte { put32(b, tensorField(t, b, "tensor.one", "type"), 4); return b }, "", "tensor.one", "unknown ggml type 4"},
		{"row not whole blocks", func(t *testing.T, b []byte) []byte { put64(b, tensorField(t, b, "tensor.two", "ne0"), 48); return b }, "", "tensor.two", "row length 48 is not a multiple of the Q8_0 block size 32"},
		{"duplicate tensor", func(t *testing.T, b []byte) []byte { copy(b[at(t, b, "tensor.thr")-3:], "one"); return b }, "", "tensor.one", "duplicate tensor name"},
		{"unaligned offset", func(t *testing.T, b []byte) []byte { put64(b, tensorField(t, b, "tensor.two", "offset"), 65); return b }, "", "tensor.two", "not a multiple of the alignment 32"},
		{"offset past end", func(t *testing.T, b []byte) []byte {
			put64(b, tensorField(t, b, "tensor.two", "offset"), 1<<40)
			return b
		}, "", "tensor.two", "outside the data section"},
		{"offset wraps", func(t *testing.T, b []byte) []byte {
			put64(b, tensorField(t, b, "tensor.two", "offset"), math.MaxUint64-31)
			return b
		}, "", "tensor.two", "outside the data section"},
		{"overlap", func(t *testing.T, b []byte) []byte { put64(b, tensorField(t, b, "tensor.thr", "offset"), 32); return b }, "", "tensor.thr", `overlaps tensor "tensor.one"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.corrupt(t, bytes.Clone(base))
			path := filepath.Join(t.TempDir(), "bad.gguf")
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			for _, via := range []string{"Parse", "Open"} {
				var err error
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				if via == "Parse" {
					_, err = Parse(path, b)
				} else {
					var f *File
					if f, err = Open(path); err == nil {
						f.Close()
					}
				}
				runtime.ReadMemStats(&after)
				if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
					t.Errorf("%s allocated %d bytes for a %d-byte file", via, alloc, len(b))
				}
				var fe *FormatError
				if !errors.As(err, &fe) {
					t.Fatalf("%s: error %v is not a *FormatError", via, err)
				}
				if fe.Key != tc.key || fe.Tensor != tc.tensor || fe.Path != path {
					t.Errorf("%s: error names key %q tensor %q file %q; want %q %q %q", via, fe.Key, fe.Tensor, fe.Path, tc.key, tc.tensor, path)
				}
				if !strings.Contains(fe.Msg, tc.want) {
					t.Errorf("%s: error %q does not say %q", via, err, tc.want)
				}
				if fe.Off < 0 || fe.Off > int64(len(b)) {
					t.Errorf("%s: offset %d outside the %d-byte file", via, fe.Off, len(b))
				}
			}
		})
	}
}

func TestNestingLimit(t *testing.T) {
	v := Array([]uint8{1})
	for range maxNesting + 1 {
		var err error
		if v, err = NestedArray(v); err != nil {
			t.Fatal(err)
		}
	}
	w := NewWriter()
	w.SetKV("deep", v)
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	_, err := Parse("deep.gguf", buf.Bytes())
	if err == nil || !strings.Contains(err.Error(), "nested more than") || !strings.Contains(err.Error(), `key "deep"`) {
		t.Errorf("error %v", err)
	}
}

func TestOpenNotRegular(t *testing.T) {
	for _, path := range []string{t.TempDir(), filepath.Join(t.TempDir(), "missing.gguf")} {
		if f, err := Open(path); err == nil {
			f.Close()
			t.Errorf("Open(%s) succeeded", path)
		} else if !strings.Contains(err.Error(), path) {
			t.Errorf("error %q does not name %s", err, path)
		}
	}
}

// TestAllocationBound parses files made of many minimal items, the worst
// cases for memory per input byte, and checks the bound that FuzzOpen
// enforces.
func TestAllocationBound(t *testing.T) {
	const n = 50000
	tests := []struct {
		name  string
		build func(w *Writer)
	}{
		{"empty nested arrays", func(w *Writer) {
			elems := make([]Value, n)
			for i := range elems {
				elems[i] = Array([]uint8{})
			}
			v, err := NestedArray(elems...)
			if err != nil {
				t.Fatal(err)
			}
			w.SetKV("nested", v)
		}},
		{"empty strings", func(w *Writer) { w.SetKV("strings", Array(make([]string, n))) }},
		{"empty keys", func(w *Writer) {
			for i := range n {
				w.kvs = append(w.kvs, KV{Key: string(rune(i)), Value: Uint8(0)})
			}
		}},
		{"scalar tensors", func(w *Writer) {
			for i := range n {
				w.tensors = append(w.tensors, writerTensor{name: string(rune(i + 1)), typ: tensor.F32, dims: nil, data: make([]byte, 4)})
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWriter()
			tc.build(w)
			var buf bytes.Buffer
			if _, err := w.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := Parse("many.gguf", buf.Bytes())
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatal(err)
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d bytes allocated for %d bytes (%.1fx)", alloc, buf.Len(), float64(alloc)/float64(buf.Len()))
			if alloc > 1<<20+32*uint64(buf.Len()) {
				t.Errorf("%d bytes allocated for a %d-byte file", alloc, buf.Len())
			}
		})
	}
}
