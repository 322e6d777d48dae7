package glmrun

import (
	"context"
	"math"
	"slices"
	"testing"
)

// TestPrefixKept: a new prompt that diverges from the cached sequence
// keeps the common prefix in the cache (latents and indexer keys) and runs
// only the rest, Truncate cuts the sequence anywhere, and each continues
// as a session that ran its whole sequence from scratch would. glm5-mini's
// sparse twin (top_k 8) makes the kept indexer keys matter.
func TestPrefixKept(t *testing.T) {
	for _, name := range []string{mini, "glm5-mini-sparse.Q8_0"} {
		t.Run(name, func(t *testing.T) {
			m := testModel(t, name)
			opts := GenerateOptions{MaxTokens: 4, IgnoreEOS: true, Logprobs: true}
			// cold generates from ids in a new session.
			cold := func(ids []int32) ([]int32, []float64) {
				s := newSession(t, m, 64)
				defer s.Close()
				if err := s.PromptTokens(ids); err != nil {
					t.Fatal(err)
				}
				return generateLogprobs(t, s, opts)
			}
			check := func(what string, s *Session, ranWant int, ids []int32) {
				t.Helper()
				got, lp := generateLogprobs(t, s, opts)
				if st := s.Stats(); st.PromptTokens != ranWant {
					t.Errorf("%s: ran %d prompt tokens, want %d", what, st.PromptTokens, ranWant)
				}
				want, wantLP := cold(ids)
				if !slices.Equal(got, want) {
					t.Errorf("%s: generated %v, a cold session %v", what, got, want)
				}
				for i := range min(len(lp), len(wantLP)) {
					if d := math.Abs(lp[i] - wantLP[i]); d > 1e-4 {
						t.Errorf("%s: token %d log-probability %.6f, cold %.6f", what, i, lp[i], wantLP[i])
					}
				}
			}

			s := newSession(t, m, 64)
			defer s.Close()
			if err := s.PromptTokens(p1); err != nil {
				t.Fatal(err)
			}
			generateLogprobs(t, s, opts) // the cache now holds 23 positions

			// Diverge after 12 tokens: 12 kept, 8 run.
			b := append(slices.Clone(p1[:12]), 30, 31, 32, 33, 34, 35, 36, 37)
			if err := s.PromptTokens(b); err != nil {
				t.Fatal(err)
			}
			if s.Cached() != 12 {
				t.Errorf("diverging prompt: %d tokens cached, want the 12 in common", s.Cached())
			}
			check("diverging prompt", s, 8, b)

			// A prompt the cache holds whole: its last token runs again
			// for the logits after it.
			c := slices.Clone(s.Tokens()[:10])
			if err := s.PromptTokens(c); err != nil {
				t.Fatal(err)
			}
			check("cached prompt", s, 1, c)

			// Truncate.
			seq := s.Tokens()
			if err := s.Truncate(5); err != nil {
				t.Fatal(err)
			}
			if s.Cached() != 5 || !slices.Equal(s.Tokens(), seq[:5]) {
				t.Errorf("after Truncate(5): %d cached, tokens %v", s.Cached(), s.Tokens())
			}
			check("truncated", s, 1, seq[:5])
			for _, n := range []int{-1, len(s.Tokens()) + 1} {
				if err := s.Truncate(n); err == nil {
					t.Errorf("Truncate(%d) of %d tokens: no error", n, len(s.Tokens()))
				}
			}
		})
	}
}

// generateLogprobs returns a generation's ids and log-probabilities.
func generateLogprobs(t *testing.T, s *Session, opts GenerateOptions) ([]int32, []float64) {
	t.Helper()
	var ids []int32
	var lps []float64
	for tok, err := range s.Generate(context.Background(), opts) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, tok.ID)
		lps = append(lps, tok.Logprob)
	}
	return ids, lps
}
