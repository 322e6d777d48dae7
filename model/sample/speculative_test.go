package sample

import (
	"fmt"
	"math"
	"testing"
)

// TestVerifyDistribution checks that speculative sampling's output is
// distributed as the target's: tokens drafted from a different
// distribution, then kept or replaced by Verify, are counted against the
// target's probabilities (Pearson's chi-square, 0.1% critical value for 4
// degrees of freedom; deterministic given the seeds). The cases cover a
// draft close to the target, one far from it, one that misses target
// tokens entirely (top-k), and a target narrowed by top-k and temperature.
func TestVerifyDistribution(t *testing.T) {
	target := []float64{0.4, 0.3, 0.15, 0.1, 0.05}
	for i, tc := range []struct {
		name  string
		draft []float64
		opts  Options
		want  []float64 // the sampler's distribution of target
	}{
		{"close draft", []float64{0.35, 0.35, 0.1, 0.1, 0.1}, Options{Temperature: 1}, target},
		{"far draft", []float64{0.02, 0.03, 0.05, 0.3, 0.6}, Options{Temperature: 1}, target},
		{"draft misses tokens", []float64{0.5, 0.49, 0.005, 0.003, 0.002}, Options{Temperature: 1, TopK: 2}, nil},
		{"temperature 0.5", []float64{0.2, 0.2, 0.2, 0.2, 0.2}, Options{Temperature: 0.5}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if want == nil {
				s, _ := New(tc.opts)
				p, err := s.dense(lnProbs(target...), nil)
				if err != nil {
					t.Fatal(err)
				}
				want = p
			}
			tc.opts.Seed = uint64(100 + i)
			verifier, _ := New(tc.opts)
			dopts := tc.opts
			dopts.Seed = uint64(200 + i)
			drafter, _ := New(dopts)
			tl, dl := lnProbs(target...), lnProbs(tc.draft...)
			const n = 20000
			counts := make([]int, len(target))
			kept := 0
			for range n {
				d, err := drafter.Sample(dl)
				if err != nil {
					t.Fatal(err)
				}
				z, ok, err := verifier.Verify(tl, dl, d)
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					kept++
					if z != d {
						t.Fatalf("accepted %d but returned %d", d, z)
					}
				}
				counts[z]++
			}
			var chi2 float64
			dof := -1
			for i, p := range want {
				if p == 0 {
					if counts[i] != 0 {
						t.Errorf("token %d has probability 0 but came out %d times", i, counts[i])
					}
					continue
				}
				dof++
				e := p * n
				chi2 += (float64(counts[i]) - e) * (float64(counts[i]) - e) / e
			}
			crit := map[int]float64{1: 10.83, 2: 13.82, 3: 16.27, 4: 18.47}[dof]
			if chi2 > crit {
				t.Errorf("chi-square %.2f > %.2f (%d dof): counts %v for probabilities %v", chi2, crit, dof, counts, want)
			}
			t.Logf("kept %.1f%% of drafts; counts %v, chi-square %.2f (%d dof)", 100*float64(kept)/n, counts, chi2, dof)
		})
	}
}

// TestVerifyGreedy checks the greedy rule: the target's argmax comes out,
// accepted exactly when the draft equals it.
func TestVerifyGreedy(t *testing.T) {
	s, _ := New(Options{})
	tl := lnProbs(0.1, 0.6, 0.3)
	for d := range int32(3) {
		z, ok, err := s.Verify(tl, lnProbs(0.3, 0.3, 0.4), d)
		if err != nil || z != 1 || ok != (d == 1) {
			t.Errorf("draft %d: got %d, %v, %v; want 1, %v", d, z, ok, err, d == 1)
		}
	}
}

// TestVerifyErrors covers misuse: mismatched lengths and out-of-range drafts.
func TestVerifyErrors(t *testing.T) {
	s, _ := New(Options{Temperature: 1})
	for i, tc := range []struct {
		target, draft []float32
		d             int32
	}{
		{lnProbs(0.5, 0.5), lnProbs(0.2, 0.3, 0.5), 0},
		{lnProbs(0.5, 0.5), lnProbs(0.5, 0.5), 2},
		{lnProbs(0.5, 0.5), lnProbs(0.5, 0.5), -1},
		{lnProbs(0.5, 0.5), []float32{0, float32(math.Inf(-1))}, 1},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			if _, _, err := s.Verify(tc.target, tc.draft, tc.d); err == nil {
				t.Error("no error")
			}
		})
	}
}
