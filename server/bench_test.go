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
// GLMRUN_BENCH_MODEL=FILE.gguf adds another model.
//
//	go test ./server -run '^$' -bench Decode -benchtime 40x
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

// syncFile flushes the file at path to disk.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
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
	greedy, err := sample.New(sample.Options{})
	if err != nil {
		b.Fatal(err)
	}
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
			// Greedy, as the scheduler samples a temperature-0 request.
			if tokens[i], err = greedy.Sample(l); err != nil {
				b.Fatal(err)
			}
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
