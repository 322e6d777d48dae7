package glmrun

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/glmrun/glmrun/internal/testmodels"
)

// genResult is what a generation hands its caller.
type genResult struct {
	ids   []int32
	text  string
	lps   []float64
	stop  StopReason
	stats Stats
}

func generateAll(t *testing.T, m *Model, prompt string, ctxSize int, opts GenerateOptions) genResult {
	t.Helper()
	s, err := m.NewSession(SessionOptions{ContextSize: ctxSize})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Prompt(prompt); err != nil {
		t.Fatal(err)
	}
	var r genResult
	for tok, err := range s.Generate(context.Background(), opts) {
		if err != nil {
			t.Fatal(err)
		}
		r.ids = append(r.ids, tok.ID)
		r.text += tok.Text
		r.lps = append(r.lps, tok.Logprob)
		r.stop = tok.Stop
	}
	r.stats = s.Stats()
	// The sequence holds the prompt and what was handed out, no more.
	if got, want := len(s.Tokens()), len(m.Tokenize(prompt))+len(r.ids); got != want {
		t.Fatalf("the session holds %d tokens after the generation, want %d", got, want)
	}
	return r
}

// TestSpecGreedyEqualsPlain checks that greedy speculative decoding with
// the MTP block gives plain greedy decoding's tokens, log-probabilities,
// text and stop reason, with batch-invariant products, on the models with
// an MTP block (the trained default and the golden glm5-mini-nextn), on
// one and two devices, for several draft lengths and for each way a
// generation ends: length, stop string, context full.
func TestSpecGreedyEqualsPlain(t *testing.T) {
	if raceEnabled {
		t.Skip("one goroutine, and minutes under the race detector")
	}
	prompt := "[gMASK]<sop><|user|>What is 742 + 666?<|assistant|><think>"
	cases := []struct {
		name    string
		ctxSize int
		opts    GenerateOptions
	}{
		{"length", 256, GenerateOptions{MaxTokens: 61, IgnoreEOS: true, Logprobs: true}},
		{"stop string", 256, GenerateOptions{MaxTokens: 80, IgnoreEOS: true, Stop: []string{"6"}}},
		{"context full", 40, GenerateOptions{IgnoreEOS: true}},
		{"eog", 256, GenerateOptions{MaxTokens: 120}},
	}
	for _, name := range []string{"glm5-tiny.Q8_0", "glm5-mini-nextn.Q8_0"} {
		for _, tp := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/tp%d", name, tp), func(t *testing.T) {
				path := testmodels.Path(t, name)
				plain, err := Load(path, Options{TensorParallel: tp, BatchInvariant: true})
				if err != nil {
					t.Fatal(err)
				}
				defer plain.Close()
				want := make([]genResult, len(cases))
				for i, tc := range cases {
					want[i] = generateAll(t, plain, prompt, tc.ctxSize, tc.opts)
				}
				for _, k := range []int{1, 3, 5} {
					spec, err := Load(path, Options{TensorParallel: tp, BatchInvariant: true, SpecDraft: k})
					if err != nil {
						t.Fatal(err)
					}
					for i, tc := range cases {
						got := generateAll(t, spec, prompt, tc.ctxSize, tc.opts)
						w := want[i]
						if !slices.Equal(got.ids, w.ids) || got.text != w.text || got.stop != w.stop || !slices.Equal(got.lps, w.lps) {
							t.Errorf("K=%d %s: speculative output differs:\n got %v %q %s\nwant %v %q %s", k, tc.name,
								got.ids, got.text, got.stop, w.ids, w.text, w.stop)
						}
						if got.stats.Drafted == 0 {
							t.Errorf("K=%d %s: nothing was drafted", k, tc.name)
						}
						t.Logf("K=%d %s: %d tokens, %d drafted, %d accepted (%.0f%%)", k, tc.name, len(got.ids),
							got.stats.Drafted, got.stats.Accepted, 100*float64(got.stats.Accepted)/float64(max(got.stats.Drafted, 1)))
					}
					spec.Close()
				}
			})
		}
	}
}

// TestSpecSessionReuse runs a session through turns that keep part of the
// cache: a reply, a new prompt that shares only the first tokens of the old
// sequence (the cache is cut back, and the MTP block needs the trunk's
// state where it was cut), and an explicit Truncate; speculative and plain
// sessions give the same tokens at every turn.
func TestSpecSessionReuse(t *testing.T) {
	path := testmodels.Path(t, "glm5-tiny.Q8_0")
	run := func(k int) [][]int32 {
		m, err := Load(path, Options{BatchInvariant: true, SpecDraft: k})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		s, err := m.NewSession(SessionOptions{ContextSize: 512})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var out [][]int32
		gen := func() {
			var ids []int32
			for tok, err := range s.Generate(context.Background(), GenerateOptions{MaxTokens: 30, IgnoreEOS: true}) {
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, tok.ID)
			}
			out = append(out, ids)
		}
		for _, p := range []string{
			"[gMASK]<sop><|user|>What is 12 + 30?<|assistant|><think>",
			"[gMASK]<sop><|user|>What is 12 + 31?<|assistant|><think>",
			"[gMASK]<sop><|user|>Copy this: alpha beta gamma<|assistant|></think>",
		} {
			if err := s.Prompt(p); err != nil {
				t.Fatal(err)
			}
			gen()
		}
		if err := s.Truncate(len(s.Tokens()) - 20); err != nil {
			t.Fatal(err)
		}
		gen()
		return out
	}
	want := run(0)
	for _, k := range []int{1, 4} {
		got := run(k)
		for i := range want {
			if !slices.Equal(got[i], want[i]) {
				t.Errorf("K=%d turn %d: %v, plain %v", k, i, got[i], want[i])
			}
		}
	}
}
