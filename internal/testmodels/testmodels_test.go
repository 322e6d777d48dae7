package testmodels

import (
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/tensor"
)

func TestDir(t *testing.T) {
	d := Dir(t)
	if !filepath.IsAbs(d) {
		t.Errorf("Dir %q is not absolute", d)
	}
	if _, err := os.Stat(filepath.Join(d, "glm5-mini.Q8_0.gguf")); err != nil {
		t.Error(err)
	}
}

func TestPathShipped(t *testing.T) {
	tests := []struct{ name, want string }{
		{"glm5-mini.Q8_0", "models/glm5-mini.Q8_0.gguf"},
		{"glm5-mini.BF16.subset", "models/glm5-mini.BF16.subset.gguf"},
		{"llama-dense.real.Q4_0", "formats/llama-dense.real.Q4_0.gguf"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Path(t, tc.name)
			if want := filepath.Join(filepath.Dir(Dir(t)), filepath.FromSlash(tc.want)); got != want {
				t.Errorf("Path = %q, want %q", got, want)
			}
		})
	}
	if _, err := path("no-such-model"); err == nil || !strings.Contains(err.Error(), `"no-such-model"`) {
		t.Errorf("unknown model: error %v", err)
	}
}

func TestPathDerived(t *testing.T) {
	tests := []struct {
		name    string
		tensors int
		check   func(f *gguf.File) error
	}{
		{"glm5-mini-sparse.Q8_0", 67, func(f *gguf.File) error {
			k, err := f.Uint("glm-dsa.attention.indexer.top_k")
			if err == nil && k != 8 {
				err = fmt.Errorf("top_k %d, want 8", k)
			}
			return err
		}},
		{"glm5-mini-nextn.Q8_0", 96, func(f *gguf.File) error {
			_, err := f.Uint("glm-dsa.nextn_predict_layers")
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := Path(t, tc.name) // the sha256 was checked
			if again := Path(t, tc.name); again != p {
				t.Errorf("second Path %q, first %q", again, p)
			}
			f, err := gguf.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if len(f.Tensors) != tc.tensors {
				t.Errorf("%d tensors, want %d", len(f.Tensors), tc.tensors)
			}
			name, _ := f.String("general.name")
			if want := strings.TrimSuffix(tc.name, ".Q8_0"); name != want {
				t.Errorf("general.name %q, want %q", name, want)
			}
			if err := tc.check(f); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestDeriveRepairsCache checks that a wrong file in the cache is rebuilt.
func TestDeriveRepairsCache(t *testing.T) {
	repo, err := root()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	const name = "glm5-mini-sparse.Q8_0"
	p, err := derive(repo, dir, name, recipes[name])
	if err != nil {
		t.Fatal(err)
	}
	want, _ := fileSum(p)
	if err := os.WriteFile(p, []byte("GGUF garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	p2, err := derive(repo, dir, name, recipes[name])
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := fileSum(p2); p2 != p || got != want {
		t.Errorf("after repair: %s sha256 %s, want %s %s", p2, got, p, want)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("cache holds %d files, want 1", len(entries))
	}
	if _, err := derive(repo, t.TempDir(), name, func(string) (*gguf.Writer, func(), error) {
		w := gguf.NewWriter()
		w.SetKV("general.architecture", gguf.String("wrong"))
		return w, func() {}, nil
	}); err == nil {
		t.Error("a wrong build was accepted")
	}
}

func TestRef(t *testing.T) {
	for _, name := range []string{
		"ds2-mini.Q8_0.deq-F32.P1",
		"ds2-mini.Q8_0.deq-F32.P1.json",
		"hidden/ds2-mini.Q8_0.deq-F32.P1/index",
	} {
		t.Run(name, func(t *testing.T) {
			var v map[string]any
			if err := json.Unmarshal(Ref(t, name), &v); err != nil {
				t.Fatal(err)
			}
			if len(v) == 0 {
				t.Error("empty JSON object")
			}
		})
	}
	if _, err := ref("nope"); err == nil {
		t.Error("missing ref: no error")
	}
}

// TestBF16Subset checks the shipped BF16 subset byte for byte against
// llama.cpp's dequantization hashes of the original file: BF16 widens to
// f32 exactly by a 16-bit shift.
func TestBF16Subset(t *testing.T) {
	f, err := gguf.Open(Path(t, "glm5-mini.BF16.subset"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	raw, err := os.Open(filepath.Join(filepath.Dir(Dir(t)), "dequant", "glm5-mini.BF16.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	zr, err := gzip.NewReader(raw)
	if err != nil {
		t.Fatal(err)
	}
	var oracle struct {
		Tensors map[string]struct {
			Type   string  `json:"type"`
			Shape  []int64 `json:"shape_ne"`
			SHA256 string  `json:"sha256_f32"`
		} `json:"tensors"`
	}
	if err := json.NewDecoder(zr).Decode(&oracle); err != nil {
		t.Fatal(err)
	}
	if len(f.Tensors) < 10 {
		t.Errorf("only %d tensors", len(f.Tensors))
	}
	kinds := map[string]bool{}
	for _, ti := range f.Tensors {
		t.Run(ti.Name, func(t *testing.T) {
			want, ok := oracle.Tensors[ti.Name]
			if !ok {
				t.Fatal("not in the oracle")
			}
			var f32 []byte
			switch ti.Type {
			case tensor.F32:
				f32 = ti.Data
			case tensor.BF16:
				f32 = make([]byte, 2*len(ti.Data))
				for i := 0; i+1 < len(ti.Data); i += 2 {
					binary.LittleEndian.PutUint32(f32[2*i:], uint32(binary.LittleEndian.Uint16(ti.Data[i:]))<<16)
				}
			default:
				t.Fatalf("type %s", ti.Type)
			}
			sum := sha256.Sum256(f32)
			if got := hex.EncodeToString(sum[:]); got != want.SHA256 {
				t.Errorf("sha256 of f32 %s, oracle %s", got, want.SHA256)
			}
			if !equalDims(ti.Dims, want.Shape) {
				t.Errorf("dims %v, oracle %v", ti.Dims, want.Shape)
			}
			kinds[ti.Type.String()+string(rune('0'+len(ti.Dims)))] = true
		})
	}
	for _, k := range []string{"F321", "F322", "BF162", "BF163"} {
		if !kinds[k] {
			t.Errorf("no %s-D %s tensor in the subset", k[len(k)-1:], k[:len(k)-1])
		}
	}
	if arch := f.Architecture(); arch != "glm-dsa" {
		t.Errorf("architecture %q", arch)
	}
}

func equalDims(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
