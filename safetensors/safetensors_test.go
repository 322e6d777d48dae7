package safetensors

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// encode returns a safetensors file holding tensors.
func encode(t testing.TB, metadata map[string]string, tensors ...*Tensor) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, metadata, tensors); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// rawFile builds a file from a literal header and data section.
func rawFile(header string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, data...)
}

func sampleTensors() []*Tensor {
	return []*Tensor{
		{Name: "z.weight", DType: BF16, Shape: []int64{2, 3}, Data: []byte{0x80, 0x3f, 0, 0x40, 0x40, 0x40, 0x80, 0xbf, 0, 0, 0x80, 0x7f}},
		{Name: "a.scale", DType: F32, Shape: []int64{}, Data: []byte{0, 0, 0x80, 0x3f}},
		{Name: "m.fp8", DType: F8E4M3, Shape: []int64{4}, Data: []byte{0x38, 0xb8, 0x7e, 0x01}},
		{Name: "empty", DType: F16, Shape: []int64{0, 5}, Data: []byte{}},
	}
}

func TestParseRoundTrip(t *testing.T) {
	in := sampleTensors()
	b := encode(t, map[string]string{"format": "pt"}, in...)
	f, err := Parse("x.safetensors", b)
	if err != nil {
		t.Fatal(err)
	}
	if f.Metadata["format"] != "pt" {
		t.Errorf("metadata %v", f.Metadata)
	}
	var names []string
	for _, tt := range f.Tensors {
		names = append(names, tt.Name)
	}
	if want := []string{"a.scale", "empty", "m.fp8", "z.weight"}; !slices.Equal(names, want) {
		t.Errorf("tensor order %q, want sorted %q", names, want)
	}
	for _, want := range in {
		got, ok := f.Tensor(want.Name)
		if !ok {
			t.Fatalf("%s missing", want.Name)
		}
		if got.DType != want.DType || !slices.Equal(got.Shape, want.Shape) || !bytes.Equal(got.Data, want.Data) {
			t.Errorf("%s: got %s %v % x, want %s %v % x", want.Name, got.DType, got.Shape, got.Data, want.DType, want.Shape, want.Data)
		}
		if len(got.Data) > 0 && !bytes.Equal(b[got.Offset:got.Offset+int64(len(got.Data))], want.Data) {
			t.Errorf("%s: Offset %d does not point at its data", want.Name, got.Offset)
		}
	}
}

func TestParseErrors(t *testing.T) {
	good := encode(t, nil, sampleTensors()...)
	f32 := func(name string, begin, end int) string {
		return `"` + name + `":{"dtype":"F32","shape":[1],"data_offsets":[` + itoa(begin) + "," + itoa(end) + "]}"
	}
	tests := []struct {
		name   string
		file   []byte
		tensor string // tensor the error must name, or ""
		msg    string // substring of the error
	}{
		{"short", []byte{1, 2, 3}, "", "shorter than the 8-byte header length"},
		{"huge header", binary.LittleEndian.AppendUint64(nil, 1<<40), "", "over the 100000000-byte limit"},
		{"truncated header", good[:20], "", "runs past the end of the file"},
		{"truncated data", good[:len(good)-3], "m.fp8", "run past the"},
		{"trailing bytes", append(slices.Clone(good), 0), "", "tensors cover"},
		{"not json", rawFile("{nope", nil), "", "header JSON"},
		{"not object", rawFile(`[1, 2]`, nil), "", "not a JSON object"},
		{"empty header", rawFile("", nil), "", "not a JSON object"},
		{"bad utf8", rawFile("{\"\xff\":1}", nil), "", "UTF-8"},
		{"data after object", rawFile(`{} {}`, nil), "", "data after the object"},
		{"unknown dtype", rawFile(`{"w":{"dtype":"F12","shape":[1],"data_offsets":[0,2]}}`, make([]byte, 2)), "w", `unknown dtype "F12"`},
		{"no dtype", rawFile(`{"w":{"shape":[1],"data_offsets":[0,2]}}`, make([]byte, 2)), "w", "no dtype"},
		{"no shape", rawFile(`{"w":{"dtype":"F32","data_offsets":[0,4]}}`, make([]byte, 4)), "w", "no shape"},
		{"negative dim", rawFile(`{"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, make([]byte, 4)), "w", "not a non-negative integer"},
		{"fractional dim", rawFile(`{"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}}`, make([]byte, 4)), "w", "not a non-negative integer"},
		{"overflowing shape", rawFile(`{"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}}`, make([]byte, 4)), "w", "too many elements"},
		{"bytes overflow", rawFile(`{"w":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,4]}}`, make([]byte, 4)), "w", "overflow"},
		{"three offsets", rawFile(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}}`, make([]byte, 8)), "w", "has 3 entries"},
		{"backwards offsets", rawFile(`{"w":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}}`, make([]byte, 4)), "w", "end before they begin"},
		{"size mismatch", rawFile(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, make([]byte, 4)), "w", "takes 8 bytes"},
		{"lying offsets", rawFile("{"+f32("w", 1<<40, 1<<40+4)+"}", make([]byte, 4)), "w", "run past the 4 data bytes"},
		{"gap", rawFile("{"+f32("a", 0, 4)+","+f32("b", 8, 12)+"}", make([]byte, 12)), "b", "leave a gap"},
		{"overlap", rawFile("{"+f32("a", 0, 4)+","+f32("b", 2, 6)+"}", make([]byte, 6)), "b", "overlap"},
		{"duplicate", rawFile("{"+f32("a", 0, 4)+","+f32("a", 4, 8)+"}", make([]byte, 8)), "a", "appears twice"},
		{"bad metadata", rawFile(`{"__metadata__":{"format":1}}`, nil), "", "not an object of strings"},
		{"half-byte F4", rawFile(`{"w":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}`, make([]byte, 2)), "w", "not a whole number of bytes"},
		{"empty name", rawFile(`{"":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, make([]byte, 4)), "", "empty tensor name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("bad.safetensors", tc.file)
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a *FormatError", err)
			}
			if fe.Path != "bad.safetensors" || fe.Tensor != tc.tensor || !strings.Contains(fe.Msg, tc.msg) {
				t.Errorf("error %q (path %q, tensor %q), want tensor %q and %q", err, fe.Path, fe.Tensor, tc.tensor, tc.msg)
			}
		})
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestToFloat32(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	tests := []struct {
		dtype DType
		src   []byte
		want  []float32
	}{
		{F32, []byte{0, 0, 0x80, 0x3f, 0, 0, 0xc0, 0xff}, []float32{1, nan}},
		{BF16, []byte{0x80, 0x3f, 0x49, 0x40, 0x80, 0xff}, []float32{1, 3.140625, -inf}},
		{F16, []byte{0x00, 0x3c, 0x01, 0x00, 0x00, 0xfc}, []float32{1, 0x1p-24, -inf}},
		{F64, []byte{0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0x9a, 0x99, 0x99, 0x99, 0x99, 0x99, 0xb9, 0x3f}, []float32{1, 0.1}},
		// E4M3: 1, −1, the largest (448), the smallest subnormal (2^-9),
		// the smallest normal (2^-6), −0 and the two NaNs.
		{F8E4M3, []byte{0x38, 0xb8, 0x7e, 0x01, 0x08, 0x80, 0x7f, 0xff}, []float32{1, -1, 448, 0x1p-9, 0x1p-6, float32(math.Copysign(0, -1)), nan, nan}},
		// E5M2: 1, the largest (57344), the smallest subnormal (2^-16), ±inf, NaN.
		{F8E5M2, []byte{0x3c, 0x7b, 0x01, 0x7c, 0xfc, 0x7d}, []float32{1, 57344, 0x1p-16, inf, -inf, nan}},
		{F8E8M0, []byte{127, 128, 0, 254, 255}, []float32{1, 2, 0x1p-127, 0x1p127, nan}},
		{BOOL, []byte{0, 1}, []float32{0, 1}},
		{U8, []byte{255}, []float32{255}},
		{I8, []byte{0x80}, []float32{-128}},
		{U16, []byte{0xff, 0xff}, []float32{65535}},
		{I16, []byte{0, 0x80}, []float32{-32768}},
		{U32, []byte{1, 0, 0, 1}, []float32{16777216}}, // 2^24 + 1 rounds to even
		{I32, []byte{0xff, 0xff, 0xff, 0xff}, []float32{-1}},
		{U64, []byte{7, 0, 0, 0, 0, 0, 0, 0}, []float32{7}},
		{I64, []byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, []float32{-2}},
	}
	for _, tc := range tests {
		t.Run(string(tc.dtype), func(t *testing.T) {
			got := make([]float32, len(tc.want))
			if err := ToFloat32(tc.dtype, tc.src, got); err != nil {
				t.Fatal(err)
			}
			for i := range got {
				w, g := tc.want[i], got[i]
				if w != w {
					if g == g {
						t.Errorf("element %d: %v, want NaN", i, g)
					}
					continue
				}
				if math.Float32bits(g) != math.Float32bits(w) {
					t.Errorf("element %d: %v (%#08x), want %v (%#08x)", i, g, math.Float32bits(g), w, math.Float32bits(w))
				}
			}
		})
	}
}

func TestToFloat32Errors(t *testing.T) {
	tests := []struct {
		dtype DType
		src   []byte
		n     int
		msg   string
	}{
		{F32, make([]byte, 3), 1, "take 4 bytes, got 3"},
		{"F12", nil, 0, `unknown dtype "F12"`},
		{F4, []byte{0}, 2, "not supported"},
		{C64, make([]byte, 8), 1, "not supported"},
	}
	for _, tc := range tests {
		err := ToFloat32(tc.dtype, tc.src, make([]float32, tc.n))
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: error %v, want %q", tc.dtype, err, tc.msg)
		}
	}
}

// TestE4M3Table checks the whole E4M3 table against the format's
// definition read another way: the magnitudes of codes 0..126 are
// strictly increasing, each normal binade holds 8 evenly spaced values,
// and the sign bit only flips the sign.
func TestE4M3Table(t *testing.T) {
	for b := 1; b < 0x7f; b++ {
		if !(fp8e4m3[b] > fp8e4m3[b-1]) {
			t.Fatalf("code %#x: %v not above %v", b, fp8e4m3[b], fp8e4m3[b-1])
		}
		if b >= 8 {
			e := b >> 3
			step := float32(math.Ldexp(1, e-7-3))
			if fp8e4m3[b]-fp8e4m3[b-1] != step && b&7 != 0 {
				t.Errorf("code %#x: step %v, want %v", b, fp8e4m3[b]-fp8e4m3[b-1], step)
			}
		}
		if neg := fp8e4m3[b|0x80]; neg != -fp8e4m3[b] {
			t.Errorf("code %#x: %v is not −%v", b|0x80, neg, fp8e4m3[b])
		}
	}
}

// writeCheckpoint writes files (name → tensors) and an optional index into
// a new directory.
func writeCheckpoint(t *testing.T, files map[string][]*Tensor, index map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, ts := range files {
		if err := os.WriteFile(filepath.Join(dir, name), encode(t, nil, ts...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if index != nil {
		b, _ := json.Marshal(map[string]any{"metadata": map[string]any{}, "weight_map": index})
		if err := os.WriteFile(filepath.Join(dir, IndexFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func scalar(name string) *Tensor {
	return &Tensor{Name: name, DType: F32, Shape: []int64{1}, Data: []byte{0, 0, 0x80, 0x3f}}
}

func TestOpenDir(t *testing.T) {
	files := map[string][]*Tensor{
		"model-00002-of-00002.safetensors": {scalar("b"), scalar("a2")},
		"model-00001-of-00002.safetensors": {scalar("c"), scalar("a1")},
	}
	index := map[string]string{
		"a1": "model-00001-of-00002.safetensors", "c": "model-00001-of-00002.safetensors",
		"a2": "model-00002-of-00002.safetensors", "b": "model-00002-of-00002.safetensors",
	}
	for _, withIndex := range []bool{false, true} {
		idx := index
		if !withIndex {
			idx = nil
		}
		c, err := OpenDir(writeCheckpoint(t, files, idx))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tt := range c.Tensors {
			names = append(names, tt.Name)
		}
		// Shard by shard in file order, sorted within a shard.
		if want := []string{"a1", "c", "a2", "b"}; !slices.Equal(names, want) {
			t.Errorf("index %v: order %q, want %q", withIndex, names, want)
		}
		if tt, ok := c.Tensor("b"); !ok || filepath.Base(tt.Path) != "model-00002-of-00002.safetensors" {
			t.Errorf("index %v: b not found in its shard", withIndex)
		}
		c.Close()
	}
}

func TestOpenDirErrors(t *testing.T) {
	one := "model-00001-of-00002.safetensors"
	two := "model-00002-of-00002.safetensors"
	tests := []struct {
		name   string
		files  map[string][]*Tensor
		index  map[string]string
		tensor string
		msg    string
	}{
		{"missing shard", map[string][]*Tensor{one: {scalar("a")}}, map[string]string{"a": one, "b": two}, "", "no such file"},
		{"missing tensor", map[string][]*Tensor{one: {scalar("a")}}, map[string]string{"a": one, "b": one}, "b", "not in the file"},
		{"extra tensor", map[string][]*Tensor{one: {scalar("a"), scalar("x")}}, map[string]string{"a": one}, "x", "not in the weight_map"},
		{"wrong shard", map[string][]*Tensor{one: {scalar("a")}, two: {scalar("b")}}, map[string]string{"a": two, "b": one}, "a", "puts it in " + two},
		{"duplicate", map[string][]*Tensor{one: {scalar("a")}, two: {scalar("a")}}, nil, "a", "also in"},
		{"no files", map[string][]*Tensor{}, nil, "", "no model*.safetensors"},
		{"escaping shard", map[string][]*Tensor{one: {scalar("a")}}, map[string]string{"a": "../x.safetensors"}, "a", "not a file name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := OpenDir(writeCheckpoint(t, tc.files, tc.index))
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %v, want %q", err, tc.msg)
			}
			var fe *FormatError
			if tc.tensor != "" && (!errors.As(err, &fe) || fe.Tensor != tc.tensor) {
				t.Errorf("error %v does not name tensor %q", err, tc.tensor)
			}
		})
	}
}

// TestFP8MatchesTorch checks the three 8-bit float tables, all 256 codes
// each, NaN bit patterns included, against torch 2.14's own conversion
// (uint8 codes viewed as float8_e4m3fn / float8_e5m2 / float8_e8m0fnu,
// then .float()): the sha256 of the 256 little-endian float32 results.
func TestFP8MatchesTorch(t *testing.T) {
	tests := []struct {
		dtype DType
		sha   string
	}{
		{F8E4M3, "8c7066d2da2e927f14261b753a1335e027ff331349e91d5b568e1a8c45ce189a"},
		{F8E5M2, "f27340bbd2d23b7ee6ed74aef34425c94f9037517888fe98870711bec0be8f6c"},
		{F8E8M0, "23087d46161db6c173d49279468f618e07c22256342d1ed5a55baa0a5398672c"},
	}
	codes := make([]byte, 256)
	for i := range codes {
		codes[i] = byte(i)
	}
	for _, tc := range tests {
		vals := make([]float32, 256)
		if err := ToFloat32(tc.dtype, codes, vals); err != nil {
			t.Fatal(err)
		}
		var b []byte
		for _, v := range vals {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
		if got := fmt.Sprintf("%x", sha256.Sum256(b)); got != tc.sha {
			t.Errorf("%s: table sha256 %s, torch's %s", tc.dtype, got, tc.sha)
		}
	}
}
