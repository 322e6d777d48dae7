package gguf

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/tensor"
)

// testFiles returns every GGUF model shipped in testdata.
func testFiles(tb testing.TB) []string {
	tb.Helper()
	var all []string
	for _, pat := range []string{"../testdata/models/*.gguf", "../testdata/formats/*.gguf"} {
		m, err := filepath.Glob(pat)
		if err != nil {
			tb.Fatal(err)
		}
		all = append(all, m...)
	}
	if len(all) == 0 {
		tb.Fatal("no GGUF files under ../testdata")
	}
	return all
}

const mini = "../testdata/models/glm5-mini.Q8_0.gguf"

func TestOpenTestdata(t *testing.T) {
	for _, path := range testFiles(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			f, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Version != 3 || f.Alignment != 32 {
				t.Errorf("version %d alignment %d, want 3 and 32", f.Version, f.Alignment)
			}
			arch := f.Architecture()
			if arch == "" {
				t.Error("no general.architecture")
			}
			if n, err := f.Uint(arch + ".block_count"); err != nil || n == 0 {
				t.Errorf("block_count %d, %v", n, err)
			}
			if len(f.Tensors) == 0 {
				t.Fatal("no tensors")
			}
			var prevEnd uint64
			for _, ti := range f.Tensors {
				size, err := ti.Type.RowSize(ti.NumElements())
				if err != nil {
					t.Fatalf("%s: %v", ti.Name, err)
				}
				if int64(len(ti.Data)) != size {
					t.Errorf("%s: %d data bytes, want %d", ti.Name, len(ti.Data), size)
				}
				if ti.Offset < prevEnd {
					t.Errorf("%s: offset %d before the end %d of the previous tensor", ti.Name, ti.Offset, prevEnd)
				}
				prevEnd = ti.Offset + uint64(size)
				if got, ok := f.Tensor(ti.Name); !ok || got != ti {
					t.Errorf("Tensor(%q) = %v, %v", ti.Name, got, ok)
				}
				if ti.Shard != path {
					t.Errorf("%s: shard %q, want %q", ti.Name, ti.Shard, path)
				}
				if ti.RowLen()*ti.NumRows() != ti.NumElements() {
					t.Errorf("%s: RowLen %d * NumRows %d != %d", ti.Name, ti.RowLen(), ti.NumRows(), ti.NumElements())
				}
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestGLM5MiniContents(t *testing.T) {
	f, err := Open(mini)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := f.Architecture(); got != "glm-dsa" {
		t.Errorf("architecture %q", got)
	}
	if len(f.Tensors) != 67 || len(f.KVs) != 48 {
		t.Errorf("%d tensors, %d KVs; want 67, 48", len(f.Tensors), len(f.KVs))
	}
	ti, ok := f.Tensor("blk.0.attn_k_b.weight")
	if !ok {
		t.Fatal("no blk.0.attn_k_b.weight")
	}
	if ti.Type != tensor.Q8_0 || len(ti.Dims) != 3 || ti.Dims[0] != 32 || ti.Dims[1] != 256 || ti.Dims[2] != 8 {
		t.Errorf("attn_k_b: %s %v", ti.Type, ti.Dims)
	}
	if ti.RowLen() != 32 || ti.NumRows() != 256*8 {
		t.Errorf("RowLen %d NumRows %d", ti.RowLen(), ti.NumRows())
	}
	toks, err := f.Strings("tokenizer.ggml.tokens")
	if err != nil || len(toks) != 1024 || toks[0] != "!" {
		t.Errorf("tokens: %d %q... %v", len(toks), toks[:min(len(toks), 1)], err)
	}
	types, err := f.Ints("tokenizer.ggml.token_type")
	if err != nil || len(types) != 1024 || types[0] != 1 {
		t.Errorf("token_type: %v", err)
	}
	if eps, err := f.Float("glm-dsa.attention.layer_norm_rms_epsilon"); err != nil || float32(eps) != 1e-5 {
		t.Errorf("eps %g %v", eps, err)
	}
	if b, err := f.Bool("glm-dsa.expert_weights_norm"); err != nil || !b {
		t.Errorf("expert_weights_norm %v %v", b, err)
	}
	if _, ok := f.Tensor("nope"); ok {
		t.Error("Tensor(nope) found")
	}
	if _, ok := f.Lookup("nope"); ok {
		t.Error("Lookup(nope) found")
	}
}

func TestGetterErrors(t *testing.T) {
	f, err := Open(mini)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"missing", func() error { _, err := f.Uint("glm-dsa.nope"); return err }, `key "glm-dsa.nope": missing`},
		{"string as uint", func() error { _, err := f.Uint("general.name"); return err }, `key "general.name": is string, want unsigned integer`},
		{"uint as string", func() error { _, err := f.String("glm-dsa.block_count"); return err }, `is u32, want string`},
		{"array as string", func() error { _, err := f.String("tokenizer.ggml.tokens"); return err }, `is array of string, want string`},
		{"strings as ints", func() error { _, err := f.Ints("tokenizer.ggml.tokens"); return err }, `is array of string, want array of integer`},
		{"float as bool", func() error { _, err := f.Bool("glm-dsa.rope.freq_base"); return err }, `is f32, want bool`},
		{"bool as float", func() error { _, err := f.Float("glm-dsa.expert_weights_norm"); return err }, `is bool, want number`},
		{"scalar as floats", func() error { _, err := f.Floats("glm-dsa.rope.freq_base"); return err }, `is f32, want array of float`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), mini) {
				t.Errorf("error %q does not name the file and contain %q", err, tc.want)
			}
		})
	}
	_, err = f.Int("missing.key")
	if !errors.Is(err, ErrMissingKey) {
		t.Errorf("error %v does not wrap ErrMissingKey", err)
	}
}

func TestValueConversions(t *testing.T) {
	tests := []struct {
		v       Value
		uintOK  bool
		u       uint64
		intOK   bool
		i       int64
		f       float64
		floatOK bool
	}{
		{Uint8(200), true, 200, true, 200, 200, true},
		{Int8(-5), false, 0, true, -5, -5, true},
		{Uint16(65535), true, 65535, true, 65535, 65535, true},
		{Int16(-300), false, 0, true, -300, -300, true},
		{Uint32(1 << 31), true, 1 << 31, true, 1 << 31, 1 << 31, true},
		{Int32(7), true, 7, true, 7, 7, true},
		{Uint64(1 << 63), true, 1 << 63, false, 0, 1 << 63, true},
		{Int64(-1 << 40), false, 0, true, -1 << 40, -1 << 40, true},
		{Float32(0.5), false, 0, false, 0, 0.5, true},
		{Float64(-2.25), false, 0, false, 0, -2.25, true},
		{String("x"), false, 0, false, 0, 0, false},
		{Bool(true), false, 0, false, 0, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.v.Type().String()+"="+tc.v.String(), func(t *testing.T) {
			u, err := tc.v.AsUint()
			if (err == nil) != tc.uintOK || (err == nil && u != tc.u) {
				t.Errorf("AsUint = %d, %v", u, err)
			}
			i, err := tc.v.AsInt()
			if (err == nil) != tc.intOK || (err == nil && i != tc.i) {
				t.Errorf("AsInt = %d, %v", i, err)
			}
			f, err := tc.v.AsFloat()
			if (err == nil) != tc.floatOK || (err == nil && f != tc.f) {
				t.Errorf("AsFloat = %g, %v", f, err)
			}
		})
	}
}
