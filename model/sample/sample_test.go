package sample

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// glmVocab is GLM-5's vocabulary size.
const glmVocab = 154880

// lnProbs returns logits whose softmax is probs.
func lnProbs(probs ...float64) []float32 {
	out := make([]float32, len(probs))
	for i, p := range probs {
		out[i] = float32(math.Log(p))
	}
	return out
}

// finalDist runs the chain up to the draw and returns the surviving tokens
// with their probabilities.
func finalDist(t *testing.T, s *Sampler, logits []float32) map[int32]float64 {
	t.Helper()
	if err := s.adjust(logits); err != nil {
		t.Fatal(err)
	}
	if err := s.distribution(); err != nil {
		t.Fatal(err)
	}
	got := make(map[int32]float64, len(s.cands))
	for _, c := range s.cands {
		got[c.id] = c.p
	}
	return got
}

func checkDist(t *testing.T, got, want map[int32]float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("kept %v, want %v", got, want)
	}
	for id, p := range want {
		q, ok := got[id]
		if !ok || math.Abs(q-p) > tol {
			t.Fatalf("kept %v, want %v", got, want)
		}
	}
}

// TestStages checks each stage on a five-token vocabulary with
// probabilities 1/2, 1/4, 1/8, 1/16, 1/16, against hand-computed kept sets
// and renormalised probabilities.
func TestStages(t *testing.T) {
	logits := lnProbs(0.5, 0.25, 0.125, 0.0625, 0.0625)
	sq := []float64{math.Sqrt(0.5), math.Sqrt(0.25), math.Sqrt(0.125), 0.25, 0.25}
	sqSum := sq[0] + sq[1] + sq[2] + sq[3] + sq[4]
	const sqr = 0.25 + 0.0625 + 0.015625 + 0.00390625 + 0.00390625 // sum of p^2
	tests := []struct {
		name string
		opts Options
		want map[int32]float64
	}{
		{"temperature 1", Options{Temperature: 1}, map[int32]float64{0: 0.5, 1: 0.25, 2: 0.125, 3: 0.0625, 4: 0.0625}},
		{"top-k 2", Options{Temperature: 1, TopK: 2}, map[int32]float64{0: 2.0 / 3, 1: 1.0 / 3}},
		{"top-k 4 tie keeps lower id", Options{Temperature: 1, TopK: 4}, map[int32]float64{0: 0.5 / 0.9375, 1: 0.25 / 0.9375, 2: 0.125 / 0.9375, 3: 0.0625 / 0.9375}},
		{"top-k above vocab", Options{Temperature: 1, TopK: 99}, map[int32]float64{0: 0.5, 1: 0.25, 2: 0.125, 3: 0.0625, 4: 0.0625}},
		{"top-p 0.7", Options{Temperature: 1, TopP: 0.7}, map[int32]float64{0: 2.0 / 3, 1: 1.0 / 3}},
		{"top-p 0.8", Options{Temperature: 1, TopP: 0.8}, map[int32]float64{0: 4.0 / 7, 1: 2.0 / 7, 2: 1.0 / 7}},
		{"top-p 0.4", Options{Temperature: 1, TopP: 0.4}, map[int32]float64{0: 1}},
		{"top-p 1 is off", Options{Temperature: 1, TopP: 1}, map[int32]float64{0: 0.5, 1: 0.25, 2: 0.125, 3: 0.0625, 4: 0.0625}},
		{"min-p 0.2", Options{Temperature: 1, MinP: 0.2}, map[int32]float64{0: 4.0 / 7, 1: 2.0 / 7, 2: 1.0 / 7}},
		{"min-p 0.5", Options{Temperature: 1, MinP: 0.49}, map[int32]float64{0: 2.0 / 3, 1: 1.0 / 3}},
		{"temperature 2", Options{Temperature: 2}, map[int32]float64{0: sq[0] / sqSum, 1: sq[1] / sqSum, 2: sq[2] / sqSum, 3: sq[3] / sqSum, 4: sq[4] / sqSum}},
		{"temperature 0.5", Options{Temperature: 0.5}, map[int32]float64{0: 0.25 / sqr, 1: 0.0625 / sqr, 2: 0.015625 / sqr, 3: 0.00390625 / sqr, 4: 0.00390625 / sqr}},
		// top-k 3 -> {4/7, 2/7, 1/7}; top-p 0.8 -> first two (cum 6/7);
		// min-p 0.3 keeps both (ratio 1/2); temperature 0.5 squares: 16:4.
		{"chain", Options{Temperature: 0.5, TopK: 3, TopP: 0.8, MinP: 0.3}, map[int32]float64{0: 0.8, 1: 0.2}},
		// top-p and min-p see the untempered distribution: at temperature
		// 10 the kept set is the same as at 1.
		{"temperature after truncation", Options{Temperature: 10, TopP: 0.7}, map[int32]float64{
			0: 1 / (1 + math.Pow(0.5, 0.1)), 1: math.Pow(0.5, 0.1) / (1 + math.Pow(0.5, 0.1))}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			checkDist(t, finalDist(t, s, logits), tc.want, 1e-6)
		})
	}
}

// TestPenalties checks the adjusted logits after repeat, frequency and
// presence penalties, and the window.
func TestPenalties(t *testing.T) {
	logits := []float32{2, -2, 1, 0.5, 3, 0}
	tests := []struct {
		name     string
		opts     Options
		accepted []int32
		want     []float32
	}{
		// id 0 seen twice: 2/2 - (2*0.5 + 1) = -1; id 1 once: -2*2 - (0.5+1) = -5.5;
		// id 5 (logit 0) once: 0*2 - 1.5; ids outside the vocabulary are ignored.
		{"all history", Options{RepeatPenalty: 2, FrequencyPenalty: 0.5, PresencePenalty: 1, PenaltyLastN: -1},
			[]int32{0, 0, 1, 77, -1, 5}, []float32{-1, -5.5, 1, 0.5, 3, -1.5}},
		// Window of 2 over 4, 0, 0, 1: only one 0 and one 1 count.
		{"window", Options{RepeatPenalty: 2, FrequencyPenalty: 0.5, PresencePenalty: 1, PenaltyLastN: 2},
			[]int32{4, 0, 0, 1}, []float32{1 - 1.5, -5.5, 1, 0.5, 3, 0}},
		{"window wraps", Options{RepeatPenalty: 1, FrequencyPenalty: 1, PenaltyLastN: 3},
			[]int32{0, 1, 2, 3, 4, 4, 2}, []float32{2, -2, 0, 0.5, 1, 0}},
		{"repeat only", Options{RepeatPenalty: 1.25, PenaltyLastN: 64},
			[]int32{0, 1, 0}, []float32{1.6, -2.5, 1, 0.5, 3, 0}},
		{"off when window is 0", Options{RepeatPenalty: 2, PresencePenalty: 1}, []int32{0, 1}, logits},
		{"off when neutral", Options{RepeatPenalty: 1, PenaltyLastN: 64}, []int32{0, 1}, logits},
		{"zero repeat penalty means off", Options{PresencePenalty: 1, PenaltyLastN: 64}, []int32{0}, []float32{1, -2, 1, 0.5, 3, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range tc.accepted {
				s.Accept(id)
			}
			if err := s.adjust(logits); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(s.work, tc.want) {
				t.Errorf("adjusted %v, want %v", s.work, tc.want)
			}
			// Penalties do not leak into the next call or the input.
			if err := s.adjust(logits); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(s.work, tc.want) {
				t.Errorf("second call: adjusted %v, want %v", s.work, tc.want)
			}
			if logits[0] != 2 {
				t.Fatal("input modified")
			}
			s.Reset()
			if err := s.adjust(logits); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(s.work, logits) {
				t.Errorf("after Reset: %v, want %v", s.work, logits)
			}
		})
	}
	// A greedy sampler picks by the penalised logits.
	s, _ := New(Options{RepeatPenalty: 4, PenaltyLastN: 8})
	s.Accept(4)
	if id, err := s.Sample(logits); err != nil || id != 0 {
		t.Errorf("greedy with penalty: %d, %v; want 0", id, err)
	}
}

func TestLogitBias(t *testing.T) {
	logits := []float32{2, -2, 1, 0.5, 3}
	t.Run("ban greedy", func(t *testing.T) {
		s, _ := New(Options{LogitBias: map[int32]float32{4: float32(math.Inf(-1))}})
		if id, err := s.Sample(logits); err != nil || id != 0 {
			t.Fatalf("got %d, %v; want 0", id, err)
		}
	})
	t.Run("ban sampling", func(t *testing.T) {
		s, _ := New(Options{Temperature: 1.5, Seed: 3, LogitBias: map[int32]float32{4: float32(math.Inf(-1)), 0: float32(math.Inf(-1))}})
		for range 2000 {
			id, err := s.Sample(logits)
			if err != nil {
				t.Fatal(err)
			}
			if id == 4 || id == 0 {
				t.Fatalf("sampled banned token %d", id)
			}
		}
		if p := finalDist(t, s, logits); len(p) != 5 || p[4] != 0 || p[0] != 0 {
			t.Errorf("banned tokens have probability: %v", p)
		}
	})
	t.Run("ban with top-k", func(t *testing.T) {
		s, _ := New(Options{Temperature: 1, TopK: 2, LogitBias: map[int32]float32{4: float32(math.Inf(-1))}})
		checkDist(t, finalDist(t, s, lnProbs(0.1, 0.2, 0.3, 0.05, 0.35)), map[int32]float64{2: 0.6, 1: 0.4}, 1e-6)
	})
	t.Run("additive", func(t *testing.T) {
		s, _ := New(Options{LogitBias: map[int32]float32{2: 1.5, 1: -1}})
		if err := s.adjust(logits); err != nil {
			t.Fatal(err)
		}
		if want := []float32{2, -3, 2.5, 0.5, 3}; !slices.Equal(s.work, want) {
			t.Errorf("got %v, want %v", s.work, want)
		}
		// Bias comes before the repeat penalty, as in llama.cpp.
		s, _ = New(Options{RepeatPenalty: 2, PenaltyLastN: 4, LogitBias: map[int32]float32{2: 1}})
		s.Accept(2)
		if err := s.adjust(logits); err != nil {
			t.Fatal(err)
		}
		if s.work[2] != 1 {
			t.Errorf("biased, penalised logit %v, want (1+1)/2 = 1", s.work[2])
		}
	})
	t.Run("all banned", func(t *testing.T) {
		inf := float32(math.Inf(-1))
		for _, o := range []Options{{}, {Temperature: 1}, {Temperature: 1, TopK: 2}, {Temperature: 1, TopP: 0.5}, {Temperature: 1, MinP: 0.1}} {
			o.LogitBias = map[int32]float32{0: inf, 1: inf, 2: inf}
			s, _ := New(o)
			if _, err := s.Sample([]float32{1, 2, 3}); !errors.Is(err, ErrNoCandidates) {
				t.Errorf("%+v: error %v, want ErrNoCandidates", o, err)
			}
		}
	})
}

func TestGreedy(t *testing.T) {
	nan := float32(math.NaN())
	tests := []struct {
		logits []float32
		want   int32
	}{
		{[]float32{1, 3, 3, 2}, 1},
		{[]float32{5}, 0},
		{[]float32{-1, -1, -1}, 0},
		{[]float32{nan, 1, 2}, 2},
		{[]float32{1, nan, 2, 2}, 2},
		{nil, -1},
	}
	for _, tc := range tests {
		if got := Greedy(tc.logits); got != tc.want {
			t.Errorf("Greedy(%v) = %d, want %d", tc.logits, got, tc.want)
		}
	}
	// The greedy sampler equals argmax on a large random vocabulary.
	logits := randomLogits(glmVocab, 7)
	logits[1234] = 50
	logits[99999] = 50
	s, _ := New(Options{})
	if id, err := s.Sample(logits); err != nil || id != 1234 {
		t.Errorf("greedy sampler: %d, %v; want 1234", id, err)
	}
}

// TestGreedyFastPath: greedy sampling with nothing to adjust (one pass over
// the logits) gives the tokens and errors of the general path, which a
// zero logit bias forces.
func TestGreedyFastPath(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	big := randomLogits(glmVocab, 9)
	big[77] = 40
	big[150000] = 40
	for _, tc := range []struct {
		name   string
		logits []float32
	}{
		{"ties", []float32{1, 3, 3, 2}},
		{"one", []float32{5}},
		{"negative", []float32{-3, -1, -2}},
		{"-Inf first", []float32{-inf, -inf, 2}},
		{"all -Inf", []float32{-inf, -inf}},
		{"NaN", []float32{1, 2, nan, inf}},
		{"+Inf", []float32{1, inf, nan}},
		{"GLM vocabulary", big},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fast, _ := New(Options{})
			general, _ := New(Options{LogitBias: map[int32]float32{0: 0}})
			got, gerr := fast.Sample(tc.logits)
			want, werr := general.Sample(tc.logits)
			if got != want || fmt.Sprint(gerr) != fmt.Sprint(werr) {
				t.Errorf("fast path %d, %v; general path %d, %v", got, gerr, want, werr)
			}
		})
	}
	s, _ := New(Options{})
	if _, err := s.Sample(nil); err == nil || !strings.Contains(err.Error(), "no logits") {
		t.Errorf("no logits: error %v", err)
	}
}

// TestMaxCheck: the scans behind greedy sampling (vector code where the
// CPU has it) equal the portable ones on every length around the vector
// width, with the maximum, a tie, a NaN or a +Inf at every position class.
func TestMaxCheck(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1, 7, 31, 32, 33, 63, 64, 65, 95, 96, 97, 200, glmVocab} {
		for _, at := range []int{0, 1, n / 2, n - 33, n - 32, n - 31, n - 1} {
			if at < 0 || at >= n {
				continue
			}
			for _, plant := range []float32{100, nan, inf, float32(math.Inf(-1))} {
				x := make([]float32, n)
				for i := range x {
					x[i] = float32(r.NormFloat64())
				}
				x[at] = plant
				if plant == 100 && at+1 < n {
					x[n-1] = 100 // a later tie
				}
				m, bad := maxCheck(x)
				wm, wbad := maxCheckGeneric(x)
				if bad != wbad || (!bad && m != wm) {
					t.Fatalf("n %d, %v at %d: maxCheck %v, %v; want %v, %v", n, plant, at, m, bad, wm, wbad)
				}
				if bad {
					continue
				}
				if got, want := index(x, m), indexGeneric(x, m); got != want {
					t.Fatalf("n %d, %v at %d: index %d, want %d", n, plant, at, got, want)
				}
				if got := index(x, 1e9); got != -1 {
					t.Fatalf("n %d: index of a missing value %d", n, got)
				}
			}
		}
	}
}

func TestSeed(t *testing.T) {
	logits := randomLogits(1000, 1)
	draws := func(s *Sampler) []int32 {
		out := make([]int32, 300)
		for i := range out {
			id, err := s.Sample(logits)
			if err != nil {
				t.Fatal(err)
			}
			out[i] = id
			s.Accept(id)
		}
		return out
	}
	opts := DefaultOptions(42)
	opts.RepeatPenalty = 1.1
	a, _ := New(opts)
	b, _ := New(opts)
	da, db := draws(a), draws(b)
	if !slices.Equal(da, db) {
		t.Fatal("same seed, different draws")
	}
	a.Reset()
	if !slices.Equal(draws(a), da) {
		t.Fatal("Reset does not reproduce the draws")
	}
	opts.Seed = 43
	c, _ := New(opts)
	if slices.Equal(draws(c), da) {
		t.Fatal("different seeds, same draws")
	}
}

// TestFrequencies draws 20000 tokens with a fixed seed from a known
// distribution and checks Pearson's chi-square against the 0.1% critical
// value for 4 degrees of freedom (deterministic given the seed).
func TestFrequencies(t *testing.T) {
	probs := []float64{0.4, 0.3, 0.15, 0.1, 0.05}
	logits := lnProbs(probs...)
	s, _ := New(Options{Temperature: 1, Seed: 12345})
	const n = 20000
	counts := make([]int, len(probs))
	for range n {
		id, err := s.Sample(logits)
		if err != nil {
			t.Fatal(err)
		}
		counts[id]++
	}
	var chi2 float64
	for i, p := range probs {
		e := p * n
		chi2 += (float64(counts[i]) - e) * (float64(counts[i]) - e) / e
	}
	if chi2 > 18.47 {
		t.Errorf("chi-square %.2f > 18.47: counts %v for probabilities %v", chi2, counts, probs)
	}
	t.Logf("counts %v, chi-square %.2f", counts, chi2)
}

func randomLogits(n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(r.NormFloat64() * 2)
	}
	return out
}

// refDistribution is a direct float64 rendition of the chain (full sort,
// no selection tricks) used as an oracle.
func refDistribution(work []float32, o Options) map[int32]float64 {
	cs := make([]cand, len(work))
	for i, l := range work {
		cs[i] = cand{id: int32(i), logit: l}
	}
	slices.SortStableFunc(cs, cmpBetter)
	if o.TopK > 0 && o.TopK < len(cs) {
		cs = cs[:o.TopK]
	}
	if o.TopP > 0 && o.TopP < 1 {
		var z float64
		for _, c := range cs {
			z += math.Exp(float64(c.logit) - float64(cs[0].logit))
		}
		var cum float64
		for i, c := range cs {
			cum += math.Exp(float64(c.logit)-float64(cs[0].logit)) / z
			if cum >= float64(o.TopP) {
				cs = cs[:i+1]
				break
			}
		}
	}
	if o.MinP > 0 {
		floor := float64(cs[0].logit) + math.Log(float64(o.MinP))
		cs = slices.DeleteFunc(cs, func(c cand) bool { return float64(c.logit) < floor })
	}
	out := make(map[int32]float64, len(cs))
	var z float64
	for _, c := range cs {
		z += math.Exp((float64(c.logit) - float64(cs[0].logit)) / float64(o.Temperature))
	}
	for _, c := range cs {
		out[c.id] = math.Exp((float64(c.logit)-float64(cs[0].logit))/float64(o.Temperature)) / z
	}
	return out
}

// TestAgainstReference compares the chain with the oracle on random
// vocabularies (with ties) for many option combinations, including top-p
// over a whole large vocabulary (the incremental selection path).
func TestAgainstReference(t *testing.T) {
	opts := []Options{
		{Temperature: 1},
		{Temperature: 0.7, TopK: 40},
		{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05},
		{Temperature: 1.3, TopP: 0.9},
		{Temperature: 1, TopP: 0.999},
		{Temperature: 1, TopP: 0.3},
		{Temperature: 0.5, MinP: 0.1},
		{Temperature: 2, TopK: 1000, MinP: 0.01},
		{Temperature: 1, TopK: 5000, TopP: 0.5},
	}
	for _, n := range []int{3, 300, 5000, glmVocab} {
		logits := randomLogits(n, uint64(n))
		for i := 0; i+1 < n; i += 7 { // ties
			logits[i+1] = logits[i]
		}
		if n == glmVocab { // peaky, like a real model: a few likely tokens, a wide tail
			for i := range logits {
				logits[i] *= 3
			}
			logits[100] = 40
			logits[200] = 41
			logits[99] = -1e30
		}
		for _, o := range opts {
			s, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			got := finalDist(t, s, logits)
			want := refDistribution(logits, o)
			checkDist(t, got, want, 1e-9)
		}
	}
}

func TestLogprobs(t *testing.T) {
	logits := randomLogits(5000, 9)
	logits[10], logits[20] = 9, 9 // a tie at the top
	// Direct float64 log-softmax.
	var z float64
	for _, l := range logits {
		z += math.Exp(float64(l))
	}
	logZ := math.Log(z)
	order := make([]cand, len(logits))
	for i, l := range logits {
		order[i] = cand{id: int32(i), logit: l}
	}
	slices.SortStableFunc(order, cmpBetter)

	// Bias and penalties must not change the reported log-probabilities.
	s, _ := New(Options{Temperature: 1, TopK: 3, LogitBias: map[int32]float32{10: -100}, RepeatPenalty: 3, PenaltyLastN: 4})
	s.Accept(20)
	if _, err := s.Sample(logits); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 1, 5, 5000, 6000} {
		lp, err := s.Logprobs(logits, 77, n)
		if err != nil {
			t.Fatal(err)
		}
		if want := float64(logits[77]) - logZ; math.Abs(lp.Chosen.Logprob-want) > 1e-9 || lp.Chosen.ID != 77 {
			t.Errorf("n=%d: chosen %+v, want logprob %v", n, lp.Chosen, want)
		}
		if len(lp.Top) != min(n, len(logits)) {
			t.Fatalf("n=%d: %d alternatives", n, len(lp.Top))
		}
		for i, tl := range lp.Top {
			if tl.ID != order[i].id || math.Abs(tl.Logprob-(float64(order[i].logit)-logZ)) > 1e-9 {
				t.Fatalf("n=%d: top[%d] = %+v, want id %d logprob %v", n, i, tl, order[i].id, float64(order[i].logit)-logZ)
			}
		}
	}
	if lse := LogSumExp(logits); math.Abs(lse-logZ) > 1e-9 {
		t.Errorf("LogSumExp %v, want %v", lse, logZ)
	}
	// Large logits do not overflow (float64 with the max subtracted).
	big := []float32{1000, 1000}
	lp, err := s.Logprobs(big, 1, 2)
	if err != nil || math.Abs(lp.Chosen.Logprob-math.Log(0.5)) > 1e-12 || lp.Top[0].ID != 0 {
		t.Errorf("big logits: %+v, %v", lp, err)
	}
	// -Inf logits get -Inf log-probabilities.
	lp, err = s.Logprobs([]float32{float32(math.Inf(-1)), 0}, 0, 1)
	if err != nil || !math.IsInf(lp.Chosen.Logprob, -1) || lp.Top[0].Logprob != 0 {
		t.Errorf("-Inf logit: %+v, %v", lp, err)
	}
}

func TestErrors(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"NaN temperature", Options{Temperature: nan}, "temperature"},
		{"top-p above 1", Options{TopP: 1.5}, "top-p"},
		{"min-p above 1", Options{MinP: 2}, "min-p"},
		{"negative repeat penalty", Options{RepeatPenalty: -1}, "repeat penalty"},
		{"infinite presence penalty", Options{PresencePenalty: inf}, "presence penalty"},
		{"negative bias id", Options{LogitBias: map[int32]float32{-3: 1}}, "negative token id"},
		{"+Inf bias", Options{LogitBias: map[int32]float32{3: inf}}, "logit bias"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "sample: ") {
				t.Errorf("error %v, want one about %q", err, tc.want)
			}
		})
	}
	s, _ := New(Options{Temperature: 1, LogitBias: map[int32]float32{10: math.MaxFloat32}})
	for _, tc := range []struct {
		name   string
		logits []float32
		want   string
	}{
		{"empty", nil, "no logits"},
		{"NaN", []float32{1, nan}, "token 1"},
		{"+Inf", []float32{inf, 1}, "token 0"},
		{"bias outside vocabulary", []float32{1, 2, 3}, "token 10"},
		{"bias overflow", append(make([]float32, 10), math.MaxFloat32), "overflows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.Sample(tc.logits); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one about %q", err, tc.want)
			}
		})
	}
	p, _ := New(Options{RepeatPenalty: 1e-10, PenaltyLastN: 4})
	p.Accept(0)
	if _, err := p.Sample([]float32{1e30, 1}); err == nil || !strings.Contains(err.Error(), "penalties") {
		t.Errorf("penalty overflow: error %v", err)
	}
	for _, tc := range []struct {
		name   string
		logits []float32
		chosen int32
	}{
		{"empty", nil, 0},
		{"chosen outside", []float32{1, 2}, 2},
		{"negative chosen", []float32{1, 2}, -1},
		{"NaN", []float32{nan, 2}, 1},
		{"all -Inf", []float32{-inf, -inf}, 1},
	} {
		t.Run("logprobs "+tc.name, func(t *testing.T) {
			if _, err := s.Logprobs(tc.logits, tc.chosen, 2); err == nil {
				t.Error("no error")
			}
		})
	}
}

// TestNoAllocs checks that the hot path reuses its buffers.
func TestNoAllocs(t *testing.T) {
	logits := randomLogits(glmVocab, 3)
	for _, o := range []Options{
		DefaultOptions(1),
		{Temperature: 0.8, TopK: 40, TopP: 0.95, RepeatPenalty: 1.1, FrequencyPenalty: 0.1, PenaltyLastN: 64, LogitBias: map[int32]float32{5: -1}},
		{Temperature: 0.8, TopP: 0.9},
		{Temperature: 1, MinP: 0.05},
		{},
	} {
		s, _ := New(o)
		for i := range 70 {
			s.Accept(int32(i * 13))
		}
		step := func() {
			id, err := s.Sample(logits)
			if err != nil {
				t.Fatal(err)
			}
			s.Accept(id)
			if _, err := s.Logprobs(logits, id, 5); err != nil {
				t.Fatal(err)
			}
		}
		step() // sizes the buffers
		if a := testing.AllocsPerRun(5, step); a != 0 {
			t.Errorf("%+v: %v allocations per token", o, a)
		}
	}
}

func benchmarkSample(b *testing.B, o Options) {
	logits := randomLogits(glmVocab, 5)
	s, err := New(o)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(4 * len(logits)))
	b.ReportAllocs()
	for b.Loop() {
		id, err := s.Sample(logits)
		if err != nil {
			b.Fatal(err)
		}
		s.Accept(id)
	}
}

// BenchmarkSample is llama.cpp's default chain (top-k 40, top-p 0.95,
// min-p 0.05, temperature 0.8) on a GLM-5-sized vocabulary.
func BenchmarkSample(b *testing.B) { benchmarkSample(b, DefaultOptions(1)) }

// BenchmarkSamplePenalties adds repeat/frequency penalties over 64 tokens.
func BenchmarkSamplePenalties(b *testing.B) {
	o := DefaultOptions(1)
	o.RepeatPenalty, o.FrequencyPenalty = 1.1, 0.1
	benchmarkSample(b, o)
}

// BenchmarkSampleTopP is top-p 0.95 without top-k over the whole vocabulary.
func BenchmarkSampleTopP(b *testing.B) {
	benchmarkSample(b, Options{Temperature: 0.8, TopP: 0.95, Seed: 1})
}

func BenchmarkGreedy(b *testing.B) { benchmarkSample(b, Options{}) }

func BenchmarkLogprobs(b *testing.B) {
	logits := randomLogits(glmVocab, 5)
	s, _ := New(Options{})
	b.SetBytes(int64(4 * len(logits)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Logprobs(logits, 3, 5); err != nil {
			b.Fatal(err)
		}
	}
}
