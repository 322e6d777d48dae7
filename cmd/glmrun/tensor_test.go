package main

import (
	"bytes"
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
	"github.com/glmrun/glmrun/internal/npy"
	"github.com/glmrun/glmrun/internal/testmodels"
	"github.com/glmrun/glmrun/tensor"
)

// dequantRef dequantizes a whole tensor with the tensor package.
func dequantRef(t *testing.T, ti *gguf.TensorInfo) []float32 {
	t.Helper()
	ref := make([]float32, ti.NumElements())
	if err := tensor.Dequantize(ti.Type, ti.Data, ref); err != nil {
		t.Fatal(err)
	}
	return ref
}

// sameBits reports whether a and b hold the same float32 bit patterns.
func sameBits(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

func TestTensorNpy(t *testing.T) {
	tests := []struct {
		file, name string
		typ        string
		shape      []int
	}{
		{testModels + "glm5-mini.Q8_0.gguf", "blk.0.attn_q_b.weight", "Q8_0", []int{384, 256}},
		{testModels + "glm5-mini.Q8_0.gguf", "blk.1.ffn_gate_exps.weight", "Q8_0", []int{16, 256, 256}},
		{testModels + "glm5-mini.Q8_0.gguf", "blk.1.exp_probs_b.bias", "F32", []int{16}},
		{testModels + "glm5-mini.Q4_K_M.gguf", "blk.0.ffn_down.weight", "Q4_K", []int{256, 512}},
		{testModels + "glm5-mini.Q4_K_M.gguf", "output.weight", "Q6_K", []int{1024, 256}},
		{testModels + "glm5-mini.Q4_K_M.gguf", "blk.0.attn_k_b.weight", "Q5_0", []int{8, 256, 32}},
		{"../../testdata/formats/llama-dense.real.IQ4_XS.gguf", "blk.1.attn_q.weight", "IQ4_XS", []int{256, 256}},
		{"../../testdata/formats/llama-dense.real.BF16.gguf", "token_embd.weight", "BF16", []int{128, 256}},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		t.Run(filepath.Base(tt.file)+"/"+tt.name, func(t *testing.T) {
			out := filepath.Join(dir, filepath.Base(tt.file)+"."+tt.name+".npy")
			// The flag after the positional arguments, as in the usage line.
			code, stdout, errs := runCmd(t, "tensor", tt.file, tt.name, "-o", out)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			if !strings.Contains(stdout, out) || !strings.Contains(stdout, tt.typ) {
				t.Errorf("stdout %q does not name the file and type", stdout)
			}
			raw, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(raw, []byte("\x93NUMPY\x01\x00")) || !bytes.Contains(raw[:128], []byte("'descr': '<f4', 'fortran_order': False")) {
				t.Errorf("not a v1.0 <f4 C-order .npy: %q", raw[:min(len(raw), 128)])
			}
			a, err := npy.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(a.Shape, tt.shape) {
				t.Errorf("shape %v, want %v", a.Shape, tt.shape)
			}
			f, err := gguf.Open(tt.file)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			ti, ok := f.Tensor(tt.name)
			if !ok {
				t.Fatalf("no %s", tt.name)
			}
			if ti.Type.String() != tt.typ {
				t.Fatalf("%s is %s, test expects %s", tt.name, ti.Type, tt.typ)
			}
			if !sameBits(a.F32, dequantRef(t, ti)) {
				t.Error(".npy values differ from tensor.Dequantize")
			}
		})
	}
}

// TestTensorHFName checks that Hugging Face names select the GGUF tensor,
// and one expert of a stacked tensor its slice.
func TestTensorHFName(t *testing.T) {
	file := testModels + "ds2-mini.Q8_0.gguf"
	f, err := gguf.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()

	out := filepath.Join(dir, "qa.npy")
	if code, _, errs := runCmd(t, "tensor", "-o", out, file, "model.layers.2.self_attn.q_a_proj.weight"); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	a, err := npy.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	ti, _ := f.Tensor("blk.2.attn_q_a.weight")
	if !sameBits(a.F32, dequantRef(t, ti)) || !slices.Equal(a.Shape, []int{256, 256}) {
		t.Errorf("q_a_proj: shape %v or values differ from blk.2.attn_q_a.weight", a.Shape)
	}

	out = filepath.Join(dir, "e5.npy")
	if code, _, errs := runCmd(t, "tensor", file, "model.layers.1.mlp.experts.5.down_proj.weight", "-o", out); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	a, err = npy.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	ti, _ = f.Tensor("blk.1.ffn_down_exps.weight")
	all := dequantRef(t, ti)
	per := int(ti.Dims[0] * ti.Dims[1])
	if !slices.Equal(a.Shape, []int{int(ti.Dims[1]), int(ti.Dims[0])}) || !sameBits(a.F32, all[5*per:6*per]) {
		t.Errorf("expert 5: shape %v or values differ from slice 5 of blk.1.ffn_down_exps.weight", a.Shape)
	}
}

func TestTensorErrors(t *testing.T) {
	dir := t.TempDir()
	// A file with a tensor in a type that cannot be dequantized yet.
	w := gguf.NewWriter()
	w.SetKV("general.architecture", gguf.String("glm-dsa"))
	if err := w.AddTensor("blk.3.ffn_up.weight", tensor.TQ1_0, []int64{256, 2}, make([]byte, 2*tensor.TQ1_0.TypeSize())); err != nil {
		t.Fatal(err)
	}
	tq1 := filepath.Join(dir, "tq1.gguf")
	if err := w.WriteFile(tq1); err != nil {
		t.Fatal(err)
	}
	model := testModels + "glm5-mini.Q8_0.gguf"
	out := filepath.Join(dir, "out.npy")
	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"unsupported type", []string{"tensor", tq1, "blk.3.ffn_up.weight", "-o", out}, 1,
			[]string{"tensor blk.3.ffn_up.weight: quant type TQ1_0 is not supported yet"}},
		{"unknown tensor", []string{"tensor", model, "blk.1.ffn_up_exp.weight", "-o", out}, 1,
			[]string{`no tensor "blk.1.ffn_up_exp.weight"`, "did you mean blk.1.ffn_up_exps.weight"}},
		{"unknown tensor, no suggestion", []string{"tensor", model, "zzzz", "-o", out}, 1,
			[]string{`no tensor "zzzz"`}},
		{"HF name of a split tensor", []string{"tensor", model, "model.layers.1.self_attn.kv_b_proj.weight", "-o", out}, 1,
			[]string{"blk.1.attn_kv_b.weight", "blk.1.attn_k_b.weight", "blk.1.attn_v_b.weight"}},
		{"expert out of range", []string{"tensor", model, "model.layers.1.mlp.experts.16.up_proj.weight", "-o", out}, 1,
			[]string{"blk.1.ffn_up_exps.weight", "no expert 16"}},
		{"missing file", []string{"tensor", filepath.Join(dir, "nope.gguf"), "output.weight", "-o", out}, 1,
			[]string{"nope.gguf"}},
		{"unwritable output", []string{"tensor", model, "output_norm.weight", "-o", filepath.Join(dir, "no", "such", "dir.npy")}, 1,
			[]string{"output_norm.weight", "dir.npy"}},
		{"no name", []string{"tensor", model}, 2, []string{"want FILE.gguf and a tensor NAME"}},
		{"bad flag", []string{"tensor", "-x", model, "output.weight"}, 2, []string{"-x"}},
		{"flag without value", []string{"tensor", model, "output.weight", "-o"}, 2, []string{"-o"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, errs := runCmd(t, tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.code, errs)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			for _, w := range tt.want {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr %q does not contain %q", errs, w)
				}
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s written despite the error", out)
			}
		})
	}
}

func TestCloseNames(t *testing.T) {
	names := []string{"blk.0.attn_q_a.weight", "blk.0.attn_q_b.weight", "blk.10.attn_q_a.weight", "output.weight"}
	tests := []struct {
		query string
		want  []string
	}{
		{"blk.0.attn_q_a.weigth", []string{"blk.0.attn_q_a.weight", "blk.0.attn_q_b.weight", "blk.10.attn_q_a.weight"}},
		{"attn_q_a", []string{"blk.0.attn_q_a.weight", "blk.10.attn_q_a.weight"}},
		{"output", []string{"output.weight"}},
		{"token_embd.weight", nil},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			if got := closeNames(tt.query, names, 5); !slices.Equal(got, tt.want) {
				t.Errorf("closeNames = %v, want %v", got, tt.want)
			}
		})
	}
	if d := editDistance("kitten", "sitting"); d != 3 {
		t.Errorf("editDistance(kitten, sitting) = %d, want 3", d)
	}
}

// oracleTensor is one entry of testdata/dequant/<model>.json: what
// llama.cpp reports and computes for a tensor.
type oracleTensor struct {
	Type      string  `json:"type"`
	ShapeNE   []int64 `json:"shape_ne"`
	SHA256F32 string  `json:"sha256_f32"`
}

// oracleFiles returns, for every model in testdata that has a dequant
// oracle, the model path and its oracle tensors.
func oracleFiles(t *testing.T) map[string]map[string]oracleTensor {
	t.Helper()
	refs, err := filepath.Glob("../../testdata/dequant/*.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]oracleTensor{}
	for _, ref := range refs {
		name := strings.TrimSuffix(filepath.Base(ref), ".json.gz")
		if name == "glm5-mini.BF16" {
			continue // not shipped (only a subset of its tensors is)
		}
		path := testmodels.Path(t, name) // shipped, or derived (sparse, nextn)
		raw, err := os.ReadFile(gunzipTemp(t, ref))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Tensors map[string]oracleTensor `json:"tensors"`
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		out[path] = doc.Tensors
	}
	if len(out) < 22 {
		t.Fatalf("only %d models with a dequant oracle", len(out))
	}
	return out
}

// TestAgainstLlamaCpp checks inspect's tensor table (names, ne shapes,
// types) against what llama.cpp reports for every shipped model, and that
// glmrun tensor writes llama.cpp's dequantized values bit for bit for one
// tensor of each type in each file.
func TestAgainstLlamaCpp(t *testing.T) {
	dir := t.TempDir()
	for path, oracle := range oracleFiles(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			m := inspectJSON(t, path)
			tensors := m["tensors"].([]any)
			if len(tensors) != len(oracle) {
				t.Errorf("%d tensors, llama.cpp lists %d", len(tensors), len(oracle))
			}
			seenType := map[string]bool{}
			for _, x := range tensors {
				tr := x.(map[string]any)
				name := tr["name"].(string)
				want, ok := oracle[name]
				if !ok {
					t.Errorf("%s: not in llama.cpp's list", name)
					continue
				}
				shape, _ := json.Marshal(tr["shape"])
				wantShape, _ := json.Marshal(want.ShapeNE)
				if string(shape) != string(wantShape) {
					t.Errorf("%s: shape %s, llama.cpp %s", name, shape, wantShape)
				}
				typ := tr["type"].(string)
				if !strings.EqualFold(typ, want.Type) {
					t.Errorf("%s: type %s, llama.cpp %s", name, typ, want.Type)
				}
				if seenType[typ] {
					continue
				}
				seenType[typ] = true
				out := filepath.Join(dir, filepath.Base(path)+"."+name+".npy")
				if code, _, errs := runCmd(t, "tensor", path, name, "-o", out); code != 0 {
					t.Errorf("tensor %s: exit %d: %s", name, code, errs)
					continue
				}
				a, err := npy.ReadFile(out)
				if err != nil {
					t.Fatal(err)
				}
				h := sha256.New()
				var b [4]byte
				for _, v := range a.F32 {
					binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
					h.Write(b[:])
				}
				if got := hex.EncodeToString(h.Sum(nil)); got != want.SHA256F32 {
					t.Errorf("tensor %s (%s): sha256 of f32 %s, llama.cpp %s", name, typ, got, want.SHA256F32)
				}
			}
		})
	}
}
