package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/glmrun/glmrun"
	"github.com/glmrun/glmrun/model"
)

// specBenchPrompt is the conversation --spec-mtp generates from when no
// --spec-prompt is given: chat arithmetic with thinking, a task the trained
// default model knows.
const specBenchPrompt = "What is 742 + 666?"

// parseDraftList reads --spec-mtp's comma-separated draft lengths.
func parseDraftList(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var ks []int
	for _, f := range strings.Split(s, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || k < 1 || k > maxSpecDraft {
			return nil, usageErr("--spec-mtp %q: want draft lengths 1 to %d, comma-separated", s, maxSpecDraft)
		}
		ks = append(ks, k)
	}
	return ks, nil
}

// verifyCost measures a verification pass of K+1 tokens (the trunk's
// batched decode-form pass that checks K drafts) against single-token
// decode steps, on random tokens after the session's first `keep`
// positions: the ceiling of speculative decoding's gain for a given
// acceptance on this model.
func verifyCost(s *model.Session, keep int, ks []int, reps int, random func(int) []int32, logits []float32) ([]float64, float64, error) {
	const steps = 16
	decode := func() (time.Duration, error) {
		s.Truncate(keep)
		t0 := time.Now()
		for _, tok := range random(steps) {
			if err := s.DecodeInto(logits, tok); err != nil {
				return 0, err
			}
		}
		return time.Since(t0) / steps, nil
	}
	best := func(f func() (time.Duration, error)) (time.Duration, error) {
		var b time.Duration
		for i := 0; i <= reps; i++ { // the first run warms up
			d, err := f()
			if err != nil {
				return 0, err
			}
			if i > 0 && (b == 0 || d < b) {
				b = d
			}
		}
		return b, nil
	}
	step, err := best(decode)
	if err != nil {
		return nil, 0, err
	}
	var ratios []float64
	for _, k := range ks {
		d, err := best(func() (time.Duration, error) {
			s.Truncate(keep)
			toks := random(k + 1)
			t0 := time.Now()
			if _, err := s.DecodeTokens(toks); err != nil {
				return 0, err
			}
			return time.Since(t0), nil
		})
		if err != nil {
			return nil, 0, err
		}
		ratios = append(ratios, float64(d)/float64(step))
	}
	return ratios, float64(step) / float64(time.Millisecond), nil
}

// specResult is one generation of the --spec-mtp comparison.
type specResult struct {
	K          int     `json:"k"` // 0: plain decoding
	TokensPerS float64 `json:"tokens_per_s"`
	Generated  int     `json:"generated"`
	Drafted    int     `json:"drafted"`
	Accepted   int     `json:"accepted"`
	Rounds     int     `json:"rounds"`
}

// specGenerate loads the model through the library (with SpecDraft k; 0
// is plain decoding) and generates n tokens from the chat prompt, greedily
// or at temp, the best of reps runs: decode speed after the first token,
// and the speculation counts.
func specGenerate(path string, opts glmrun.Options, k int, prompt string, n, reps int, temp float64) (specResult, error) {
	opts.SpecDraft = k
	m, err := glmrun.Load(path, opts)
	if err != nil {
		return specResult{}, err
	}
	defer m.Close()
	text, err := m.RenderChat([]glmrun.Message{{Role: "user", Content: prompt}}, glmrun.ChatOptions{})
	if err != nil {
		return specResult{}, err
	}
	ids := m.Tokenize(text)
	s, err := m.NewSession(glmrun.SessionOptions{ContextSize: len(ids) + n + 1})
	if err != nil {
		return specResult{}, err
	}
	defer s.Close()
	var best specResult
	for i := 0; i <= reps; i++ { // the first run warms up
		if err := s.Reset(); err != nil {
			return specResult{}, err
		}
		if err := s.PromptTokens(ids); err != nil {
			return specResult{}, err
		}
		gopts := glmrun.GenerateOptions{MaxTokens: n, IgnoreEOS: true}
		gopts.Temperature = float32(temp)
		gopts.Seed = uint64(i)
		var t0 time.Time
		got := 0
		for _, err := range s.Generate(context.Background(), gopts) {
			if err != nil {
				return specResult{}, err
			}
			if got == 0 {
				t0 = time.Now()
			}
			got++
		}
		st := s.Stats()
		r := specResult{K: k, Generated: got, Drafted: st.Drafted, Accepted: st.Accepted, Rounds: st.SpecRounds}
		if got > 1 {
			r.TokensPerS = float64(got-1) / time.Since(t0).Seconds()
		}
		if i > 0 && r.TokensPerS > best.TokensPerS {
			best = r
		}
	}
	return best, nil
}

// printSpec prints the --spec-mtp tables.
func printSpec(w io.Writer, ks []int, ratios []float64, stepMS float64, gens []specResult, temp float64) {
	fmt.Fprintf(w, "\nverification pass of K+1 tokens vs one decode step (%.3f ms):\n| K | pass / step |\n|---:|---:|\n", stepMS)
	for i, k := range ks {
		fmt.Fprintf(w, "| %d | %.2f |\n", k, ratios[i])
	}
	if len(gens) == 0 {
		return
	}
	fmt.Fprintf(w, "\nspeculative decoding with the MTP block (temperature %g):\n| K | t/s | speed-up | accepted | drafts kept per pass |\n|---:|---:|---:|---:|---:|\n", temp)
	for _, g := range gens {
		if g.K == 0 {
			fmt.Fprintf(w, "| off | %.2f | 1.00 | - | - |\n", g.TokensPerS)
			continue
		}
		acc, per := 0.0, 0.0
		if g.Drafted > 0 {
			acc = 100 * float64(g.Accepted) / float64(g.Drafted)
		}
		if g.Rounds > 0 {
			per = float64(g.Accepted) / float64(g.Rounds)
		}
		fmt.Fprintf(w, "| %d | %.2f | %.2f | %.1f%% | %.2f |\n", g.K, g.TokensPerS, g.TokensPerS/gens[0].TokensPerS, acc, per)
	}
}
