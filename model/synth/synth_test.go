package synth

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	_ "github.com/glmrun/glmrun/backend/cpu"
	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/internal/testmodels"
	"github.com/glmrun/glmrun/model"
	"github.com/glmrun/glmrun/model/tokenizer"
	"github.com/glmrun/glmrun/tensor"
)

// tiny is a small shape with every feature of the reference one: a dense
// block, MoE blocks with a shared expert, and rows of 64 (not a whole
// Q4_K block: the fallback).
var tiny = Shape{
	Layers: 3, LeadDense: 1, Embd: 256, Vocab: 1500, Context: 512,
	Heads: 4, QRank: 256, KVRank: 256, DNope: 64, DRope: 32, DV: 64,
	DenseFFN: 512, ExpertFFN: 256, Experts: 8, Used: 2, Shared: 1,
}

// TestWrite: a synthetic model loads, its tensors have the Q4_K_M mix's
// types (and the fallbacks), its tokenizer round-trips text, and both
// matrix paths give finite logits that agree to quantization noise.
func TestWrite(t *testing.T) {
	src, err := gguf.Open(testmodels.Path(t, "glm5-mini.Q8_0"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for _, mix := range []Mix{MixQ4KM, MixQ80} {
		t.Run(string(mix), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "synth.gguf")
			n, err := Write(path, Options{Shape: tiny, Mix: mix, Seed: 1, Tokenizer: src})
			if err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var sum int64
			for _, ti := range f.Tensors {
				sum += int64(len(ti.Data))
			}
			if sum != n {
				t.Errorf("tensor data %d bytes, Write said %d", sum, n)
			}
			want := map[string]tensor.Type{
				"output.weight": tensor.Q6_K, "blk.1.attn_k_b.weight": tensor.Q5_0,
				"blk.1.attn_q_a.weight": tensor.Q4_K, "blk.2.ffn_down_exps.weight": tensor.Q6_K,
				"blk.1.ffn_down_exps.weight": tensor.Q4_K, "blk.1.ffn_gate_inp.weight": tensor.F32,
				"blk.2.attn_v_b.weight": tensor.Q6_K,
			}
			for name, typ := range want {
				if mix == MixQ80 && typ != tensor.F32 {
					typ = tensor.Q8_0
				}
				ti, ok := f.Tensor(name)
				if !ok {
					t.Fatalf("no tensor %s", name)
				}
				if ti.Type != typ {
					t.Errorf("%s: %s, want %s", name, ti.Type, typ)
				}
			}
			tok, err := tokenizer.New(f)
			if err != nil {
				t.Fatal(err)
			}
			if tok.NumTokens() != tiny.Vocab {
				t.Errorf("tokenizer: %d tokens, want %d", tok.NumTokens(), tiny.Vocab)
			}
			ids := tok.Encode("Hello world", false, false)
			if text, err := tok.Decode(ids, false); err != nil || text != "Hello world" {
				t.Fatalf("round trip: %q, %v", text, err)
			}
			run(t, f, ids, 0)
			// All blocks dense: no routing to flip, so the fast path must stay
			// within quantization noise of the exact one.
			dense := tiny
			dense.LeadDense = dense.Layers
			run(t, writeOpen(t, Options{Shape: dense, Mix: mix, Seed: 2, Tokenizer: src}), ids, 0.05)
		})
	}
}

// TestWriteGLMDSA: a glm-dsa model (the indexer in every block) loads as
// GLM-5 with its indexer shape, and runs on both paths; with every block
// dense and top_k above the prompt's length (no selection to flip), they
// agree to quantization noise.
func TestWriteGLMDSA(t *testing.T) {
	src, err := gguf.Open(testmodels.Path(t, "glm5-mini.Q8_0"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dsa := tiny
	dsa.Arch, dsa.IndexHeads, dsa.IndexDim, dsa.IndexTopK = ArchGLMDSA, 4, 64, 4
	f := writeOpen(t, Options{Shape: dsa, Seed: 3, Tokenizer: src})
	m, err := model.New(f, model.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	c := m.Config()
	m.Close()
	if c.Arch != ArchGLMDSA || c.IndexerHeads != 4 || c.IndexerDim != 64 || c.IndexerTopK != 4 {
		t.Fatalf("loaded as %s with indexer %d x %d, top_k %d; want glm-dsa 4 x 64, top_k 4", c.Arch, c.IndexerHeads, c.IndexerDim, c.IndexerTopK)
	}
	tok, err := tokenizer.New(f)
	if err != nil {
		t.Fatal(err)
	}
	ids := tok.Encode("Hello world, the indexer picks four keys of these", false, false)
	if len(ids) <= dsa.IndexTopK {
		t.Fatalf("%d prompt tokens: not beyond top_k %d", len(ids), dsa.IndexTopK)
	}
	run(t, f, ids, 0)
	dense := dsa
	dense.LeadDense, dense.IndexTopK = dense.Layers, 64
	run(t, writeOpen(t, Options{Shape: dense, Seed: 4, Tokenizer: src}), ids, 0.05)
}

// writeOpen writes a model with o into the test's temporary directory and
// opens it until the test ends.
func writeOpen(t *testing.T, o Options) *gguf.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "synth.gguf")
	if _, err := Write(path, o); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// run prefills ids with the exact and the fast path, checks that every
// logit is finite and, when rel > 0, that the paths differ by at most rel
// times the largest logit.
func run(t *testing.T, f *gguf.File, ids []int32, rel float64) {
	t.Helper()
	var rows [2][][]float32
	for i, fast := range []bool{false, true} {
		m, err := model.New(f, model.Options{Fast: fast, Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		s, err := m.NewSession(model.SessionOptions{ContextSize: max(16, len(ids))})
		if err != nil {
			t.Fatal(err)
		}
		if rows[i], err = s.Prefill(ids); err != nil {
			t.Fatal(err)
		}
		m.Close()
	}
	var worst, scale float64
	for i := range rows[0] {
		for j, v := range rows[0][i] {
			for _, x := range []float32{v, rows[1][i][j]} {
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
					t.Fatalf("row %d logit %d: %g", i, j, x)
				}
			}
			worst = max(worst, math.Abs(float64(v-rows[1][i][j])))
			scale = max(scale, math.Abs(float64(v)))
		}
	}
	if rel > 0 && (scale == 0 || worst > rel*scale) {
		t.Errorf("fast vs exact: max abs diff %.3g, logits up to %.3g", worst, scale)
	}
	t.Logf("fast vs exact: max abs diff %.3g, logits up to %.3g", worst, scale)
}

// TestBlockScales: every block of a tensor larger than one generation
// chunk has the scale fill chose (a scale field landing inside a block
// would make random f16 scales, some NaN).
func TestBlockScales(t *testing.T) {
	g := gen{r: rand.New(rand.NewPCG(1, 1))}
	sp := spec{name: "x", typ: tensor.Q4_K, dims: []int64{2048, 120000}, std: 0.02}
	data := g.make(sp)
	bs := tensor.Q4_K.TypeSize()
	for off := 0; off < len(data); off += bs {
		d := tensor.F16ToF32(uint16(data[off]) | uint16(data[off+1])<<8)
		if !(d > 0 && d < 1e-3) {
			t.Fatalf("block at %d: d = %g", off, d)
		}
	}
}
