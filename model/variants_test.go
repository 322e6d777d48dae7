package model

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/backend"
	"github.com/glmrun/glmrun/backend/cpu"
	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/tensor"
)

// p2 is the 40-token prompt of the P2 refs.
func p2(t *testing.T) []int32 {
	r, ok := readRef(t, "glm5-mini.Q8_0.deq-F32.P2")
	if !ok {
		t.Fatal("no P2 ref")
	}
	return r.Prompt
}

func prefill(t *testing.T, m *Model, tokens []int32) [][]float32 {
	t.Helper()
	s, err := m.NewSession(SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := s.Prefill(tokens)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestSparseVsDense: with top_k 8 the DSA model equals the dense one while
// a query sees at most 8 keys and differs after (README.shared.md §5.1.3).
func TestSparseVsDense(t *testing.T) {
	dense := prefill(t, loadTest(t, "glm5-mini.Q8_0"), p2(t))
	sparse := prefill(t, loadTest(t, "glm5-mini-sparse.Q8_0"), p2(t))
	var below, above float64
	for i := range dense {
		d := maxAbsDiff(dense[i], sparse[i])
		if i < 8 {
			below = max(below, d)
		} else {
			above = max(above, d)
		}
	}
	if below != 0 {
		t.Errorf("positions 0-7: sparse differs from dense by %g, want 0", below)
	}
	if above < 0.5 {
		t.Errorf("positions 8+: sparse differs from dense by only %g", above)
	}
}

// TestNextNSkipped: the MTP block of a NextN model is not run by the
// trunk's forward pass (with or without Options.MTP), so its logits equal
// glm5-mini's. It checks the shipped
// glm5-mini-nextn.Q8_0 and a NextN model built here from glm5-mini (block 3
// a copy of block 2 plus the nextn.* tensors).
func TestNextNSkipped(t *testing.T) {
	plain := loadTest(t, "glm5-mini.Q8_0")
	want := prefill(t, plain, p2(t))
	built := func(t *testing.T) *Model {
		path := rewrite(t, modelPath(t, "glm5-mini.Q8_0"), func(f *gguf.File, w *gguf.Writer) error {
			return addNextN(f, w, "glm-dsa", 3, true, make([]float32, 512*256))
		})
		m, err := Load(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	for _, tc := range []struct {
		name string
		load func(t *testing.T) *Model
	}{
		{"built", built},
		{"glm5-mini-nextn.Q8_0", func(t *testing.T) *Model { return loadTest(t, "glm5-mini-nextn.Q8_0") }},
		{"glm5-mini-nextn.Q8_0 with MTP", func(t *testing.T) *Model {
			m, err := Load(modelPath(t, "glm5-mini-nextn.Q8_0"), Options{MTP: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			return m
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.load(t)
			if c := m.Config(); c.NextN != 1 || c.Layers != 3 || len(m.Weights().Layers) != 4 || m.Weights().Layers[3].NextN == nil {
				t.Fatalf("config: %d NextN blocks, %d trunk layers; want 1, 3 and the block loaded", c.NextN, c.Layers)
			}
			got := prefill(t, m, p2(t))
			for i := range want {
				if d := maxAbsDiff(want[i], got[i]); d != 0 {
					t.Fatalf("position %d: NextN model differs by %g", i, d)
				}
			}
		})
	}
}

// addNextN turns a model of blocks blocks into one with an MTP block after
// them: a copy of the last block plus the nextn tensors, with the model's
// output norm as all three norms, eh_proj (F32 [2E, E], E = 256) and, when
// withEmbd, the token embedding as nextn.embed_tokens and shared_head_head.
func addNextN(f *gguf.File, w *gguf.Writer, arch string, blocks int, withEmbd bool, eh []float32) error {
	w.SetKV(arch+".block_count", gguf.Uint32(uint32(blocks+1)))
	w.SetKV(arch+".nextn_predict_layers", gguf.Uint32(1))
	last, mtp := fmt.Sprintf("blk.%d.", blocks-1), fmt.Sprintf("blk.%d.", blocks)
	for _, ti := range f.Tensors {
		if rest, ok := strings.CutPrefix(ti.Name, last); ok {
			if err := w.AddTensor(mtp+rest, ti.Type, ti.Dims, ti.Data); err != nil {
				return err
			}
		}
	}
	extra := map[string]string{"enorm": "output_norm", "hnorm": "output_norm", "shared_head_norm": "output_norm"}
	if withEmbd {
		extra["embed_tokens"], extra["shared_head_head"] = "token_embd", "token_embd"
	}
	for _, n := range []string{"embed_tokens", "shared_head_head", "enorm", "hnorm", "shared_head_norm"} {
		src, ok := extra[n]
		if !ok {
			continue
		}
		ti, _ := f.Tensor(src + ".weight")
		if err := w.AddTensor(mtp+"nextn."+n+".weight", ti.Type, ti.Dims, ti.Data); err != nil {
			return err
		}
	}
	return w.AddTensor(mtp+"nextn.eh_proj.weight", tensor.F32, []int64{512, 256}, f32Bytes(eh))
}

// rewrite copies the model at src with edit applied to a Writer and
// returns the new file's path.
func rewrite(t *testing.T, src string, edit func(f *gguf.File, w *gguf.Writer) error) string {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriterFrom(f)
	if err := edit(f, w); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "edited.gguf")
	if err := w.WriteFile(out); err != nil {
		t.Fatal(err)
	}
	return out
}

// dequantAll returns every element of a tensor as float32.
func dequantAll(t *testing.T, ti *gguf.TensorInfo) []float32 {
	t.Helper()
	m, err := backend.NewMatrix(ti.Name, ti.Type, int(ti.NumRows()), int(ti.RowLen()), ti.Data)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float32, ti.NumElements())
	cpu.Dequantize(v, m)
	return v
}

// TestCombinedKVB: a copy of glm5-mini whose attn_k_b/attn_v_b are replaced
// by the legacy combined attn_kv_b (F32, built with the element maps of
// docs/FILE-LAYOUTS.md section 2.2) gives the same logits.
func TestCombinedKVB(t *testing.T) {
	src := modelPath(t, "glm5-mini.Q8_0")
	m := loadTest(t, "glm5-mini.Q8_0")
	c := m.Config()
	H, kr, dn, dv := c.Heads, c.KVLoraRank, c.DNope, c.DV
	path := rewrite(t, src, func(f *gguf.File, w *gguf.Writer) error {
		for l := 0; l < c.BlockCount; l++ {
			kbName, vbName := fmt.Sprintf("blk.%d.attn_k_b.weight", l), fmt.Sprintf("blk.%d.attn_v_b.weight", l)
			kbInfo, _ := f.Tensor(kbName)
			vbInfo, _ := f.Tensor(vbName)
			kb, vb := dequantAll(t, kbInfo), dequantAll(t, vbInfo)
			kv := make([]float32, H*(dn+dv)*kr) // ne{kr, H(dn+dv)}
			for h := 0; h < H; h++ {
				for c := 0; c < kr; c++ {
					for j := 0; j < dn; j++ { // k_b(j, c, h) = kv_b[h(dn+dv)+j, c]
						kv[(h*(dn+dv)+j)*kr+c] = kb[(h*kr+c)*dn+j]
					}
					for j := 0; j < dv; j++ { // v_b(c, j, h) = kv_b[h(dn+dv)+dn+j, c]
						kv[(h*(dn+dv)+dn+j)*kr+c] = vb[(h*dv+j)*kr+c]
					}
				}
			}
			w.RemoveTensor(kbName)
			w.RemoveTensor(vbName)
			if err := w.AddTensor(fmt.Sprintf("blk.%d.attn_kv_b.weight", l), tensor.F32,
				[]int64{int64(kr), int64(H * (dn + dv))}, f32Bytes(kv)); err != nil {
				return err
			}
		}
		return nil
	})
	legacy, err := Load(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer legacy.Close()
	tokens := p2(t)
	want := prefill(t, m, tokens)
	got := prefill(t, legacy, tokens)
	var worst float64
	for i := range want {
		worst = max(worst, maxAbsDiff(want[i], got[i]))
	}
	s, err := legacy.NewSession(SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, tok := range tokens {
		row, err := s.Decode(tok)
		if err != nil {
			t.Fatal(err)
		}
		worst = max(worst, maxAbsDiff(row, want[i]))
	}
	if worst > 1e-5 {
		t.Errorf("combined attn_kv_b: logits differ by %g", worst)
	}
}

// TestContinuation: a prompt split over several Prefill and Decode calls
// gives the logits of one Prefill.
func TestContinuation(t *testing.T) {
	for _, name := range []string{"glm5-mini-sparse.Q8_0", "ds2-mini.Q8_0"} {
		t.Run(name, func(t *testing.T) {
			m := loadTest(t, name)
			tokens := p2(t)
			want := prefill(t, m, tokens)
			s, err := m.NewSession(SessionOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var got [][]float32
			for _, part := range [][]int32{tokens[:5], tokens[5:12], tokens[12:30]} {
				rows, err := s.Prefill(part)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, rows...)
			}
			for _, tok := range tokens[30:] {
				row, err := s.Decode(tok)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, row)
			}
			if s.Pos() != len(tokens) {
				t.Errorf("Pos %d, want %d", s.Pos(), len(tokens))
			}
			for i := range want {
				if d := maxAbsDiff(want[i], got[i]); d > 1e-4 {
					t.Errorf("position %d: %g from one-batch prefill", i, d)
				}
			}
			// Reset starts over.
			s.Reset()
			rows, err := s.Prefill(tokens[:3])
			if err != nil {
				t.Fatal(err)
			}
			if d := maxAbsDiff(rows[2], want[2]); d > 1e-4 {
				t.Errorf("after Reset: %g", d)
			}
		})
	}
}

// TestBadModels: missing or misshapen tensors and keys give clear errors.
func TestBadModels(t *testing.T) {
	src := modelPath(t, "glm5-mini.Q8_0")
	cases := []struct {
		name string
		edit func(f *gguf.File, w *gguf.Writer) error
		want string
		typ  any
	}{
		{"missing tensor", func(f *gguf.File, w *gguf.Writer) error {
			w.RemoveTensor("blk.1.attn_q_b.weight")
			return nil
		}, `missing tensor "blk.1.attn_q_b.weight"`, new(*MissingTensorError)},
		{"missing indexer part", func(f *gguf.File, w *gguf.Writer) error {
			w.RemoveTensor("blk.2.indexer.proj.weight")
			return nil
		}, `"blk.2.indexer.proj.weight"`, new(*MissingTensorError)},
		{"wrong shape", func(f *gguf.File, w *gguf.Writer) error {
			return w.ReplaceTensor("blk.0.attn_kv_a_norm.weight", tensor.F32, []int64{255}, make([]byte, 4*255))
		}, `"blk.0.attn_kv_a_norm.weight": shape [255], want [256]`, new(*TensorError)},
		{"wrong expert shape", func(f *gguf.File, w *gguf.Writer) error {
			ti, _ := f.Tensor("blk.1.ffn_up_exps.weight")
			n := int64(len(ti.Data)) / 16 * 15
			return w.ReplaceTensor(ti.Name, ti.Type, []int64{256, 256, 15}, ti.Data[:n])
		}, `"blk.1.ffn_up_exps.weight": shape [256 256 15]`, new(*TensorError)},
		{"missing key", func(f *gguf.File, w *gguf.Writer) error {
			w.RemoveKV("glm-dsa.attention.kv_lora_rank")
			return nil
		}, `glm-dsa.attention.kv_lora_rank`, nil},
		{"inconsistent key", func(f *gguf.File, w *gguf.Writer) error {
			w.SetKV("glm-dsa.attention.key_length", gguf.Uint32(100))
			return nil
		}, `glm-dsa.attention.key_length`, nil},
		{"unsupported arch", func(f *gguf.File, w *gguf.Writer) error {
			w.SetKV("general.architecture", gguf.String("llama"))
			return nil
		}, `architecture "llama" is not supported`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(rewrite(t, src, tc.edit), Options{})
			if err == nil {
				t.Fatal("Load succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			switch target := tc.typ.(type) {
			case **MissingTensorError:
				if !errors.As(err, target) {
					t.Errorf("error %v is not a *MissingTensorError", err)
				}
			case **TensorError:
				if !errors.As(err, target) {
					t.Errorf("error %v is not a *TensorError", err)
				}
			}
		})
	}
}

// TestBadTokens: empty input, ids outside the vocabulary and a full
// context give errors and leave the session usable.
func TestBadTokens(t *testing.T) {
	m := loadTest(t, "glm5-mini.Q8_0")
	s, err := m.NewSession(SessionOptions{ContextSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		run    func() error
		want   string
		isFull bool
	}{
		{"empty", func() error { _, err := s.Prefill(nil); return err }, "no tokens", false},
		{"too large", func() error { _, err := s.Prefill([]int32{1, 1024}); return err }, "token 1024 (at 1) is outside the vocabulary [0, 1024)", false},
		{"negative", func() error { _, err := s.Decode(-1); return err }, "token -1", false},
		{"context", func() error { _, err := s.Prefill([]int32{1, 2, 3, 4, 5}); return err }, "exceed the context size 4", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if errors.Is(err, ErrContextFull) != tc.isFull {
				t.Errorf("errors.Is(err, ErrContextFull) = %v", !tc.isFull)
			}
			if s.Pos() != 0 {
				t.Errorf("Pos %d after a failed call", s.Pos())
			}
		})
	}
	if _, err := s.Prefill([]int32{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decode(5); !errors.Is(err, ErrContextFull) {
		t.Errorf("Decode past the context: %v", err)
	}
	if _, err := m.NewSession(SessionOptions{ContextSize: -1}); err == nil {
		t.Error("negative context size accepted")
	}
}

// TestScaleTensors: optional "<name>.scale" tensors multiply the products:
// weights divided by s with a scale tensor s give the original logits.
func TestScaleTensors(t *testing.T) {
	src := modelPath(t, "glm5-mini.Q8_0")
	m := loadTest(t, "glm5-mini.Q8_0")
	X := m.Config().Experts
	path := rewrite(t, src, func(f *gguf.File, w *gguf.Writer) error {
		scaled := func(name string, per int, s func(block int) float32) error {
			ti, _ := f.Tensor(name)
			v := dequantAll(t, ti)
			for i := range v {
				v[i] /= s(i / per)
			}
			return w.ReplaceTensor(name, tensor.F32, ti.Dims, f32Bytes(v))
		}
		two := func(int) float32 { return 2 }
		if err := scaled("blk.1.attn_output.weight", 1, two); err != nil {
			return err
		}
		if err := w.AddTensor("blk.1.attn_output.scale", tensor.F32, []int64{1}, f32Bytes([]float32{2})); err != nil {
			return err
		}
		if err := scaled("blk.0.ffn_down.weight", 1, func(int) float32 { return 4 }); err != nil {
			return err
		}
		if err := w.AddTensor("blk.0.ffn_down.scale", tensor.F32, []int64{1}, f32Bytes([]float32{4})); err != nil {
			return err
		}
		if err := scaled("blk.2.ffn_down_shexp.weight", 1, two); err != nil {
			return err
		}
		if err := w.AddTensor("blk.2.ffn_down_shexp.scale", tensor.F32, []int64{1}, f32Bytes([]float32{2})); err != nil {
			return err
		}
		per := make([]float32, X)
		for e := range per {
			per[e] = float32(int(1) << (e % 4))
		}
		ti, _ := f.Tensor("blk.2.ffn_up_exps.weight")
		if err := scaled(ti.Name, int(ti.Dims[0]*ti.Dims[1]), func(e int) float32 { return per[e] }); err != nil {
			return err
		}
		return w.AddTensor("blk.2.ffn_up_exps.scale", tensor.F32, []int64{int64(X)}, f32Bytes(per))
	})
	sm, err := Load(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sm.Close()
	if s := sm.Weights().Layers[2].MoE.Experts[3].Up.Scale; s != 8 {
		t.Fatalf("expert 3 up scale %g, want 8", s)
	}
	tokens := p2(t)
	want, got := prefill(t, m, tokens), prefill(t, sm, tokens)
	for i := range want {
		if d := maxAbsDiff(want[i], got[i]); d > 1e-5 {
			t.Errorf("position %d: logits differ by %g", i, d)
		}
	}
}
