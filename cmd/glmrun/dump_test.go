package main

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/internal/testmodels"
	"github.com/glmrun/glmrun/model/dump"
	"github.com/glmrun/glmrun/tensor"
)

const glm5Mini = "../../testdata/models/glm5-mini.Q8_0.gguf"

// promptP1 returns the P1 prompt of the glm5-mini references as a --tokens
// value.
func promptP1(t *testing.T) string {
	t.Helper()
	f, err := os.Open("../../testdata/refs/glm5-mini.Q8_0.deq-F32.P1.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Prompt []int `json:"prompt"`
	}
	if err := json.NewDecoder(zr).Decode(&ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Prompt) == 0 {
		t.Fatal("no prompt in the P1 reference")
	}
	ids := make([]string, len(ref.Prompt))
	for i, id := range ref.Prompt {
		ids[i] = strconv.Itoa(id)
	}
	return strings.Join(ids, ",")
}

// runCode runs glmrun with args and fails the test unless it exits with
// code; it returns stdout.
func runCode(t *testing.T, code int, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if got := run(args, &stdout, &stderr); got != code {
		t.Fatalf("glmrun %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s",
			strings.Join(args, " "), got, code, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// compareDirs compares two dumps with dump.Compare.
func compareDirs(t *testing.T, a, b string, tol dump.Tolerance) *dump.Report {
	t.Helper()
	da, err := dump.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	db, err := dump.Open(b)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := dump.Compare(da, db, tol)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestDumpMatchesLlamaCPP dumps glm5-mini.Q8_0 on P1 through both paths
// and diffs the dumps against llama.cpp's (batch and one-token-at-a-time)
// with glmrun diff at 1e-3 max abs: no tensor may diverge, and the
// residual stream of every layer must be among those compared.
func TestDumpMatchesLlamaCPP(t *testing.T) {
	tokens := promptP1(t)
	refs := filepath.Join(hiddenRefs, "glm5-mini.Q8_0.deq-F32.P1")
	tests := []struct {
		name string
		flag []string
		ref  string
		must []string // tensors that must have been compared
	}{
		{"prefill vs batch", nil, refs, []string{"embd", "blk.0.kqv_out", "blk.0.attn_out", "blk.0.ffn_out", "blk.0.out",
			"blk.1.attn_out", "blk.1.ffn_out", "blk.1.out", "blk.2.out", "result_norm", "blk.1.ffn_moe_topk", "blk.2.top_k"}},
		{"decode vs seq", []string{"--decode"}, refs + ".seq", []string{"embd", "blk.0.out", "blk.1.out", "blk.2.out", "result_norm"}},
	}
	dirs := map[string]string{}
	for _, tc := range tests {
		dir := filepath.Join(t.TempDir(), "dump")
		dirs[tc.name] = dir
		t.Run(tc.name, func(t *testing.T) {
			out := runCode(t, 0, append([]string{"dump", "-ctk", "f32", "-m", glm5Mini, "--tokens", tokens, "-o", dir}, tc.flag...)...)
			if !strings.Contains(out, "for 20 tokens") {
				t.Errorf("dump said %q", out)
			}
			out = runCode(t, 0, "diff", "--atol", "1e-3", "--rtol", "0", dir, tc.ref)
			if !strings.HasPrefix(lastLine(out), "no divergence") {
				t.Errorf("diff: %s", lastLine(out))
			}
			rep := compareDirs(t, dir, tc.ref, dump.Tolerance{ATol: 1e-3})
			compared := map[string]bool{}
			worst := 0.0
			for _, r := range rep.Results {
				compared[r.Name] = true
				worst = max(worst, r.MaxAbs)
			}
			for _, n := range tc.must {
				if !compared[n] {
					t.Errorf("%s was not compared", n)
				}
			}
			t.Logf("%d tensors compared, worst max abs %.3g", len(rep.Results), worst)
		})
	}
	// The decode dump holds the same tensors as the prefill dump, with the
	// same shapes and (nearly) the same values.
	if len(dirs) == 2 {
		rep := compareDirs(t, dirs["decode vs seq"], dirs["prefill vs batch"], dump.Tolerance{ATol: 1e-4})
		if f := rep.FirstDivergence(); f != nil || len(rep.OnlyA)+len(rep.OnlyB) > 0 {
			t.Errorf("decode vs prefill dump: first divergence %v, only in one: %v %v", f, rep.OnlyA, rep.OnlyB)
		}
	}
}

// TestDumpSparse dumps the sparse-DSA variant (top_k 8) on P2 (40 tokens)
// and diffs it against llama.cpp: the selected key sets (blk.N.top_k,
// genuinely sparse beyond position 7) and the hidden states must agree,
// and the key sets must differ from the dense model's where they should.
func TestDumpSparse(t *testing.T) {
	path := testmodels.Path(t, "glm5-mini-sparse.Q8_0")
	var ref struct {
		Prompt []int `json:"prompt"`
	}
	if err := json.Unmarshal(testmodels.Ref(t, "glm5-mini-sparse.Q8_0.deq-F32.P2"), &ref); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(ref.Prompt))
	for i, id := range ref.Prompt {
		ids[i] = strconv.Itoa(id)
	}
	// The prefill path only: decode of the sparse model is the model
	// package's to test; here the point is the comparison of key sets.
	dir := filepath.Join(t.TempDir(), "dump")
	runCode(t, 0, "dump", "-ctk", "f32", "-m", path, "--tokens", strings.Join(ids, ","), "-o", dir)
	out := runCode(t, 0, "diff", "--atol", "1e-3", "--rtol", "0", dir, filepath.Join(hiddenRefs, "glm5-mini-sparse.Q8_0.deq-F32.P2"))
	if !strings.HasPrefix(lastLine(out), "no divergence") {
		t.Errorf("%s", lastLine(out))
	}
	if !strings.Contains(out, "blk.2.top_k") {
		t.Errorf("the DSA key sets were not compared:\n%s", out)
	}
	// Against the dense model's reference the key sets differ exactly at
	// the positions that see more than top_k = 8 keys: 8..39.
	out = runCode(t, 1, "diff", dir, filepath.Join(hiddenRefs, "glm5-mini.Q8_0.deq-F32.P2"))
	if !strings.Contains(out, "DIVERGES (32 rows differ as sets)") {
		t.Errorf("sparse vs dense key sets:\n%s", out)
	}
}

// writeF32Model copies the model at src to dst with tensor name rewritten
// as F32, perturb applied to its dequantized values.
func writeF32Model(t *testing.T, src, dst, name string, perturb func([]float32)) {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ti, ok := f.Tensor(name)
	if !ok {
		t.Fatalf("%s has no tensor %q", src, name)
	}
	vals := make([]float32, ti.NumElements())
	if err := tensor.Dequantize(ti.Type, ti.Data, vals); err != nil {
		t.Fatal(err)
	}
	perturb(vals)
	data := make([]byte, 0, 4*len(vals))
	for _, v := range vals {
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
	}
	w := gguf.NewWriterFrom(f)
	if err := w.ReplaceTensor(name, tensor.F32, ti.Dims, data); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile(dst); err != nil {
		t.Fatal(err)
	}
}

// TestDiffFindsPlantedFault perturbs one weight tensor of layer 1's
// attention, dumps the clean and the faulty model on the same tokens and
// checks that glmrun diff names layer 1's attention output as the first
// divergence, with nothing before it (all of layer 0, layer 1's attention
// input) diverging.
func TestDiffFindsPlantedFault(t *testing.T) {
	const weight = "blk.1.attn_output.weight"
	tmp := t.TempDir()
	clean, faulty := filepath.Join(tmp, "clean.gguf"), filepath.Join(tmp, "faulty.gguf")
	// Both copies hold the tensor as F32, so the perturbation is the only
	// difference between them.
	writeF32Model(t, glm5Mini, clean, weight, func([]float32) {})
	writeF32Model(t, glm5Mini, faulty, weight, func(v []float32) {
		for i := 0; i < len(v); i += 97 {
			v[i] += 0.5
		}
	})
	tokens := promptP1(t)
	dirs := map[string]string{}
	for name, m := range map[string]string{"clean": clean, "faulty": faulty} {
		dirs[name] = filepath.Join(tmp, name)
		runCode(t, 0, "dump", "-ctk", "f32", "-m", m, "--tokens", tokens, "-o", dirs[name])
	}
	out := runCode(t, 1, "diff", dirs["faulty"], dirs["clean"])
	if got, want := lastLine(out), "first divergence: blk.1.attn_out "; !strings.HasPrefix(got, want) {
		t.Fatalf("last line %q, want prefix %q\n%s", got, want, out)
	}
	rep := compareDirs(t, dirs["faulty"], dirs["clean"], dump.DefaultTolerance)
	for i, r := range rep.Results {
		if i < rep.First && r.MaxAbs != 0 {
			// Same weights up to here, same kernels: bit-identical.
			t.Errorf("%s differs before the fault: %s", r.Name, r.String())
		}
		if r.Layer == 0 && r.Diverges {
			t.Errorf("layer 0 diverges: %s", r.String())
		}
	}
	if f := rep.FirstDivergence(); f == nil || f.Name != "blk.1.attn_out" || f.Layer != 1 {
		t.Fatalf("first divergence %v", f)
	}
	// Layer 1's attention before attn_output was compared, and agrees.
	kqv := -1
	for i, r := range rep.Results {
		if r.Name == "blk.1.kqv_out" {
			kqv = i
		}
	}
	if kqv < 0 || kqv > rep.First {
		t.Errorf("blk.1.kqv_out at %d, first divergence at %d", kqv, rep.First)
	}
	t.Logf("%s", rep.FirstDivergence().String())
	// The clean F32 rewrite still matches llama.cpp (the weight is the
	// dequantized Q8_0 tensor, as in the deq-F32 refs).
	ref := filepath.Join(hiddenRefs, "glm5-mini.Q8_0.deq-F32.P1")
	runCode(t, 0, "diff", "--atol", "1e-3", "--rtol", "0", dirs["clean"], ref)
	// And the faulty one does not, first at the same tensor.
	out = runCode(t, 1, "diff", "--atol", "1e-3", "--rtol", "0", dirs["faulty"], ref)
	if !strings.HasPrefix(lastLine(out), "first divergence: blk.1.attn_out ") {
		t.Errorf("faulty vs llama.cpp: %s", lastLine(out))
	}
}

// TestDumpText dumps the text of P1 ("1 2 3 4 5 6 7 8 9 10", whose
// llama.cpp tokens are the P1 prompt): the index holds those tokens and the
// dump matches llama.cpp's.
func TestDumpText(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dump")
	runCode(t, 0, "dump", "-ctk", "f32", "-m", glm5Mini, "--text", "1 2 3 4 5 6 7 8 9 10", "-o", dir)
	d, err := dump.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(d.Tokens))
	for i, id := range d.Tokens {
		got[i] = strconv.Itoa(id)
	}
	if want := promptP1(t); strings.Join(got, ",") != want {
		t.Fatalf("tokens %v, want %s", got, want)
	}
	out := runCode(t, 0, "diff", "--atol", "1e-3", "--rtol", "0", dir, filepath.Join(hiddenRefs, "glm5-mini.Q8_0.deq-F32.P1"))
	if !strings.HasPrefix(lastLine(out), "no divergence") {
		t.Errorf("diff: %s", lastLine(out))
	}
}

func TestDumpErrors(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no model", []string{"--tokens", "1", "-o", dir}, 2, "-m MODEL.gguf is required"},
		{"no output", []string{"-m", glm5Mini, "--tokens", "1"}, 2, "-o DIR is required"},
		{"no tokens", []string{"-m", glm5Mini, "-o", dir}, 2, "no token ids"},
		{"tokens and text", []string{"-m", glm5Mini, "--tokens", "1", "--text", "a", "-o", dir}, 2, "not both"},
		{"bad token", []string{"-m", glm5Mini, "--tokens", "1,x", "-o", dir}, 2, `bad token id "x"`},
		{"negative token", []string{"-m", glm5Mini, "--tokens", "-3", "-o", dir}, 2, `bad token id "-3"`},
		{"extra argument", []string{"-m", glm5Mini, "--tokens", "1", "-o", dir, "more"}, 2, `unexpected argument "more"`},
		{"token outside vocab", []string{"-m", glm5Mini, "--tokens", "1,5000", "-o", dir}, 1, "vocabulary"},
		{"missing model", []string{"-m", filepath.Join(dir, "none.gguf"), "--tokens", "1", "-o", dir}, 1, "none.gguf"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(append([]string{"dump"}, tc.args...), &stdout, &stderr); code != tc.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tc.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tc.want)
			}
		})
	}
}
