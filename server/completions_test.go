package server

import (
	"context"
	"math"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/glmrun/glmrun/model"
)

type completionReply struct {
	text     string
	finish   string
	usage    openai.CompletionUsage
	tokens   []string
	logprobs []float64
	top      []map[string]float64
	chunks   int
}

func completeOnce(t testing.TB, ts *testServer, p openai.CompletionNewParams) completionReply {
	t.Helper()
	c, err := ts.client.Completions.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Object != "text_completion" || c.Model != testModelID || len(c.Choices) != 1 {
		t.Fatalf("response header: %s", c.RawJSON())
	}
	ch := c.Choices[0]
	r := completionReply{text: ch.Text, finish: string(ch.FinishReason), usage: c.Usage,
		tokens: ch.Logprobs.Tokens, logprobs: ch.Logprobs.TokenLogprobs, top: ch.Logprobs.TopLogprobs}
	return r
}

func completeStream(t testing.TB, ts *testServer, p openai.CompletionNewParams) completionReply {
	t.Helper()
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	s := ts.client.Completions.NewStreaming(context.Background(), p)
	defer s.Close()
	var r completionReply
	for s.Next() {
		c := s.Current()
		if c.Usage.TotalTokens > 0 {
			r.usage = c.Usage
			continue
		}
		if len(c.Choices) != 1 {
			t.Fatalf("chunk with %d choices: %s", len(c.Choices), c.RawJSON())
		}
		ch := c.Choices[0]
		r.chunks++
		r.text += ch.Text
		if ch.FinishReason != "" {
			r.finish = string(ch.FinishReason)
		}
		r.tokens = append(r.tokens, ch.Logprobs.Tokens...)
		r.logprobs = append(r.logprobs, ch.Logprobs.TokenLogprobs...)
		r.top = append(r.top, ch.Logprobs.TopLogprobs...)
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestCompletions(t *testing.T) {
	ts := newTestServer(t, nil, nil)
	const prompt = "The quick brown fox"
	nPrompt := int64(len(ts.tok.Encode(prompt, true, true)))
	for _, tc := range []struct {
		name   string
		p      openai.CompletionNewParams
		tokens int64
	}{
		{"default max_tokens", openai.CompletionNewParams{}, defaultCompletionTokens},
		{"max_tokens", openai.CompletionNewParams{MaxTokens: openai.Int(5)}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			p.Model = openai.CompletionNewParamsModel(testModelID)
			p.Prompt = openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)}
			p.Temperature, p.LogitBias = openai.Float(0), eogBias(ts.tok)
			whole, streamed := completeOnce(t, ts, p), completeStream(t, ts, p)
			if whole.text != streamed.text || whole.finish != "length" || streamed.finish != "length" {
				t.Fatalf("whole %q (%s), streamed %q (%s); want equal, length", whole.text, whole.finish, streamed.text, streamed.finish)
			}
			for _, r := range []completionReply{whole, streamed} {
				if r.usage.PromptTokens != nPrompt || r.usage.CompletionTokens != tc.tokens || r.usage.TotalTokens != nPrompt+tc.tokens {
					t.Fatalf("usage %+v, want %d + %d", r.usage, nPrompt, tc.tokens)
				}
			}
			// The same prompt as token ids gives the same text.
			ids := ts.tok.Encode(prompt, true, true)
			p.Prompt = openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: toInt64(ids)}
			if r := completeOnce(t, ts, p); r.text != whole.text {
				t.Fatalf("token prompt gave %q, text prompt %q", r.text, whole.text)
			}
		})
	}
}

func toInt64(ids []int32) []int64 {
	out := make([]int64, len(ids))
	for i, id := range ids {
		out[i] = int64(id)
	}
	return out
}

// TestCompletionLogprobs checks the reported log-probabilities against the
// model's own logits.
func TestCompletionLogprobs(t *testing.T) {
	ts := newTestServer(t, nil, nil)
	ids := ts.tok.Encode("Once upon a time", true, true)
	p := openai.CompletionNewParams{
		Model: openai.CompletionNewParamsModel(testModelID), Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: toInt64(ids)},
		MaxTokens: openai.Int(3), Temperature: openai.Float(0), Logprobs: openai.Int(2), LogitBias: eogBias(ts.tok),
	}
	whole, streamed := completeOnce(t, ts, p), completeStream(t, ts, p)
	if len(whole.tokens) != 3 || len(whole.logprobs) != 3 || len(whole.top) != 3 || len(streamed.logprobs) != 3 {
		t.Fatalf("logprobs: whole %d tokens %d values %d tops, streamed %d", len(whole.tokens), len(whole.logprobs), len(whole.top), len(streamed.logprobs))
	}
	for i := range whole.logprobs {
		if whole.logprobs[i] != streamed.logprobs[i] || whole.tokens[i] != streamed.tokens[i] {
			t.Fatalf("token %d: whole %q %g, streamed %q %g", i, whole.tokens[i], whole.logprobs[i], streamed.tokens[i], streamed.logprobs[i])
		}
		if n := len(whole.top[i]); n < 1 || n > 2 {
			t.Fatalf("token %d: %d top logprobs, want 2 (fewer only for equal pieces)", i, n)
		}
	}

	// The first token's log-probability, from the model directly (with the
	// server's KV cache type).
	s, err := testModel(t).m.NewSession(model.SessionOptions{ContextSize: 64, CacheType: testModel(t).g.CacheType()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows, err := s.Prefill(ids)
	if err != nil {
		t.Fatal(err)
	}
	logits := rows[len(rows)-1]
	best := 0
	for i, v := range logits {
		if v > logits[best] && !ts.tok.IsEOG(int32(i)) {
			best = i
		}
	}
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v - logits[best]))
	}
	want := -math.Log(sum)
	if got := whole.logprobs[0]; math.Abs(got-want) > 1e-6 {
		t.Fatalf("first token logprob %g, model says %g", got, want)
	}
	if got, want := whole.tokens[0], ts.tok.Piece(int32(best), true); got != want {
		t.Fatalf("first token %q, model's greedy choice %q", got, want)
	}
}

func TestCompletionStop(t *testing.T) {
	ts := newTestServer(t, nil, scriptFor(testModel(t).tok, "alpha beta gamma", "<|endoftext|>"))
	p := openai.CompletionNewParams{
		Model: openai.CompletionNewParamsModel(testModelID), Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Greek:")},
		MaxTokens: openai.Int(50), Stop: openai.CompletionNewParamsStopUnion{OfString: openai.String(" gam")},
	}
	whole, streamed := completeOnce(t, ts, p), completeStream(t, ts, p)
	for _, r := range []completionReply{whole, streamed} {
		if r.text != "alpha beta" || r.finish != "stop" {
			t.Fatalf("text %q, finish %q; want \"alpha beta\", stop", r.text, r.finish)
		}
	}
	p.Stop = openai.CompletionNewParamsStopUnion{}
	if r := completeOnce(t, ts, p); r.text != "alpha beta gamma" || r.finish != "stop" {
		t.Fatalf("without stop: %q, %q", r.text, r.finish)
	}
	p.MaxTokens = openai.Int(2)
	if r := completeOnce(t, ts, p); r.finish != "length" || r.usage.CompletionTokens != 2 {
		t.Fatalf("max_tokens 2: %q, %q, %+v", r.text, r.finish, r.usage)
	}
}
