package server

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/glmrun/glmrun"
	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/model"
	"github.com/glmrun/glmrun/model/sample"
	"github.com/glmrun/glmrun/model/synth"
)

// BenchmarkDecode measures the aggregate decode throughput (tokens/s over
// all sequences) of one continuous-batching step with 1, 4 and 16
// sequences, batched (BatchStepper: one pass for all) and one by one
// (SequentialStepper), on the bundled glm5-mini and on a synthetic
// GLM-4.7-Flash-shaped model, with the fast (quantized-activation) products
// glmrun serve uses. Each sequence holds about 64 tokens of context.
//
// The synthetic model is glmrun synth's reference shape (the one glmrun
// bench is measured on): GLM-4.7-Flash's layers at their real widths (n_embd
// 2048, 20 MLA heads, q_lora 768, kv_lora 512, 64 routed experts of 1536
// with 4 used and 1 shared, a dense first block of 10240, 151552 tokens),
// 6 of its 47 blocks, in llama.cpp's Q4_K_M mix: 2.4 GB, written to a
// temporary folder first (about 20 s). At these widths one sequence
// streams its weights from memory as the real model does, which is what
// batching saves; a model scaled down to fit the caches measures the
// arithmetic of small products instead.
//
// interleaved/1vs16 alternates single-sequence and 16-sequence steps and
// reports both rates and their ratio (x) measured under the same load:
// on a shared machine the rates of the separate runs drift apart.
//
// GLMRUN_BENCH_MODEL=FILE.gguf adds another model.
//
//	go test ./server -run '^$' -bench Decode -benchtime 10s
func BenchmarkDecode(b *testing.B) {
	tf, err := gguf.Open(testModelPath)
	if err != nil {
		b.Fatal(err)
	}
	flash := filepath.Join(b.TempDir(), "glm47flash-synthetic.Q4_K_M.gguf")
	start := time.Now()
	_, err = synth.Write(flash, synth.Options{Shape: synth.Flash(6), Mix: synth.MixQ4KM, Seed: 1,
		Name: "glm47flash-synthetic", Tokenizer: tf})
	tf.Close()
	if err != nil {
		b.Fatal(err)
	}
	debug.FreeOSMemory() // the model was built in memory
	// Write the file back to disk now, not while the steps are timed.
	if err := syncFile(flash); err != nil {
		b.Fatal(err)
	}
	b.Logf("wrote %s in %v", flash, time.Since(start).Round(time.Millisecond))
	models := []struct{ name, path string }{
		{"glm5-mini", testModelPath},
		{"glm47flash-synthetic", flash},
	}
	if path := os.Getenv("GLMRUN_BENCH_MODEL"); path != "" {
		models = append(models, struct{ name, path string }{filepath.Base(path), path})
	}
	for _, mc := range models {
		g, err := glmrun.Load(mc.path, glmrun.Options{}) // the fast products, as glmrun serve runs
		if err != nil {
			b.Fatal(err)
		}
		m := g.Engine()
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
		b.Run(mc.name+"/interleaved/1vs16", func(b *testing.B) { benchInterleaved(b, m, 16) })
		g.Close()
	}
}

// syncFile flushes the file at path to disk.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// benchDecoder holds n sessions that decode greedily, step by step, from
// 64-token prompts, starting over when the context is full.
type benchDecoder struct {
	b        *testing.B
	st       Stepper
	sessions []*model.Session
	tokens   []int32
	samplers []*sample.Sampler // greedy, one per sequence as in the server
	errs     []error
}

const benchPrompt, benchCtx = 64, 256

func newBenchDecoder(b *testing.B, m *model.Model, st Stepper, n int) *benchDecoder {
	d := &benchDecoder{b: b, st: st, sessions: make([]*model.Session, n), tokens: make([]int32, n)}
	for i := range d.sessions {
		s, err := m.NewSession(model.SessionOptions{ContextSize: benchCtx})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		d.sessions[i] = s
	}
	d.samplers, d.errs = make([]*sample.Sampler, n), make([]error, n)
	for i := range d.samplers {
		var err error
		if d.samplers[i], err = sample.New(sample.Options{}); err != nil {
			b.Fatal(err)
		}
	}
	d.reset()
	return d
}

// reset prefills every session with its prompt again.
func (d *benchDecoder) reset() {
	V := int32(d.sessions[0].Model().Config().VocabSize)
	for i, s := range d.sessions {
		s.Reset()
		p := make([]int32, benchPrompt)
		for j := range p {
			p[j] = int32(i*benchPrompt+j) % V
		}
		if _, err := s.Prefill(p); err != nil {
			d.b.Fatal(err)
		}
		d.tokens[i] = int32(i) % V
	}
}

// full reports whether the next step needs a reset first.
func (d *benchDecoder) full() bool { return d.sessions[0].Pos() >= benchCtx-1 }

// step runs one decode step and picks every session's next token as the
// scheduler does for temperature-0 requests (in parallel, forEach).
func (d *benchDecoder) step() {
	logits, errs := d.st.Step(d.sessions, d.tokens)
	if errs != nil {
		d.b.Fatal(errs)
	}
	forEach(len(logits), func(i int) { d.tokens[i], d.errs[i] = d.samplers[i].Sample(logits[i]) })
	for _, err := range d.errs {
		if err != nil {
			d.b.Fatal(err)
		}
	}
}

func benchSteps(b *testing.B, m *model.Model, st Stepper, n int) {
	d := newBenchDecoder(b, m, st, n)
	b.ReportAllocs()
	b.ResetTimer()
	var elapsed time.Duration
	t0 := time.Now()
	for b.Loop() {
		if d.full() {
			elapsed += time.Since(t0)
			b.StopTimer()
			d.reset()
			b.StartTimer()
			t0 = time.Now()
		}
		d.step()
	}
	elapsed += time.Since(t0)
	b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "tok/s")
}

// benchInterleaved alternates a step of one sequence with a batched step of
// n sequences, timing each, and reports both aggregate rates and their
// ratio (x). Measured one after the other, the two rates are seconds
// apart, and on a shared machine each drifts by ±10% over minutes,
// independently; interleaved, both see the same load.
func benchInterleaved(b *testing.B, m *model.Model, n int) {
	one := newBenchDecoder(b, m, &BatchStepper{}, 1)
	many := newBenchDecoder(b, m, &BatchStepper{}, n)
	b.ResetTimer()
	var t1, tn time.Duration
	for b.Loop() {
		for _, d := range []*benchDecoder{one, many} {
			if d.full() {
				b.StopTimer()
				d.reset()
				b.StartTimer()
			}
		}
		t0 := time.Now()
		one.step()
		t1 += time.Since(t0)
		t0 = time.Now()
		many.step()
		tn += time.Since(t0)
	}
	r1 := float64(b.N) / t1.Seconds()
	rn := float64(n*b.N) / tn.Seconds()
	b.ReportMetric(r1, "tok/s-1")
	b.ReportMetric(rn, fmt.Sprintf("tok/s-%d", n))
	b.ReportMetric(rn/r1, "x")
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
