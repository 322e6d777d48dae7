package server

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/model"
	"github.com/glmrun/glmrun/tensor"
)

// flashShape is a GLM-4.7-Flash-shaped deepseek2 model scaled down (E 2048
// -> 512) with the real model's proportions: 64 routed experts of width
// 0.75·E with 4 used plus 1 shared, 20 MLA heads with q_lora 0.375·E,
// kv_lora 0.25·E, a leading dense layer of width 5·E, sigmoid routing with
// a selection bias, and an output head sized so that it is about a tenth of
// the weights one token reads, as in the 47-layer original. About 140 MB in
// Q8_0.
var flashShape = struct {
	E, Layers, Heads, QRank, KVRank, DNope, DRope, DV int
	FF, FFExp, Experts, Used, Vocab                   int
}{
	E: 512, Layers: 4, Heads: 20, QRank: 192, KVRank: 128, DNope: 64, DRope: 32, DV: 64,
	FF: 2560, FFExp: 384, Experts: 64, Used: 4, Vocab: 4096,
}

// writeFlashLike writes the synthetic model to path, random weights in Q8_0
// (norms and router in F32).
func writeFlashLike(path string) error {
	s := flashShape
	w := gguf.NewWriter()
	const a = "deepseek2."
	u := func(k string, v int) { w.SetKV(a+k, gguf.Uint32(uint32(v))) }
	w.SetKV("general.architecture", gguf.String("deepseek2"))
	w.SetKV("general.name", gguf.String("glm47flash-synthetic"))
	u("vocab_size", s.Vocab)
	u("context_length", 4096)
	u("embedding_length", s.E)
	u("block_count", s.Layers)
	u("leading_dense_block_count", 1)
	u("feed_forward_length", s.FF)
	u("expert_feed_forward_length", s.FFExp)
	u("expert_count", s.Experts)
	u("expert_used_count", s.Used)
	u("expert_shared_count", 1)
	u("expert_group_count", 1)
	u("expert_group_used_count", 1)
	w.SetKV(a+"expert_weights_scale", gguf.Float32(1.8))
	w.SetKV(a+"expert_weights_norm", gguf.Bool(true))
	u("expert_gating_func", model.GatingSigmoid)
	u("attention.head_count", s.Heads)
	u("attention.head_count_kv", 1)
	u("attention.key_length", s.KVRank+s.DRope)
	u("attention.value_length", s.KVRank)
	w.SetKV(a+"attention.layer_norm_rms_epsilon", gguf.Float32(1e-5))
	u("attention.q_lora_rank", s.QRank)
	u("attention.kv_lora_rank", s.KVRank)
	u("attention.key_length_mla", s.DNope+s.DRope)
	u("attention.value_length_mla", s.DV)
	u("rope.dimension_count", s.DRope)
	w.SetKV(a+"rope.freq_base", gguf.Float32(1e6))

	rng := uint64(0x9E3779B97F4A7C15)
	random := func(n int, scale float32) []float32 {
		v := make([]float32, n)
		for i := range v {
			rng ^= rng << 13
			rng ^= rng >> 7
			rng ^= rng << 17
			v[i] = (float32(rng>>40)/float32(1<<24)*2 - 1) * scale
		}
		return v
	}
	var err error
	add := func(name string, typ tensor.Type, dims []int64, v []float32) {
		if err != nil {
			return
		}
		var b []byte
		if typ == tensor.F32 {
			b = make([]byte, 4*len(v))
			for i, x := range v {
				binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
			}
		} else {
			n, rerr := typ.RowSize(int64(len(v)))
			if rerr != nil {
				err = rerr
				return
			}
			b = make([]byte, n)
			if err = tensor.Quantize(typ, v, b); err != nil {
				return
			}
		}
		err = w.AddTensor(name, typ, dims, b)
	}
	mat := func(name string, dims ...int64) {
		n := int64(1)
		for _, d := range dims {
			n *= d
		}
		add(name, tensor.Q8_0, dims, random(int(n), float32(1/math.Sqrt(float64(dims[0])))))
	}
	ones := func(name string, n int) {
		v := make([]float32, n)
		for i := range v {
			v[i] = 1
		}
		add(name, tensor.F32, []int64{int64(n)}, v)
	}
	E, V := int64(s.E), int64(s.Vocab)
	mat("token_embd.weight", E, V)
	ones("output_norm.weight", s.E)
	mat("output.weight", E, V)
	for l := range s.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		H, dq := int64(s.Heads), int64(s.DNope+s.DRope)
		ones(p+"attn_norm.weight", s.E)
		mat(p+"attn_q_a.weight", E, int64(s.QRank))
		ones(p+"attn_q_a_norm.weight", s.QRank)
		mat(p+"attn_q_b.weight", int64(s.QRank), H*dq)
		mat(p+"attn_kv_a_mqa.weight", E, int64(s.KVRank+s.DRope))
		ones(p+"attn_kv_a_norm.weight", s.KVRank)
		mat(p+"attn_k_b.weight", int64(s.DNope), int64(s.KVRank), H)
		mat(p+"attn_v_b.weight", int64(s.KVRank), int64(s.DV), H)
		mat(p+"attn_output.weight", H*int64(s.DV), E)
		ones(p+"ffn_norm.weight", s.E)
		if l == 0 {
			mat(p+"ffn_gate.weight", E, int64(s.FF))
			mat(p+"ffn_up.weight", E, int64(s.FF))
			mat(p+"ffn_down.weight", int64(s.FF), E)
			continue
		}
		X, F := int64(s.Experts), int64(s.FFExp)
		add(p+"ffn_gate_inp.weight", tensor.F32, []int64{E, X}, random(int(E*X), 0.5))
		add(p+"exp_probs_b.bias", tensor.F32, []int64{X}, random(int(X), 0.05))
		mat(p+"ffn_gate_exps.weight", E, F, X)
		mat(p+"ffn_up_exps.weight", E, F, X)
		mat(p+"ffn_down_exps.weight", F, E, X)
		mat(p+"ffn_gate_shexp.weight", E, F)
		mat(p+"ffn_up_shexp.weight", E, F)
		mat(p+"ffn_down_shexp.weight", F, E)
	}
	if err != nil {
		return err
	}
	return w.WriteFile(path)
}

// BenchmarkDecode measures the aggregate decode throughput (tokens/s over
// all sequences) of one continuous-batching step with 1, 4 and 16
// sequences, batched (BatchStepper: one pass for all) and one by one
// (SequentialStepper), on the bundled glm5-mini and on the synthetic
// GLM-4.7-Flash-shaped model, with the fast (quantized-activation) products
// glmrun serve uses. Each sequence holds about 64 tokens of context.
//
// GLMRUN_BENCH_MODEL=FILE.gguf adds another model.
//
//	go test ./server -run '^$' -bench Decode -benchtime 20x
func BenchmarkDecode(b *testing.B) {
	flash := filepath.Join(b.TempDir(), "glm47flash-synthetic.Q8_0.gguf")
	start := time.Now()
	if err := writeFlashLike(flash); err != nil {
		b.Fatal(err)
	}
	b.Logf("wrote %s in %v", flash, time.Since(start).Round(time.Millisecond))
	models := []struct{ name, path string }{
		{"glm5-mini", testModelPath},
		{"glm47flash-synthetic", flash},
	}
	// A model too big for the CPU caches shows what batching saves when
	// weights stream from DRAM, e.g. the reference shape of glmrun synth.
	if path := os.Getenv("GLMRUN_BENCH_MODEL"); path != "" {
		models = append(models, struct{ name, path string }{filepath.Base(path), path})
	}
	for _, mc := range models {
		m, err := model.Load(mc.path, model.Options{Fast: true})
		if err != nil {
			b.Fatal(err)
		}
		for _, st := range []struct {
			name string
			s    Stepper
		}{{"batch", &BatchStepper{}}, {"sequential", SequentialStepper{}}} {
			for _, n := range []int{1, 4, 16} {
				if n == 1 && st.name == "sequential" {
					continue // the same as batch with one sequence
				}
				b.Run(fmt.Sprintf("%s/%s/seqs=%d", mc.name, st.name, n), func(b *testing.B) {
					benchSteps(b, m, st.s, n)
				})
			}
		}
		m.Close()
	}
}

func benchSteps(b *testing.B, m *model.Model, st Stepper, n int) {
	const prompt, ctx = 64, 256
	sessions := make([]*model.Session, n)
	tokens := make([]int32, n)
	V := int32(m.Config().VocabSize)
	reset := func() {
		for i := range sessions {
			sessions[i].Reset()
			p := make([]int32, prompt)
			for j := range p {
				p[j] = int32(i*prompt+j) % V
			}
			if _, err := sessions[i].Prefill(p); err != nil {
				b.Fatal(err)
			}
			tokens[i] = int32(i) % V
		}
	}
	for i := range sessions {
		s, err := m.NewSession(model.SessionOptions{ContextSize: ctx})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		sessions[i] = s
	}
	reset()
	b.ReportAllocs()
	b.ResetTimer()
	var elapsed time.Duration
	t0 := time.Now()
	for b.Loop() {
		if sessions[0].Pos() >= ctx-1 {
			elapsed += time.Since(t0)
			b.StopTimer()
			reset()
			b.StartTimer()
			t0 = time.Now()
		}
		logits, errs := st.Step(sessions, tokens)
		if errs != nil {
			b.Fatal(errs)
		}
		for i, l := range logits {
			best := 0
			for j, v := range l {
				if v > l[best] {
					best = j
				}
			}
			tokens[i] = int32(best)
		}
	}
	elapsed += time.Since(t0)
	b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "tok/s")
}

// BenchmarkServeStreams measures the server end to end: each iteration
// sends n streaming chat requests at once (greedy, 16 tokens each, end of
// generation banned) through the official client and reports the
// aggregate generated tokens/s, prefill included.
//
//	go test ./server -run '^$' -bench ServeStreams -benchtime 3x
func BenchmarkServeStreams(b *testing.B) {
	for _, n := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) {
			ts := newTestServer(b, func(c *Config) { c.Parallel = 16 }, nil)
			p := openai.ChatCompletionNewParams{
				Model: testModelID, Messages: userMsg("Write a long story"), MaxTokens: openai.Int(16),
				Temperature: openai.Float(0), LogitBias: eogBias(ts.tok),
			}
			var tokens int64
			var elapsed time.Duration
			for b.Loop() {
				start := time.Now()
				var wg sync.WaitGroup
				var mu sync.Mutex
				for range n {
					wg.Go(func() {
						r := chatStream(b, ts, p)
						mu.Lock()
						tokens += r.usage.CompletionTokens
						mu.Unlock()
					})
				}
				wg.Wait()
				elapsed += time.Since(start)
			}
			b.ReportMetric(float64(tokens)/elapsed.Seconds(), "tok/s")
		})
	}
}
