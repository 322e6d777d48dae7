package attention

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/glmrun/glmrun/backend"
	"github.com/glmrun/glmrun/backend/cpu"
	"github.com/glmrun/glmrun/tensor"
)

// randMatrix returns a random F32 [rows, cols] matrix with entries of
// standard deviation 1/sqrt(cols).
func randMatrix(r *rand.Rand, name string, rows, cols int) backend.Matrix {
	b := make([]byte, 4*rows*cols)
	s := 1 / math.Sqrt(float64(cols))
	for i := 0; i < rows*cols; i++ {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(r.NormFloat64()*s)))
	}
	m, err := backend.NewMatrix(name, tensor.F32, rows, cols, b)
	if err != nil {
		panic(err)
	}
	return m
}

func randVec(r *rand.Rand, n int, mean, std float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(mean + std*r.NormFloat64())
	}
	return v
}

// testLayer builds a small random MLA layer, with a DSA indexer keeping
// topK keys when topK > 0.
func testLayer(seed uint64, topK int) *MLA {
	r := rand.New(rand.NewPCG(seed, 7))
	c := &Config{Embd: 64, Heads: 4, QRank: 48, KVRank: 32, DNope: 16, DRope: 8, DV: 12, RMSEps: 1e-5,
		Tau: 1 / float32(math.Sqrt(24)), Rope: cpu.Rope{Dims: 8, Base: 10000, FreqScale: 1, AttnFactor: 1}}
	H, kr := c.Heads, c.KVRank
	w := &Weights{
		QA:      randMatrix(r, "q_a", c.QRank, c.Embd),
		QANorm:  randVec(r, c.QRank, 1, 0.1),
		QB:      randMatrix(r, "q_b", H*(c.DNope+c.DRope), c.QRank),
		KVA:     randMatrix(r, "kv_a", kr+c.DRope, c.Embd),
		KVANorm: randVec(r, kr, 1, 0.1),
		KB:      randMatrix(r, "k_b", H*kr, c.DNope),
		VB:      randMatrix(r, "v_b", H*c.DV, kr),
		Out:     randMatrix(r, "out", c.Embd, H*c.DV),
	}
	if topK > 0 {
		c.IndexHeads, c.IndexDim, c.IndexTopK, c.IndexRope = 4, 16, topK, c.Rope
		w.Indexer = &IndexerWeights{
			QB:     randMatrix(r, "iq", 4*16, c.QRank),
			K:      randMatrix(r, "ik", 16, c.Embd),
			KNormW: randVec(r, 16, 1, 0.1),
			KNormB: randVec(r, 16, 0, 0.1),
			Proj:   randMatrix(r, "iw", 4, c.Embd),
		}
	}
	return &MLA{Cfg: c, W: w, CPU: cpu.New(2)}
}

// run feeds x [T, E] through the layer in chunks (sizes in chunks) with the
// given form and returns the outputs [T, E] and each query's selected keys.
func run(t *testing.T, a *MLA, x []float32, chunks []int, form Form) ([]float32, [][]int32) {
	t.Helper()
	E := a.Cfg.Embd
	T := len(x) / E
	idx := []int{0}
	if a.W.Indexer != nil {
		idx[0] = a.Cfg.IndexDim
	}
	cache, err := NewLatentCache(1, T, a.Cfg.KVRank, a.Cfg.DRope, idx)
	if err != nil {
		t.Fatal(err)
	}
	var s Scratch
	out := make([]float32, T*E)
	var sel [][]int32
	pos := 0
	for _, n := range chunks {
		a.Forward(out[pos*E:(pos+n)*E], x[pos*E:(pos+n)*E], n, pos, cache, &s, form)
		for i := 0; i < n; i++ {
			if i < len(s.Selected) && s.Selected[i] != nil {
				sel = append(sel, slices.Clone(s.Selected[i]))
			} else {
				sel = append(sel, nil)
			}
		}
		pos += n
	}
	return out, sel
}

func maxDiff(a, b []float32) float64 {
	var d float64
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

// TestFormsAgree: the prefill (decompressed) and decode (absorbed) forms
// give the same output, in one batch or split into pieces, dense and with
// a sparse DSA selection.
func TestFormsAgree(t *testing.T) {
	const T = 12
	for _, topK := range []int{0, 5, 100} {
		a := testLayer(uint64(topK)+1, topK)
		x := randVec(rand.New(rand.NewPCG(9, 9)), T*a.Cfg.Embd, 0, 1)
		want, wantSel := run(t, a, x, []int{T}, Prefill)
		for _, tc := range []struct {
			name   string
			chunks []int
			form   Form
		}{
			{"decode batch", []int{T}, Decode},
			{"decode one by one", []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, Decode},
			{"prefill pieces", []int{3, 4, 5}, Prefill},
		} {
			got, gotSel := run(t, a, x, tc.chunks, tc.form)
			if d := maxDiff(got, want); d > 1e-5 {
				t.Errorf("topK %d %s: outputs differ by %g", topK, tc.name, d)
			}
			for i := range wantSel {
				if !slices.Equal(gotSel[i], wantSel[i]) {
					t.Errorf("topK %d %s: query %d keys %v, batch %v", topK, tc.name, i, gotSel[i], wantSel[i])
				}
			}
		}
		// Selection: nil (all keys) while a query sees ≤ topK keys, topK keys after.
		for i, sel := range wantSel {
			switch {
			case topK == 0 || i+1 <= topK:
				if sel != nil {
					t.Errorf("topK %d query %d: selection %v, want all keys", topK, i, sel)
				}
			case len(sel) != topK || !slices.IsSorted(sel) || sel[len(sel)-1] > int32(i):
				t.Errorf("topK %d query %d: selection %v", topK, i, sel)
			}
		}
	}
}

// TestSparseChangesOutput: a selection that drops keys changes the output
// of later queries only.
func TestSparseChangesOutput(t *testing.T) {
	const T = 12
	dense, sparse := testLayer(3, 0), testLayer(3, 5)
	x := randVec(rand.New(rand.NewPCG(9, 9)), T*dense.Cfg.Embd, 0, 1)
	d, _ := run(t, dense, x, []int{T}, Prefill)
	s, _ := run(t, sparse, x, []int{T}, Prefill)
	E := dense.Cfg.Embd
	if diff := maxDiff(d[:5*E], s[:5*E]); diff != 0 {
		t.Errorf("first 5 queries differ by %g", diff)
	}
	if diff := maxDiff(d[5*E:], s[5*E:]); diff < 1e-3 {
		t.Errorf("later queries differ by only %g", diff)
	}
}

func TestTopK(t *testing.T) {
	var order []int32
	scores := []float32{0.5, 2, -1, 2, 7, 0}
	if got := topK(nil, scores, 3, &order); !slices.Equal(got, []int32{1, 3, 4}) {
		t.Errorf("topK 3 = %v", got)
	}
	if got := topK(nil, scores, 2, &order); !slices.Equal(got, []int32{1, 4}) { // tie: lower index
		t.Errorf("topK 2 = %v", got)
	}
	if got := topK(nil, scores, 10, &order); len(got) != 6 {
		t.Errorf("topK 10 = %v", got)
	}
}

func TestLatentCache(t *testing.T) {
	if _, err := NewLatentCache(0, 4, 8, 2, nil); err == nil {
		t.Error("no layers accepted")
	}
	if _, err := NewLatentCache(2, 4, 8, 2, []int{1}); err == nil {
		t.Error("wrong indexer widths accepted")
	}
	c, err := NewLatentCache(2, 4, 8, 2, []int{0, 3})
	if err != nil {
		t.Fatal(err)
	}
	c.grow(1, 3)
	if len(c.Latent(1, 3)) != 30 || len(c.IndexKeys(1, 3)) != 9 || c.IndexKeys(0, 0) != nil {
		t.Errorf("sizes: %d latent, %d keys", len(c.Latent(1, 3)), len(c.IndexKeys(1, 3)))
	}
	c.Latent(1, 3)[29] = 5
	c.grow(1, 4)
	if c.Latent(1, 4)[29] != 5 {
		t.Error("grow lost data")
	}
	c.Reset()
	if len(c.latent[1]) != 0 {
		t.Error("Reset kept positions")
	}
}
