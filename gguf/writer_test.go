package gguf

import (
	"bytes"
	"compress/gzip"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/tensor"
)

// readMaybeGz returns the bytes of path, gunzipped if it ends in .gz.
func readMaybeGz(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	if !strings.HasSuffix(path, ".gz") {
		return b
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		tb.Fatal(err)
	}
	b, err = io.ReadAll(zr)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// rewrite parses b and writes it back through NewWriterFrom.
func rewrite(tb testing.TB, name string, b []byte) []byte {
	tb.Helper()
	f, err := Parse(name, b)
	if err != nil {
		tb.Fatal(err)
	}
	var out bytes.Buffer
	n, err := NewWriterFrom(f).WriteTo(&out)
	if err != nil {
		tb.Fatal(err)
	}
	if n != int64(out.Len()) {
		tb.Errorf("WriteTo returned %d, wrote %d bytes", n, out.Len())
	}
	return out.Bytes()
}

func TestRewriteIdentical(t *testing.T) {
	files := testFiles(t)
	gz, err := filepath.Glob("../testdata/tokenizers/*.gguf.gz")
	if err != nil {
		t.Fatal(err)
	}
	if len(gz) == 0 {
		t.Fatal("no vocab-only GGUFs in ../testdata/tokenizers")
	}
	for _, path := range append(files, gz...) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			in := readMaybeGz(t, path)
			out := rewrite(t, path, in)
			if !bytes.Equal(in, out) {
				i := 0
				for i < len(in) && i < len(out) && in[i] == out[i] {
					i++
				}
				t.Fatalf("rewrite differs at byte %#x (sizes %d, %d)", i, len(in), len(out))
			}
		})
	}
}

// allValues returns metadata covering every value type, including empty
// and nested arrays.
func allValues(t testing.TB) []KV {
	nested, err := NestedArray(Array([]int32{1, -2}), Array([]string{"a", ""}), Array([]bool{}))
	if err != nil {
		t.Fatal(err)
	}
	deeper, err := NestedArray(nested, Array([]float64{math.Inf(1)}))
	if err != nil {
		t.Fatal(err)
	}
	return []KV{
		{"general.architecture", String("test")},
		{"u8", Uint8(255)}, {"i8", Int8(-128)}, {"u16", Uint16(65535)}, {"i16", Int16(-32768)},
		{"u32", Uint32(math.MaxUint32)}, {"i32", Int32(math.MinInt32)}, {"f32", Float32(-0.5)},
		{"bool.true", Bool(true)}, {"bool.false", Bool(false)}, {"string", String("héllo\x00")},
		{"string.empty", String("")},
		{"u64", Uint64(math.MaxUint64)}, {"i64", Int64(math.MinInt64)}, {"f64", Float64(math.Pi)},
		{"a.u8", Array([]uint8{0, 1, 255})}, {"a.i8", Array([]int8{-1})}, {"a.u16", Array([]uint16{7})},
		{"a.i16", Array([]int16{-7, 7})}, {"a.u32", Array([]uint32{1, 2, 3})}, {"a.i32", Array([]int32{})},
		{"a.f32", Array([]float32{1.5, float32(math.NaN())})}, {"a.bool", Array([]bool{true, false})},
		{"a.string", Array([]string{"x", "yz", ""})}, {"a.u64", Array([]uint64{math.MaxUint64})},
		{"a.i64", Array([]int64{-1, 1})}, {"a.f64", Array([]float64{2.5})},
		{"a.nested", nested}, {"a.nested2", deeper},
	}
}

// tinyWriter returns a writer with every value type and a few tensors.
func tinyWriter(t testing.TB) *Writer {
	w := NewWriter()
	for _, kv := range allValues(t) {
		w.SetKV(kv.Key, kv.Value)
	}
	add := func(name string, typ tensor.Type, dims []int64) {
		n := int64(1)
		for _, d := range dims {
			n *= d
		}
		size, err := typ.RowSize(n)
		if err != nil {
			t.Fatal(err)
		}
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i*7 + len(name))
		}
		if err := w.AddTensor(name, typ, dims, data); err != nil {
			t.Fatal(err)
		}
	}
	add("a", tensor.F32, []int64{3})
	add("b", tensor.Q8_0, []int64{64, 2})
	add("c", tensor.F16, []int64{2, 3, 1, 2})
	add("empty", tensor.F32, []int64{0, 4})
	add("d", tensor.Q4_K, []int64{256})
	return w
}

func TestWriterAllValueTypes(t *testing.T) {
	w := tinyWriter(t)
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := Parse("tiny.gguf", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	want := allValues(t)
	if len(f.KVs) != len(want) {
		t.Fatalf("%d KVs, want %d", len(f.KVs), len(want))
	}
	for i, kv := range want {
		t.Run(kv.Key, func(t *testing.T) {
			got := f.KVs[i]
			if got.Key != kv.Key || got.Value.Type() != kv.Value.Type() || got.Value.ElemType() != kv.Value.ElemType() ||
				got.Value.Len() != kv.Value.Len() || got.Value.String() != kv.Value.String() {
				t.Errorf("read back %s %s %v, wrote %s %s %v", got.Key, got.Value.Type(), got.Value, kv.Key, kv.Value.Type(), kv.Value)
			}
		})
	}
	names := []string{"a", "b", "c", "empty", "d"}
	for i, ti := range f.Tensors {
		if ti.Name != names[i] || ti.Offset%DefaultAlignment != 0 {
			t.Errorf("tensor %d: %s at %d", i, ti.Name, ti.Offset)
		}
		wt := w.tensors[i]
		if !bytes.Equal(ti.Data, wt.data) || !reflect.DeepEqual(ti.Dims, wt.dims) || ti.Type != wt.typ {
			t.Errorf("tensor %s differs after the round trip", ti.Name)
		}
	}
	if out := rewrite(t, "tiny.gguf", buf.Bytes()); !bytes.Equal(out, buf.Bytes()) {
		t.Error("second rewrite differs")
	}
	if buf.Len()%DefaultAlignment != 0 {
		t.Errorf("file size %d not padded to the alignment", buf.Len())
	}
}

func TestWriterAlignment(t *testing.T) {
	for _, a := range []uint32{1, 8, 64, 4096} {
		w := tinyWriter(t)
		w.SetKV(KeyAlignment, Uint32(a))
		var buf bytes.Buffer
		if _, err := w.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		f, err := Parse("tiny.gguf", buf.Bytes())
		if err != nil {
			t.Fatalf("alignment %d: %v", a, err)
		}
		if f.Alignment != uint64(a) {
			t.Errorf("alignment %d read back as %d", a, f.Alignment)
		}
		for _, ti := range f.Tensors {
			if ti.Offset%uint64(a) != 0 {
				t.Errorf("alignment %d: %s at offset %d", a, ti.Name, ti.Offset)
			}
		}
	}
	w := tinyWriter(t)
	w.SetKV(KeyAlignment, Uint32(48))
	if _, err := w.WriteTo(io.Discard); err == nil || !strings.Contains(err.Error(), "power of two") {
		t.Errorf("alignment 48: error %v", err)
	}
}

func TestWriterEdits(t *testing.T) {
	f, err := Open(mini)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := NewWriterFrom(f)
	w.SetKV("general.name", String("edited"))
	w.SetKV("extra.key", Int64(-3))
	if !w.RemoveKV("general.description") || w.RemoveKV("general.description") {
		t.Error("RemoveKV: wrong result")
	}
	kb, _ := f.Tensor("blk.0.attn_k_b.weight")
	if !w.RemoveTensor("blk.0.attn_v_b.weight") || w.RemoveTensor("blk.0.attn_v_b.weight") {
		t.Error("RemoveTensor: wrong result")
	}
	if err := w.ReplaceTensor("blk.0.attn_k_b.weight", tensor.Q8_0, []int64{32, 2048}, kb.Data); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensor("new", tensor.F32, []int64{2}, make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		name string
		err  error
	}{
		{"duplicate", w.AddTensor("new", tensor.F32, []int64{2}, make([]byte, 8))},
		{"short data", w.AddTensor("x", tensor.F32, []int64{3}, make([]byte, 8))},
		{"bad block", w.AddTensor("x", tensor.Q8_0, []int64{31}, make([]byte, 34))},
		{"unknown type", w.AddTensor("x", tensor.Type(99), []int64{1}, make([]byte, 1))},
		{"5 dims", w.AddTensor("x", tensor.F32, []int64{1, 1, 1, 1, 1}, make([]byte, 4))},
		{"replace missing", w.ReplaceTensor("nope", tensor.F32, []int64{1}, make([]byte, 4))},
	} {
		if bad.err == nil {
			t.Errorf("%s: no error", bad.name)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "edited.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	g, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if s, _ := g.String("general.name"); s != "edited" || g.KVs[1].Key != "general.name" {
		t.Errorf("general.name = %q at %q", s, g.KVs[1].Key)
	}
	if x, _ := g.Int("extra.key"); x != -3 || g.KVs[len(g.KVs)-1].Key != "extra.key" {
		t.Errorf("extra.key = %d", x)
	}
	if _, ok := g.Lookup("general.description"); ok {
		t.Error("general.description still there")
	}
	if _, ok := g.Tensor("blk.0.attn_v_b.weight"); ok {
		t.Error("attn_v_b still there")
	}
	if len(g.Tensors) != len(f.Tensors) || g.Tensors[len(g.Tensors)-1].Name != "new" {
		t.Errorf("%d tensors, last %q", len(g.Tensors), g.Tensors[len(g.Tensors)-1].Name)
	}
	kb2, _ := g.Tensor("blk.0.attn_k_b.weight")
	if !bytes.Equal(kb2.Data, kb.Data) || !reflect.DeepEqual(kb2.Dims, []int64{32, 2048}) {
		t.Errorf("replaced attn_k_b: dims %v", kb2.Dims)
	}
	for i := range g.Tensors[:3] {
		if g.Tensors[i].Name != f.Tensors[i].Name || !bytes.Equal(g.Tensors[i].Data, f.Tensors[i].Data) {
			t.Errorf("tensor %d changed", i)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("WriteFile left %d files in its directory", len(entries))
	}
}

func TestSplitRoundTrip(t *testing.T) {
	f, err := Open(mini)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	paths, err := NewWriterFrom(f).WriteSplit(filepath.Join(dir, "mini"), 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 3 || filepath.Base(paths[1]) != "mini-00002-of-00003.gguf" {
		t.Fatalf("paths %v", paths)
	}
	for _, open := range paths {
		t.Run(filepath.Base(open), func(t *testing.T) {
			g, err := Open(open)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			if g.Path != paths[0] || !reflect.DeepEqual(g.Shards, paths) {
				t.Errorf("Path %q Shards %v", g.Path, g.Shards)
			}
			if len(g.Tensors) != len(f.Tensors) {
				t.Fatalf("%d tensors, want %d", len(g.Tensors), len(f.Tensors))
			}
			shards := map[string]bool{}
			for i, ti := range g.Tensors {
				want := f.Tensors[i]
				if ti.Name != want.Name || ti.Type != want.Type || !reflect.DeepEqual(ti.Dims, want.Dims) || !bytes.Equal(ti.Data, want.Data) {
					t.Errorf("tensor %d: %s differs from %s", i, ti.Name, want.Name)
				}
				shards[ti.Shard] = true
			}
			if len(shards) != 3 {
				t.Errorf("tensors come from %d shards", len(shards))
			}
			if g.Architecture() != "glm-dsa" {
				t.Errorf("architecture %q", g.Architecture())
			}
			if n, err := g.Uint(KeySplitCount); n != 3 || err != nil {
				t.Errorf("split.count %d %v", n, err)
			}
			// Joining the shards and writing one file gives the original.
			var buf bytes.Buffer
			if _, err := NewWriterFrom(g).WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			orig, _ := os.ReadFile(mini)
			if !bytes.Equal(buf.Bytes(), orig) {
				t.Error("joined shards differ from the original file")
			}
		})
	}
}

func TestSplitErrors(t *testing.T) {
	f, err := Open(mini)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string) string // returns the path to open
		want  string
	}{
		{"missing shard", func(t *testing.T, dir string) string {
			paths, err := NewWriterFrom(f).WriteSplit(filepath.Join(dir, "m"), 3)
			if err != nil {
				t.Fatal(err)
			}
			os.Remove(paths[1])
			return paths[0]
		}, "m-00002-of-00003.gguf"},
		{"wrong tensor count", func(t *testing.T, dir string) string {
			paths, err := NewWriterFrom(f).WriteSplit(filepath.Join(dir, "m"), 2)
			if err != nil {
				t.Fatal(err)
			}
			g, err := Open(paths[0])
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			w := &Writer{Version: 3}
			for _, kv := range g.KVs {
				w.SetKV(kv.Key, kv.Value)
			}
			w.SetKV(KeySplitTensorsCount, Int32(5))
			for _, ti := range g.Tensors[:len(g.Tensors)/2] {
				if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, ti.Data); err != nil {
					t.Fatal(err)
				}
			}
			tmp := filepath.Join(dir, "first.gguf")
			if err := w.WriteFile(tmp); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, paths[0]); err != nil {
				t.Fatal(err)
			}
			return paths[1]
		}, `key "split.tensors.count": is 5`},
		{"shard number", func(t *testing.T, dir string) string {
			paths, err := NewWriterFrom(f).WriteSplit(filepath.Join(dir, "m"), 2)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(paths[1], filepath.Join(dir, "x.gguf")); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(paths[0], paths[1]); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(filepath.Join(dir, "x.gguf"), paths[0]); err != nil {
				t.Fatal(err)
			}
			return paths[0]
		}, `key "split.no": is 1, want 0`},
		{"bad name", func(t *testing.T, dir string) string {
			paths, err := NewWriterFrom(f).WriteSplit(filepath.Join(dir, "m"), 2)
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, "renamed.gguf")
			if err := os.Rename(paths[0], p); err != nil {
				t.Fatal(err)
			}
			return p
		}, "name is not <prefix>-NNNNN-of-NNNNN.gguf"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.setup(t, t.TempDir())
			g, err := Open(path)
			if err == nil {
				g.Close()
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestVersion2(t *testing.T) {
	w := tinyWriter(t)
	w.Version = 2
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := Parse("v2.gguf", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 2 || len(f.Tensors) != 5 {
		t.Errorf("version %d, %d tensors", f.Version, len(f.Tensors))
	}
	if out := rewrite(t, "v2.gguf", buf.Bytes()); !bytes.Equal(out, buf.Bytes()) {
		t.Error("v2 rewrite differs")
	}
	w.Version = 1
	if _, err := w.WriteTo(io.Discard); err == nil {
		t.Error("wrote version 1")
	}
}
