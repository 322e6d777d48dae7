package server

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
)

// TestConcurrentStreams: 32 streaming chat requests at temperature 0 sent at
// once all complete, and each stream's text equals the text of the same
// request run alone: batching does not change the greedy tokens.
func TestConcurrentStreams(t *testing.T) {
	const n = 32
	ts := newTestServer(t, func(c *Config) { c.Parallel = 16; c.QueueSize = n; c.ContextSize = 128 }, nil)
	params := make([]openai.ChatCompletionNewParams, n)
	for i := range params {
		params[i] = openai.ChatCompletionNewParams{
			Model: testModelID, Messages: userMsg(fmt.Sprintf("Question %d: what comes after %d?", i, i*7)),
			MaxTokens: openai.Int(int64(4 + i%8)), Temperature: openai.Float(0),
		}
	}
	alone, together := aloneAndTogether(t, ts, params)
	for i := range n {
		a, b := alone[i], together[i]
		if a.content != b.content || a.reasoning != b.reasoning || a.finish != b.finish || a.usage.CompletionTokens != b.usage.CompletionTokens {
			t.Errorf("request %d: alone %q/%q (%s, %d tokens), concurrent %q/%q (%s, %d tokens)", i,
				a.reasoning, a.content, a.finish, a.usage.CompletionTokens, b.reasoning, b.content, b.finish, b.usage.CompletionTokens)
		}
	}
	// Sequences did decode together.
	m := metricsOf(t, ts)
	if steps, tokens := m["glmrun_decode_steps_total"], m["glmrun_generation_tokens_total"]; steps <= 0 || tokens <= steps*1.5 {
		t.Errorf("%g decode steps for %g tokens: the sequences did not share steps", steps, tokens)
	}
}

// metricsOf reads GET /metrics into name -> value (labels kept in the name).
func metricsOf(t testing.TB, ts *testServer) map[string]float64 {
	t.Helper()
	status, body := get(t, ts.url, "/metrics")
	if status != 200 {
		t.Fatalf("/metrics: %d", status)
	}
	out := make(map[string]float64)
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			t.Fatalf("bad metrics line %q", line)
		}
		out[line[:i]] = v
	}
	return out
}

// TestDisconnect: a client that goes away mid-stream frees its slot at the
// next step, and the next request gets it.
// aloneAndTogether runs every request of params alone (not streamed), one
// after the other, then all at once, streamed, and returns both replies.
func aloneAndTogether(t *testing.T, ts *testServer, params []openai.ChatCompletionNewParams) (alone, together []reply) {
	t.Helper()
	alone = make([]reply, len(params))
	for i, p := range params {
		alone[i] = chatOnce(t, ts, p)
	}
	together = make([]reply, len(params))
	var wg sync.WaitGroup
	for i, p := range params {
		wg.Go(func() { together[i] = chatStream(t, ts, p) })
	}
	wg.Wait()
	return alone, together
}

// TestConcurrentSampling: the sequences of a decode step sample in
// parallel, each with its own seeded sampler; sampled replies and their
// log-probabilities are those of the same requests run alone. Equal bits
// take batch-invariant products: by default a decode step of several
// sequences may round otherwise than one alone (the AVX-512 attention
// tiles), and a rounding near an activation's quantization tie moves a
// random model's logits by 0.01-0.1.
func TestConcurrentSampling(t *testing.T) {
	const n = 12
	inv := invariantModel(t, testModelPath)
	ts := newTestServer(t, func(c *Config) { c.Model = inv.g; c.Parallel = n; c.QueueSize = n; c.ContextSize = 128 }, nil)
	params := make([]openai.ChatCompletionNewParams, n)
	for i := range params {
		params[i] = openai.ChatCompletionNewParams{
			Model: testModelID, Messages: userMsg(fmt.Sprintf("Tell me about %d", i)), MaxTokens: openai.Int(6),
			Temperature: openai.Float(0.9), TopP: openai.Float(0.95), Seed: openai.Int(int64(100 + i)),
			LogitBias: eogBias(ts.tok), Logprobs: openai.Bool(true), TopLogprobs: openai.Int(2),
		}
	}
	alone, together := aloneAndTogether(t, ts, params)
	for i := range n {
		a, b := alone[i], together[i]
		if a.reasoning+a.content != b.reasoning+b.content || len(a.logprobs) != 6 || len(b.logprobs) != 6 {
			t.Fatalf("request %d: alone %q (%d logprobs), concurrent %q (%d logprobs)", i,
				a.reasoning+a.content, len(a.logprobs), b.reasoning+b.content, len(b.logprobs))
		}
		for j := range a.logprobs {
			x, y := a.logprobs[j], b.logprobs[j]
			if x.Token != y.Token || x.Logprob != y.Logprob || len(x.TopLogprobs) != 2 || len(y.TopLogprobs) != 2 ||
				x.TopLogprobs[1].Token != y.TopLogprobs[1].Token {
				t.Fatalf("request %d, token %d: alone %+v, concurrent %+v", i, j, x, y)
			}
		}
	}
}

func TestDisconnect(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.Parallel = 1; c.ContextSize = 4096 }, nil)
	ctx, cancel := context.WithCancel(context.Background())
	s := ts.client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model: testModelID, Messages: userMsg("Talk forever"), Temperature: openai.Float(0), LogitBias: eogBias(ts.tok),
	})
	for i := 0; i < 3 && s.Next(); i++ {
	}
	cancel()
	s.Close()
	waitFor(t, "the canceled sequence to leave its slot", func() bool {
		return ts.s.metrics.canceled.Load() == 1 && ts.s.metrics.active.Load() == 0
	})
	if got := ts.s.metrics.genTokens.Load(); got > 500 {
		t.Fatalf("%d tokens generated: the sequence ran on after its client left", got)
	}
	r := chatOnce(t, ts, openai.ChatCompletionNewParams{Model: testModelID, Messages: userMsg("Hi"), MaxTokens: openai.Int(2)})
	if r.usage.CompletionTokens == 0 {
		t.Fatalf("next request: %+v", r)
	}
}

// TestClose: closing the server ends a running stream with an error event
// and answers queued and new requests with 503.
func TestClose(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.Parallel = 1; c.ContextSize = 4096 }, nil)
	s := ts.client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model: testModelID, Messages: userMsg("Talk forever"), Temperature: openai.Float(0), LogitBias: eogBias(ts.tok),
	})
	defer s.Close()
	if !s.Next() {
		t.Fatalf("no first chunk: %v", s.Err())
	}
	done := make(chan struct{})
	go func() {
		for s.Next() {
		}
		close(done)
	}()
	ts.s.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end after Close")
	}
	if s.Err() == nil || !strings.Contains(s.Err().Error(), "shutting down") {
		t.Fatalf("stream error %v, want the shutdown error", s.Err())
	}
	status, body := post(t, ts.url, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}]}`, nil)
	if status != 503 {
		t.Fatalf("request after Close: %d %v", status, body)
	}
}

func TestInfoEndpoints(t *testing.T) {
	ts := newTestServer(t, nil, nil)
	ctx := context.Background()
	list, err := ts.client.Models.List(ctx)
	if err != nil || len(list.Data) != 1 || list.Data[0].ID != testModelID || list.Data[0].Object != "model" {
		t.Fatalf("models: %v %+v", err, list)
	}
	if m, err := ts.client.Models.Get(ctx, testModelID); err != nil || m.ID != testModelID {
		t.Fatalf("model %s: %v %+v", testModelID, err, m)
	}
	if _, err := ts.client.Models.Get(ctx, "gpt-4o"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("unknown model: %v", err)
	}
	status, body := get(t, ts.url, "/health")
	if status != 200 || !strings.Contains(string(body), `"status":"ok"`) {
		t.Fatalf("/health: %d %s", status, body)
	}

	chatOnce(t, ts, openai.ChatCompletionNewParams{Model: testModelID, Messages: userMsg("Hi"), MaxTokens: openai.Int(3), LogitBias: eogBias(ts.tok)})
	post(t, ts.url, "/v1/chat/completions", `{`, nil)
	_, raw := get(t, ts.url, "/metrics")
	for _, name := range []string{"glmrun_requests_total", "glmrun_generation_tokens_total", "glmrun_prompt_tokens_total",
		"glmrun_decode_tokens_per_second", "glmrun_queue_depth", "glmrun_active_sequences"} {
		if !regexp.MustCompile(`(?m)^# TYPE ` + name + ` (counter|gauge)$`).Match(raw) {
			t.Errorf("/metrics has no TYPE line for %s", name)
		}
	}
	m := metricsOf(t, ts)
	for name, want := range map[string]float64{
		`glmrun_requests_total{path="/v1/chat/completions",code="200"}`: 1,
		`glmrun_requests_total{path="/v1/chat/completions",code="400"}`: 1,
		`glmrun_generation_tokens_total`:                                3,
		`glmrun_slots`:                                                  4,
		`glmrun_queue_depth`:                                            0,
		`glmrun_active_sequences`:                                       0,
		`glmrun_sequences_completed_total`:                              1,
	} {
		if m[name] != want {
			t.Errorf("%s = %g, want %g", name, m[name], want)
		}
	}
	if m["glmrun_decode_tokens_per_second"] <= 0 || m["glmrun_prompt_tokens_total"] <= 0 {
		t.Errorf("no throughput or prompt tokens: %v", m)
	}
}
