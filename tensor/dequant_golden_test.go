package tensor_test

import (
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/internal/testmodels"
	"github.com/glmrun/glmrun/tensor"
)

// dequantRef is one testdata/dequant/<model>.json.gz: llama.cpp's
// dequantization of every tensor of <model>.gguf.
type dequantRef struct {
	Model   string `json:"model"`
	Tensors map[string]struct {
		Type    string    `json:"type"`
		ShapeNE []int64   `json:"shape_ne"`
		SHA256  string    `json:"sha256_f32"`
		First16 []float32 `json:"first16"`
		Sum     float64   `json:"sum"`
	} `json:"tensors"`
}

func readDequantRef(t *testing.T, path string) *dequantRef {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var ref dequantRef
	if err := json.NewDecoder(zr).Decode(&ref); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &ref
}

// derivedModels are rebuilt from shipped files by internal/testmodels.
var derivedModels = map[string]bool{"glm5-mini-sparse.Q8_0": true, "glm5-mini-nextn.Q8_0": true}

// modelPath finds the GGUF file a dequant reference describes: a shipped
// model, a model derived by internal/testmodels, or a subset file that keeps
// only some tensors of a model too large to ship (its tensors are checked
// one by one); "" if there is none.
func modelPath(t *testing.T, name string) string {
	t.Helper()
	if derivedModels[name] {
		return testmodels.Path(t, name)
	}
	for _, p := range []string{
		filepath.Join("..", "testdata", "models", name+".gguf"),
		filepath.Join("..", "testdata", "formats", name+".gguf"),
		filepath.Join("..", "testdata", "models", name+".subset.gguf"),
	} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// TestDequantizeGolden dequantizes every tensor of every test model and
// compares the sha256 of its little-endian f32 bytes, its first values and
// its sum with llama.cpp's (testdata/dequant).
func TestDequantizeGolden(t *testing.T) {
	refs, err := filepath.Glob(filepath.Join("..", "testdata", "dequant", "*.json.gz"))
	if err != nil || len(refs) == 0 {
		t.Fatalf("no dequant references: %v", err)
	}
	covered := map[tensor.Type]bool{}
	for _, refPath := range refs {
		name := strings.TrimSuffix(filepath.Base(refPath), ".json.gz")
		t.Run(name, func(t *testing.T) {
			path := modelPath(t, name)
			if path == "" {
				t.Fatalf("no GGUF file for %s in testdata", name)
			}
			subset := strings.HasSuffix(path, ".subset.gguf")
			ref := readDequantRef(t, refPath)
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if !subset && len(f.Tensors) != len(ref.Tensors) {
				t.Errorf("%d tensors in %s, %d in the reference", len(f.Tensors), path, len(ref.Tensors))
			}
			types := map[string]int{}
			var buf []float32
			var raw []byte
			for _, ti := range f.Tensors {
				want, ok := ref.Tensors[ti.Name]
				if !ok {
					t.Errorf("%s: not in the reference", ti.Name)
					continue
				}
				if !strings.EqualFold(ti.Type.String(), want.Type) {
					t.Errorf("%s: type %s, reference %s", ti.Name, ti.Type, want.Type)
					continue
				}
				if !slices.Equal(ti.Dims, want.ShapeNE) {
					t.Errorf("%s: dims %v, reference %v", ti.Name, ti.Dims, want.ShapeNE)
					continue
				}
				n := int(ti.NumElements())
				buf = slices.Grow(buf[:0], n)[:n]
				if err := tensor.Dequantize(ti.Type, ti.Data, buf); err != nil {
					t.Errorf("%s: %v", ti.Name, err)
					continue
				}
				types[ti.Type.String()]++
				covered[ti.Type] = true
				raw = slices.Grow(raw[:0], 4*n)[:4*n]
				var sum float64
				for i, v := range buf {
					binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
					sum += float64(v)
				}
				h := sha256.Sum256(raw)
				if got := hex.EncodeToString(h[:]); got != want.SHA256 {
					t.Errorf("%s (%s): sha256 %s, want %s; first values %v, want %v",
						ti.Name, ti.Type, got, want.SHA256, buf[:min(8, n)], want.First16[:min(8, len(want.First16))])
					continue
				}
				for i, w := range want.First16 {
					if math.Float32bits(buf[i]) != math.Float32bits(w) {
						t.Errorf("%s: value %d is %g, want %g", ti.Name, i, buf[i], w)
						break
					}
				}
				if math.Abs(sum-want.Sum) > 1e-6*max(1, math.Abs(want.Sum)) {
					t.Errorf("%s: sum %g, want %g", ti.Name, sum, want.Sum)
				}
			}
			t.Logf("%s: %d tensors match, types %v", filepath.Base(path), len(f.Tensors), types)
		})
	}
	var names []string
	for ty := range covered {
		names = append(names, ty.String())
	}
	slices.Sort(names)
	t.Logf("types checked against llama.cpp: %s", strings.Join(names, " "))
	for _, ty := range []tensor.Type{tensor.F32, tensor.F16, tensor.BF16, tensor.Q4_0, tensor.Q4_1,
		tensor.Q5_0, tensor.Q5_1, tensor.Q8_0, tensor.Q2_K, tensor.Q3_K, tensor.Q4_K, tensor.Q5_K,
		tensor.Q6_K, tensor.IQ4_NL, tensor.IQ4_XS, tensor.IQ2_XXS, tensor.IQ2_XS, tensor.IQ2_S,
		tensor.IQ3_XXS, tensor.IQ3_S, tensor.IQ1_S, tensor.IQ1_M} {
		if !covered[ty] && !t.Failed() && !testing.Short() {
			t.Errorf("type %s is not covered by any test model", ty)
		}
	}
}
