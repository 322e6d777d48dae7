package dump

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/internal/npy"
)

// refDir is llama.cpp's batch dump of glm5-mini.Q8_0 (dequantized to F32)
// on prompt P1.
const refDir = "../../testdata/refs/hidden/glm5-mini.Q8_0.deq-F32.P1"

// fakeTensor is one tensor a fake forward pass emits.
type fakeTensor struct {
	name  string
	layer int
	width int
}

var fakeNames = []fakeTensor{
	{"embd", -1, 4},
	{"blk.0.attn_out", 0, 4},
	{"blk.0.out", 0, 4},
	{"blk.1.ffn_moe_out", 1, 4},
	{"blk.1.out", 1, 4},
	{"result_norm", -1, 4},
	{"result_output", -1, 6},
}

// fakeValue is the value a fake forward pass emits for tensor k, token i,
// column j.
func fakeValue(k, i, j int) float32 { return float32(k)*100 + float32(i) + float32(j)/8 }

// fakePrefill emits every fake tensor once for tokens 0..n-1.
func fakePrefill(hook func(string, int, []int, []float32), n int) {
	for k, ft := range fakeNames {
		data := make([]float32, 0, n*ft.width)
		for i := range n {
			for j := range ft.width {
				data = append(data, fakeValue(k, i, j))
			}
		}
		hook(ft.name, ft.layer, []int{n, ft.width}, data)
	}
}

// fakeDecode emits every fake tensor once per token, [1, width] each.
func fakeDecode(hook func(string, int, []int, []float32), n int) {
	for i := range n {
		for k, ft := range fakeNames {
			data := make([]float32, ft.width)
			for j := range data {
				data[j] = fakeValue(k, i, j)
			}
			hook(ft.name, ft.layer, []int{1, ft.width}, data)
			clear(data) // the hook must have copied
		}
	}
}

func writeDump(t *testing.T, dir string, emit func(func(string, int, []int, []float32), int), n int) {
	t.Helper()
	w, err := Create(dir, Info{Model: "fake.gguf", Tokens: []int{5, 6, 7}[:n]})
	if err != nil {
		t.Fatal(err)
	}
	emit(w.Hook, n)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestWriterRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		emit func(func(string, int, []int, []float32), int)
	}{
		{"prefill", fakePrefill},
		{"decode", fakeDecode},
	}
	const n = 3
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeDump(t, dir, tc.emit, n)
			d, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			if d.Layout != Glmrun || d.Model != "fake.gguf" || !slices.Equal(d.Tokens, []int{5, 6, 7}) {
				t.Errorf("layout %v model %q tokens %v", d.Layout, d.Model, d.Tokens)
			}
			if len(d.Tensors) != len(fakeNames) {
				t.Fatalf("%d tensors, want %d", len(d.Tensors), len(fakeNames))
			}
			for k, ft := range fakeNames {
				e := &d.Tensors[k]
				if e.Name != ft.name || e.Layer != ft.layer || !slices.Equal(e.Shape, []int{n, ft.width}) {
					t.Errorf("tensor %d: %q layer %d shape %v, want %q layer %d shape [%d %d]",
						k, e.Name, e.Layer, e.Shape, ft.name, ft.layer, n, ft.width)
					continue
				}
				if e.File != ft.name+".npy" {
					t.Errorf("%s: file %q", ft.name, e.File)
				}
				tn, err := d.Read(e)
				if err != nil {
					t.Fatal(err)
				}
				for i := range n {
					for j := range ft.width {
						if got, want := tn.F32[i*ft.width+j], fakeValue(k, i, j); got != want {
							t.Fatalf("%s[%d,%d] = %g, want %g", ft.name, i, j, got, want)
						}
					}
				}
				// The file is a plain .npy that the npy package (and numpy) reads.
				a, err := npy.ReadFile(filepath.Join(dir, e.File))
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(a.Shape, e.Shape) || !slices.Equal(a.F32, tn.F32) {
					t.Errorf("%s: npy.ReadFile gives shape %v", ft.name, a.Shape)
				}
			}
		})
	}
}

func TestDecodeDumpEqualsPrefillDump(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	writeDump(t, a, fakePrefill, 3)
	writeDump(t, b, fakeDecode, 3)
	for _, e := range []string{IndexFile, "blk.0.out.npy", "result_output.npy"} {
		ba, err := os.ReadFile(filepath.Join(a, e))
		if err != nil {
			t.Fatal(err)
		}
		bb, err := os.ReadFile(filepath.Join(b, e))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ba, bb) {
			t.Errorf("%s differs between the prefill and the decode dump", e)
		}
	}
}

func TestWriterErrors(t *testing.T) {
	tests := []struct {
		name  string
		calls func(w *Writer)
		want  string
	}{
		{"length", func(w *Writer) { w.Hook("x", 0, []int{2, 3}, make([]float32, 5)) }, "needs 6 values"},
		{"empty name", func(w *Writer) { w.Hook("", 0, []int{1}, make([]float32, 1)) }, "empty name"},
		{"no dims", func(w *Writer) { w.Hook("x", 0, nil, nil) }, "dimensions"},
		{"negative", func(w *Writer) { w.Hook("x", 0, []int{-1, 2}, nil) }, "bad shape"},
		{"inner dims change", func(w *Writer) {
			w.Hook("x", 0, []int{1, 4}, make([]float32, 4))
			w.Hook("x", 0, []int{1, 5}, make([]float32, 5))
		}, "inner dimensions differ"},
		{"layer changes", func(w *Writer) {
			w.Hook("x", 0, []int{1, 4}, make([]float32, 4))
			w.Hook("x", 1, []int{1, 4}, make([]float32, 4))
		}, "layer 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeDump(t, dir, fakePrefill, 2) // an earlier dump in the same place
			w, err := Create(dir, Info{Model: "m"})
			if err != nil {
				t.Fatal(err)
			}
			tc.calls(w)
			w.Hook("later", 0, []int{1}, []float32{1}) // ignored after the error
			err = w.Close()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Close error %v, want one containing %q", err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(dir, IndexFile)); err == nil {
				t.Error("a failed dump left an index.json")
			}
		})
	}
	t.Run("after close", func(t *testing.T) {
		w, err := Create(t.TempDir(), Info{})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err == nil {
			t.Error("second Close returned nil")
		}
	})
}

func TestFileNames(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, Info{})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"a/b", "a_b", "../up", "index.json", "ok.name-1"}
	for _, n := range names {
		w.Hook(n, -1, []int{1}, []float32{1})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for i, e := range d.Tensors {
		if e.Name != names[i] {
			t.Errorf("tensor %d named %q, want %q", i, e.Name, names[i])
		}
		if strings.ContainsAny(e.File, "/\\") || strings.HasPrefix(e.File, ".") {
			t.Errorf("%q: unsafe file %q", e.Name, e.File)
		}
		files = append(files, e.File)
	}
	slices.Sort(files)
	if len(slices.Compact(files)) != len(names) {
		t.Errorf("file names not unique: %v", files)
	}
}

func TestLlamaName(t *testing.T) {
	tests := []struct {
		in    string
		name  string
		layer int
	}{
		{"l_out-0", "blk.0.out", 0},
		{"l_out-12", "blk.12.out", 12},
		{"attn_out-1", "blk.1.attn_out", 1},
		{"ffn_out-2", "blk.2.ffn_out", 2},
		{"kqv_out-3", "blk.3.kqv_out", 3},
		{"ffn_inp-0", "blk.0.ffn_inp", 0},
		{"attn_norm-4", "blk.4.attn_norm", 4},
		{"ffn_norm-4", "blk.4.ffn_norm", 4},
		{"ffn_moe_topk-1", "blk.1.ffn_moe_topk", 1},
		{"top_k-2", "blk.2.top_k", 2},
		{"embd", "embd", -1},
		{"result_norm", "result_norm", -1},
		{"result_output", "result_output", -1},
		{"odd-name", "odd-name", -1},
		{"lead-01", "lead-01", -1},
		{"-1", "-1", -1},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			name, layer := LlamaName(tc.in)
			if name != tc.name || layer != tc.layer {
				t.Errorf("LlamaName(%q) = %q, %d; want %q, %d", tc.in, name, layer, tc.name, tc.layer)
			}
		})
	}
}

func TestOpenLlamaCPP(t *testing.T) {
	d, err := Open(refDir)
	if err != nil {
		t.Fatal(err)
	}
	if d.Layout != LlamaCPP || d.Model != "glm5-mini.Q8_0.deq-F32.gguf" || len(d.Tokens) != 20 {
		t.Fatalf("layout %v model %q %d tokens", d.Layout, d.Model, len(d.Tokens))
	}
	const T = 20
	tests := []struct {
		name   string
		source string
		layer  int
		shape  []int
		isInt  bool
		maxAbs float64 // the index's max_abs_finite for float tensors
	}{
		{"embd", "embd", -1, []int{T, 256}, false, 3.15485},
		{"blk.0.kqv_out", "kqv_out-0", 0, []int{T, 256}, false, 2.86403},
		{"blk.0.out", "l_out-0", 0, []int{T, 256}, false, 4.42849},
		{"blk.1.attn_out", "attn_out-1", 1, []int{T, 256}, false, 2.55681},
		{"blk.2.ffn_inp", "ffn_inp-2", 2, []int{T, 256}, false, 7.47792},
		{"blk.2.ffn_out", "ffn_out-2", 2, []int{T, 256}, false, 3.71261},
		{"blk.2.out", "l_out-2", 2, []int{T, 256}, false, 8.19868},
		{"result_norm", "result_norm", -1, []int{T, 256}, false, 4.52013},
		{"blk.1.ffn_moe_topk", "ffn_moe_topk-1", 1, []int{T, 4}, true, 0},
		{"blk.0.top_k", "top_k-0", 0, []int{T, 256}, true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, ok := d.Lookup(tc.name)
			if !ok {
				t.Fatalf("no tensor %q", tc.name)
			}
			if e.Source != tc.source || e.Layer != tc.layer || !slices.Equal(e.Shape, tc.shape) || e.Int != tc.isInt {
				t.Fatalf("got %+v", *e)
			}
			tn, err := d.Read(e)
			if err != nil {
				t.Fatal(err)
			}
			if tc.isInt {
				if tn.I32 == nil || tn.F32 != nil {
					t.Fatal("int tensor not read as int32")
				}
				width := tc.shape[1]
				for i := 0; i < len(tn.I32); i += width {
					row := slices.Clone(tn.I32[i : i+width])
					slices.Sort(row)
					switch tc.name {
					case "blk.0.top_k": // dense: a permutation of all 256 cells
						for j, v := range row {
							if v != int32(j) {
								t.Fatalf("row %d is not a permutation of 0..255", i/width)
							}
						}
					default: // 4 distinct experts out of 16
						if len(slices.Compact(row)) != 4 || row[0] < 0 || row[3] >= 16 {
							t.Fatalf("row %d: experts %v", i/width, row)
						}
					}
				}
				return
			}
			var m float64
			for _, v := range tn.F32 {
				m = max(m, math.Abs(float64(v)))
			}
			if math.Abs(m-tc.maxAbs) > 1e-5 {
				t.Errorf("max |x| = %g, index says %g", m, tc.maxAbs)
			}
		})
	}
	// The layout is ne0 fastest: row i of embd is token i's embedding, so
	// the rows of two equal tokens (P1 has token 220 at positions 1 and 3)
	// are equal.
	e, _ := d.Lookup("embd")
	tn, err := d.Read(e)
	if err != nil {
		t.Fatal(err)
	}
	if d.Tokens[1] != d.Tokens[3] || !slices.Equal(tn.F32[256:512], tn.F32[3*256:4*256]) {
		t.Error("embd rows of equal tokens differ: layout misread")
	}
	if slices.Equal(tn.F32[0:256], tn.F32[256:512]) {
		t.Error("embd rows of different tokens are equal")
	}
}

// TestLlamaSeqMatchesBatch compares llama.cpp's one-token-at-a-time dump
// with its batch dump: bit for bit equal on F32 weights (README §5.1).
func TestLlamaSeqMatchesBatch(t *testing.T) {
	a, err := Open(refDir + ".seq")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(refDir)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Compare(a, b, Tolerance{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rep.Results {
		names = append(names, r.Name)
		if r.MaxAbs != 0 || r.Diverges || r.Cosine < 1-1e-12 {
			t.Errorf("%s", r.String())
		}
	}
	want := []string{"embd", "blk.0.out", "blk.1.out", "blk.2.out", "result_norm"}
	if !slices.Equal(names, want) || rep.First != -1 || len(rep.OnlyA) != 0 {
		t.Errorf("compared %v (first %d, only in seq %v), want %v", names, rep.First, rep.OnlyA, want)
	}
	if len(rep.OnlyB) != len(b.Tensors)-len(want) {
		t.Errorf("only in batch: %v", rep.OnlyB)
	}
}

// writeLlamaDir writes a llama.cpp-layout dump with the given index
// entries and files.
func writeLlamaDir(t *testing.T, entries []map[string]any, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	idx := map[string]any{"model": "m", "mode": "batch", "prompt": []int{1, 2}, "layout": "raw", "tensors": entries}
	b, err := json.Marshal(idx)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, IndexFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func f32Bytes(v ...float32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func TestOpenCorrupt(t *testing.T) {
	good := f32Bytes(1, 2, 3, 4)
	entry := func(kv ...any) map[string]any {
		m := map[string]any{"name": "l_out-0", "occ": 0, "file": "a.f32", "dtype": "f32", "ne": []int{2, 2, 1, 1}, "n": 4}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name    string
		entries []map[string]any
		files   map[string][]byte
		want    string
	}{
		{"short file", []map[string]any{entry()}, map[string][]byte{"a.f32": good[:12]}, "needs 16"},
		{"long file", []map[string]any{entry()}, map[string][]byte{"a.f32": append(good, 0, 0, 0, 0)}, "needs 16"},
		{"n disagrees", []map[string]any{entry("n", 5)}, map[string][]byte{"a.f32": good}, "n = 5"},
		{"huge ne", []map[string]any{entry("ne", []int{1 << 30, 1 << 30, 1 << 30, 1}, "n", nil)}, map[string][]byte{"a.f32": good}, "too large"},
		{"negative ne", []map[string]any{entry("ne", []int{-2, -2}, "n", nil)}, map[string][]byte{"a.f32": good}, "negative"},
		{"bad dtype", []map[string]any{entry("dtype", "f16")}, map[string][]byte{"a.f32": good}, "dtype"},
		{"escaping file", []map[string]any{entry("file", "../a.f32")}, map[string][]byte{"a.f32": good}, "bad file name"},
		{"missing file", []map[string]any{entry()}, nil, "no such file"},
		{"duplicate", []map[string]any{entry(), entry()}, map[string][]byte{"a.f32": good}, "twice"},
		{"no name", []map[string]any{entry("name", "")}, map[string][]byte{"a.f32": good}, "no name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeLlamaDir(t, tc.entries, tc.files)
			_, err := Open(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open error %v, want one containing %q", err, tc.want)
			}
		})
	}
	t.Run("bad json", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, IndexFile), []byte(`{"tensors": [`), 0o644)
		if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), IndexFile) {
			t.Fatalf("Open error %v", err)
		}
	})
	t.Run("npy shape differs from index", func(t *testing.T) {
		dir := t.TempDir()
		writeDump(t, dir, fakePrefill, 2)
		idx, err := os.ReadFile(filepath.Join(dir, IndexFile))
		if err != nil {
			t.Fatal(err)
		}
		idx = []byte(strings.Replace(string(idx), `"shape":[2,4]`, `"shape":[4,2]`, 1))
		os.WriteFile(filepath.Join(dir, IndexFile), idx, 0o644)
		d, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Read(&d.Tensors[0]); err == nil || !strings.Contains(err.Error(), "index says") {
			t.Fatalf("Read error %v", err)
		}
	})
	t.Run("occurrence", func(t *testing.T) {
		dir := writeLlamaDir(t, []map[string]any{entry(), entry("occ", 1, "file", "b.f32")},
			map[string][]byte{"a.f32": good, "b.f32": good})
		d, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if d.Tensors[1].Name != "blk.0.out.1" || d.Tensors[1].Source != "l_out-0.occ1" {
			t.Errorf("occ 1 entry: %+v", d.Tensors[1])
		}
	})
}

// synth builds an in-memory comparison pair as two dump directories.
func synthDirs(t *testing.T, perturb func(name string, data []float32)) (a, b *Dump) {
	t.Helper()
	da, db := t.TempDir(), t.TempDir()
	writeDump(t, db, fakePrefill, 3)
	w, err := Create(da, Info{Model: "fake.gguf"})
	if err != nil {
		t.Fatal(err)
	}
	fakePrefill(func(name string, layer int, shape []int, data []float32) {
		perturb(name, data)
		w.Hook(name, layer, shape, data)
	}, 3)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if a, err = Open(da); err != nil {
		t.Fatal(err)
	}
	if b, err = Open(db); err != nil {
		t.Fatal(err)
	}
	return a, b
}

func TestCompareDumps(t *testing.T) {
	tol := Tolerance{ATol: 1e-3}
	tests := []struct {
		name    string
		perturb func(name string, data []float32)
		first   string // "" for no divergence
	}{
		{"identical", func(string, []float32) {}, ""},
		{"within atol", func(_ string, d []float32) { d[0] += 5e-4 }, ""},
		{"middle tensor", func(n string, d []float32) {
			if n == "blk.0.out" {
				d[5] += 0.01
			}
		}, "blk.0.out"},
		{"middle then later", func(n string, d []float32) {
			if n == "blk.1.ffn_moe_out" || n == "result_norm" {
				d[1] *= 2
			}
		}, "blk.1.ffn_moe_out"},
		{"nan", func(n string, d []float32) {
			if n == "blk.1.out" {
				d[2] = float32(math.NaN())
			}
		}, "blk.1.out"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := synthDirs(t, tc.perturb)
			rep, err := Compare(a, b, tol)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Results) != len(fakeNames) {
				t.Fatalf("%d results", len(rep.Results))
			}
			got := ""
			if f := rep.FirstDivergence(); f != nil {
				got = f.Name
			}
			if got != tc.first {
				t.Fatalf("first divergence %q, want %q", got, tc.first)
			}
			for i, r := range rep.Results {
				before := rep.First < 0 || i < rep.First
				if before && (r.Diverges || r.MaxAbs > tol.ATol) {
					t.Errorf("%s diverges before the first divergence", r.String())
				}
			}
		})
	}
}

func TestCompareTensors(t *testing.T) {
	f := func(shape []int, v ...float32) *Tensor { return &Tensor{Shape: shape, F32: v} }
	i := func(shape []int, v ...int32) *Tensor { return &Tensor{Shape: shape, I32: v} }
	inf := float32(math.Inf(1))
	tests := []struct {
		name     string
		tname    string
		a, b     *Tensor
		tol      Tolerance
		diverges bool
		check    func(t *testing.T, r Result)
	}{
		{"equal", "x", f([]int{2}, 1, -2), f([]int{2}, 1, -2), Tolerance{}, false, func(t *testing.T, r Result) {
			if r.MaxAbs != 0 || r.Cosine != 1 || r.RelErr != 0 {
				t.Errorf("%+v", r)
			}
		}},
		{"stats", "x", f([]int{2}, 1, 2.5), f([]int{2}, 1, 2), Tolerance{ATol: 0.05, RTol: 0.2}, true, func(t *testing.T, r Result) {
			// limit 0.05 + 0.2*max|b| = 0.45 < max abs 0.5
			if r.MaxAbs != 0.5 || r.MaxB != 2 || r.RelErr != 0.25 || math.Abs(r.Limit-0.45) > 1e-12 {
				t.Errorf("%+v", r)
			}
		}},
		{"rtol saves", "x", f([]int{2}, 100, 0), f([]int{2}, 100.5, 0), Tolerance{ATol: 1e-3, RTol: 1e-2}, false, nil},
		{"orthogonal", "x", f([]int{2}, 1, 0), f([]int{2}, 0, 1), Tolerance{ATol: 2}, false, func(t *testing.T, r Result) {
			if r.Cosine != 0 {
				t.Errorf("cosine %g", r.Cosine)
			}
		}},
		{"squeezed shapes", "x", f([]int{1, 2}, 1, 2), f([]int{2}, 1, 2), Tolerance{}, false, nil},
		{"shape mismatch", "x", f([]int{2, 1}, 1, 2), f([]int{1, 3}, 1, 2, 3), Tolerance{ATol: 1}, true, func(t *testing.T, r Result) {
			if !r.ShapeMismatch {
				t.Error("no shape mismatch")
			}
		}},
		{"transposed", "x", f([]int{2, 3}, 1, 2, 3, 4, 5, 6), f([]int{3, 2}, 1, 2, 3, 4, 5, 6), Tolerance{ATol: 1}, true, nil},
		{"same inf", "x", f([]int{2}, inf, 1), f([]int{2}, inf, 1), Tolerance{}, false, nil},
		{"inf vs finite", "x", f([]int{2}, inf, 1), f([]int{2}, 1, 1), Tolerance{ATol: 1e9}, true, func(t *testing.T, r Result) {
			if r.NonFinite != 1 {
				t.Errorf("non-finite %d", r.NonFinite)
			}
		}},
		{"expert sets reordered", "blk.1.ffn_moe_topk", i([]int{2, 2}, 3, 1, 0, 2), i([]int{2, 2}, 1, 3, 2, 0), Tolerance{}, false, nil},
		{"expert sets differ", "blk.1.ffn_moe_topk", i([]int{2, 2}, 3, 1, 0, 2), i([]int{2, 2}, 3, 1, 0, 5), Tolerance{}, true, func(t *testing.T, r Result) {
			if r.RowsDiffer != 1 || !r.Int {
				t.Errorf("%+v", r)
			}
		}},
		{"int vs whole floats", "blk.1.ffn_moe_topk", f([]int{1, 2}, 2, 7), i([]int{1, 2}, 7, 2), Tolerance{}, false, nil},
		{"int vs fractional floats", "blk.1.ffn_moe_topk", f([]int{1, 2}, 2.5, 7), i([]int{1, 2}, 7, 2), Tolerance{}, true, nil},
		{"top_k masked cells ignored", "blk.0.top_k",
			i([]int{3, 2}, 0, -1, 1, 0, 2, 1),
			i([]int{3, 4}, 3, 0, 2, 1, 1, 0, 3, 2, 0, 1, 2, 3), Tolerance{}, true, func(t *testing.T, r Result) {
				if r.RowsDiffer != 1 { // row 2 lacks cell 0
					t.Errorf("rows differ %d, want 1", r.RowsDiffer)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := CompareTensors(tc.tname, tc.a, tc.b, tc.tol)
			if r.Diverges != tc.diverges {
				t.Errorf("diverges %v, want %v: %s", r.Diverges, tc.diverges, r.String())
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}

func TestWriterIDs(t *testing.T) {
	const n = 3
	tests := []struct {
		name string
		emit func(w *Writer)
	}{
		{"prefill", func(w *Writer) {
			w.Hook("embd", -1, []int{n, 2}, make([]float32, 2*n))
			w.IDHook("blk.0.top_k", 0, []int{n, n}, []int32{0, -1, -1, 0, 1, -1, 0, 1, 2})
			w.IDHook("blk.1.ffn_moe_topk", 1, []int{n, 2}, []int32{3, 1, 0, 2, 5, 4})
		}},
		{"decode", func(w *Writer) {
			for i := range n {
				w.Hook("embd", -1, []int{1, 2}, make([]float32, 2))
				keys := make([]int32, i+1) // one more visible key per step
				for j := range keys {
					keys[j] = int32(j)
				}
				w.IDHook("blk.0.top_k", 0, []int{1, i + 1}, keys)
				w.IDHook("blk.1.ffn_moe_topk", 1, []int{1, 2}, []int32{[]int32{3, 0, 5}[i], []int32{1, 2, 4}[i]})
			}
		}},
	}
	want := map[string][]int32{
		"blk.0.top_k":        {0, -1, -1, 0, 1, -1, 0, 1, 2},
		"blk.1.ffn_moe_topk": {3, 1, 0, 2, 5, 4},
	}
	dumps := map[string]*Dump{}
	for _, tc := range tests {
		dir := t.TempDir() // outlives the subtest: compared below
		t.Run(tc.name, func(t *testing.T) {
			w, err := Create(dir, Info{})
			if err != nil {
				t.Fatal(err)
			}
			tc.emit(w)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			d, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			dumps[tc.name] = d
			for name, vals := range want {
				e, ok := d.Lookup(name)
				if !ok || !e.Int || e.Shape[0] != n {
					t.Fatalf("%s: %+v", name, e)
				}
				tn, err := d.Read(e)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(tn.I32, vals) {
					t.Errorf("%s = %v, want %v", name, tn.I32, vals)
				}
			}
		})
	}
	if len(dumps) == 2 {
		rep, err := Compare(dumps["decode"], dumps["prefill"], Tolerance{})
		if err != nil {
			t.Fatal(err)
		}
		if rep.First >= 0 || len(rep.Results) != 3 {
			t.Errorf("decode vs prefill: %d results, first divergence %v", len(rep.Results), rep.FirstDivergence())
		}
	}
	t.Run("kind mix", func(t *testing.T) {
		w, err := Create(t.TempDir(), Info{})
		if err != nil {
			t.Fatal(err)
		}
		w.Hook("x", 0, []int{1, 2}, make([]float32, 2))
		w.IDHook("x", 0, []int{1, 2}, make([]int32, 2))
		if err := w.Close(); err == nil || !strings.Contains(err.Error(), "integer data for a float tensor") {
			t.Fatalf("Close error %v", err)
		}
	})
}
