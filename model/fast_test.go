package model

import (
	"fmt"
	"math"
	"testing"
)

// loadFast loads a golden model with the fast (quantized-activation)
// matrix products, split over tp devices.
func loadFast(t *testing.T, name string, tp int) *Model {
	t.Helper()
	return loadFastMode(t, name, tp, false)
}

// loadFastMode is loadFast with the products batch-invariant or not
// (Options.BatchInvariant).
func loadFastMode(t *testing.T, name string, tp int, invariant bool) *Model {
	t.Helper()
	m, err := Load(modelPath(t, name), Options{Fast: true, TensorParallel: tp, Threads: 2, BatchInvariant: invariant})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// logitDiff returns the max and mean absolute difference over all rows.
func logitDiff(t *testing.T, got [][]float32, want func(i int) []float32) (maxAbs, meanAbs float64) {
	t.Helper()
	var sum float64
	var n int
	for i, row := range got {
		w := want(i)
		if len(w) != len(row) {
			t.Fatalf("row %d: %d logits, ref %d", i, len(row), len(w))
		}
		for j := range row {
			d := math.Abs(float64(row[j]) - float64(w[j]))
			maxAbs = max(maxAbs, d)
			sum += d
			n++
		}
	}
	return maxAbs, sum / float64(n)
}

// fastRuns returns a fast model's logits for prompt through the prefill
// path (one batch) and the decode path (one token at a time).
func fastRuns(t *testing.T, m *Model, prompt []int32) (pre, dec [][]float32) {
	t.Helper()
	return prefill(t, m, prompt), decodeAll(t, m, prompt)
}

// TestFastDense: on glm5-dense (all layers dense, the indexer keeps every
// key: nothing discrete can flip in the model) the fast path reproduces
// llama.cpp's quantized one-token-at-a-time references (README.shared.md
// §5.1.7) within 1e-2 max abs on P1, in the prefill and in the decode
// path (measured ~1e-6; a different activation quantization lands ~0.15
// away), and with batch-invariant products decode equals prefill exactly.
//
// P2 is held to a looser bound: its 40 tokens meet a few activation
// roundings that lie within float noise of a .5 tie (|x·id − (k+½)| <
// 1e-4), where the side taken depends on the float summation order
// upstream, which no engine shares with llama.cpp (our AVX-512, AVX2 and
// pure-Go kernels do not share it with each other either); one flipped
// int8 moves these logits by 0.01–0.1. TestFastDenseTies forces exactly
// those roundings to llama.cpp's side and then P2 matches to ~1e-6 at
// every position: the bound below is what the flips cost here (measured
// 0.15, mean 0.026 on Q4_K_M). The default products add a prompt's
// sixteen-token tiles in another order (Options.BatchInvariant), which
// moves the side of some of those roundings in the prefill: P2's prefill
// then lands 0.0089 away (mean 6e-5), its decode as before; P1 stays at
// ~3e-6 either way.
func TestFastDense(t *testing.T) {
	const tol = 1e-2
	lim := map[string]struct{ max, mean float64 }{"P1": {tol, 1e-3}, "P2": {0.2, 0.03}}
	for _, tc := range []struct {
		name      string
		invariant bool
	}{{"glm5-dense.Q8_0", true}, {"glm5-dense.Q4_K_M", true}, {"glm5-dense.Q4_K_M", false}} {
		name := tc.name
		t.Run(fmt.Sprintf("%s/invariant=%v", name, tc.invariant), func(t *testing.T) {
			m := loadFastMode(t, name, 1, tc.invariant)
			for _, p := range []string{"P1", "P2"} {
				d := denseSeqDiffs(t, m, name, p)
				l := lim[p]
				if d.preMax > l.max || d.preMean > l.mean {
					t.Errorf("%s prefill vs quantized seq ref: max abs %.3g, mean %.3g; limits %g, %g", p, d.preMax, d.preMean, l.max, l.mean)
				}
				if d.decMax > l.max || d.decMean > l.mean {
					t.Errorf("%s decode vs quantized seq ref: max abs %.3g, mean %.3g; limits %g, %g", p, d.decMax, d.decMean, l.max, l.mean)
				}
				if tc.invariant && d.pathMax != 0 {
					t.Errorf("%s decode vs prefill: max abs %.3g, want 0 (same kernels, same products)", p, d.pathMax)
				}
				t.Logf("%s: prefill %.2g (mean %.2g), decode %.2g (mean %.2g), decode vs prefill %.2g",
					p, d.preMax, d.preMean, d.decMax, d.decMean, d.pathMax)
			}
		})
	}
}

// seqDiffs are the max and mean abs logit differences of the prefill and
// the decode path from a reference, and the max between the two paths.
type seqDiffs struct{ preMax, preMean, decMax, decMean, pathMax float64 }

// denseSeqDiffs runs prompt p ("P1", "P2") through m in both paths and
// compares it with llama.cpp's quantized one-token-at-a-time reference of
// model name.
func denseSeqDiffs(t *testing.T, m *Model, name, p string) seqDiffs {
	t.Helper()
	ref, ok := readRef(t, name+"."+p+".seq")
	if !ok {
		t.Fatalf("no ref %s.%s.seq", name, p)
	}
	pre, dec := fastRuns(t, m, ref.Prompt)
	want := func(i int) []float32 { return ref.PromptLogits[i].Logits }
	var d seqDiffs
	d.preMax, d.preMean = logitDiff(t, pre, want)
	d.decMax, d.decMean = logitDiff(t, dec, want)
	d.pathMax, _ = logitDiff(t, dec, func(i int) []float32 { return pre[i] })
	return d
}

// fastVsF32 is README.shared.md §5.1.6: llama.cpp's own quantized path vs
// its deq-F32 image, max abs and mean abs logit difference for P1 and P2.
// The fast path may be up to 1.5 times as far from the deq-F32 refs.
var fastVsF32 = map[string]struct{ max, mean [2]float64 }{
	"glm5-mini.Q8_0":        {[2]float64{1.17, 3.10}, [2]float64{0.040, 0.054}},
	"glm5-mini-nextn.Q8_0":  {[2]float64{1.17, 3.10}, [2]float64{0.040, 0.054}},
	"glm5-mini.Q4_K_M":      {[2]float64{0.20, 1.88}, [2]float64{0.039, 0.078}},
	"glm5-mini.Q6_K":        {[2]float64{1.68, 3.28}, [2]float64{0.068, 0.138}},
	"glm5-mini-sparse.Q8_0": {[2]float64{4.76, 4.88}, [2]float64{0.19, 0.31}},
	"ds2-mini.Q8_0":         {[2]float64{0.20, 0.52}, [2]float64{0.027, 0.031}},
	"ds2-mini.Q4_K_M":       {[2]float64{0.38, 0.43}, [2]float64{0.042, 0.039}},
}

// TestFastMoE: on the MoE golden models, where activation quantization
// flips some expert choices, the fast path is no further from the deq-F32
// references than 1.5 times llama.cpp's own quantized path (fastVsF32),
// in max abs and in mean abs, prefill and decode.
func TestFastMoE(t *testing.T) {
	const slack = 1.5
	for _, name := range []string{"glm5-mini.Q8_0", "glm5-mini.Q4_K_M", "glm5-mini.Q6_K",
		"glm5-mini-sparse.Q8_0", "ds2-mini.Q8_0", "ds2-mini.Q4_K_M"} {
		t.Run(name, func(t *testing.T) {
			lim := fastVsF32[name]
			m := loadFast(t, name, 1)
			for k, p := range []string{"P1", "P2"} {
				ref, ok := readRef(t, name+".deq-F32."+p)
				if !ok {
					t.Fatalf("no ref %s.deq-F32.%s", name, p)
				}
				pre, dec := fastRuns(t, m, ref.Prompt)
				want := func(i int) []float32 { return ref.PromptLogits[i].Logits }
				for _, r := range []struct {
					path string
					rows [][]float32
				}{{"prefill", pre}, {"decode", dec}} {
					mx, mean := logitDiff(t, r.rows, want)
					if mx > slack*lim.max[k] || mean > slack*lim.mean[k] {
						t.Errorf("%s %s vs deq-F32: max abs %.3g, mean abs %.3g; limits %.3g, %.3g",
							p, r.path, mx, mean, slack*lim.max[k], slack*lim.mean[k])
					}
					t.Logf("%s %s vs deq-F32: max abs %.3g (llama.cpp %.3g), mean abs %.3g (llama.cpp %.3g)",
						p, r.path, mx, lim.max[k], mean, lim.mean[k])
				}
			}
		})
	}
}

// TestFastTensorParallel: the fast path split over 2, 4 and 8 devices
// agrees with one device within 1e-4 on glm5-dense.Q8_0 (nothing discrete
// to flip), prefill and decode. The column shards of attn_output and
// ffn_down then fall on 32-element block boundaries, so each device
// quantizes exactly the activation blocks one device would. (On
// glm5-dense.Q4_K_M a 128-column shard of a 256-element Q4_K block row is
// converted to F32 by SliceCols, so that shard's product sees float32
// activations: the difference is then that of activation quantization,
// ~0.2.)
func TestFastTensorParallel(t *testing.T) {
	const tol = 1e-4
	name := "glm5-dense.Q8_0"
	ref, ok := readRef(t, name+".P1.seq")
	if !ok {
		t.Fatalf("no ref %s.P1.seq", name)
	}
	one := loadFast(t, name, 1)
	wantPre, wantDec := fastRuns(t, one, ref.Prompt)
	for _, tp := range []int{2, 4, 8} {
		t.Run(fmt.Sprintf("tp%d", tp), func(t *testing.T) {
			m := loadFast(t, name, tp)
			pre, dec := fastRuns(t, m, ref.Prompt)
			dPre, _ := logitDiff(t, pre, func(i int) []float32 { return wantPre[i] })
			dDec, _ := logitDiff(t, dec, func(i int) []float32 { return wantDec[i] })
			if dPre > tol || dDec > tol {
				t.Errorf("tp %d vs tp 1: prefill %.3g, decode %.3g > %g", tp, dPre, dDec, tol)
			}
		})
	}
}

// TestPrefillLast: PrefillLast returns exactly Prefill's last row, on both
// paths, with and without a caller's buffer.
func TestPrefillLast(t *testing.T) {
	ref, ok := readRef(t, "glm5-mini.Q8_0.deq-F32.P1")
	if !ok {
		t.Fatal("no ref")
	}
	for _, fast := range []bool{false, true} {
		m, err := Load(modelPath(t, "glm5-mini.Q8_0"), Options{Fast: fast, Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		want := prefill(t, m, ref.Prompt)
		s, err := m.NewSession(SessionOptions{ContextSize: 64})
		if err != nil {
			t.Fatal(err)
		}
		dst := make([]float32, m.Config().VocabSize)
		got, err := s.PrefillLast(dst, ref.Prompt)
		if err != nil {
			t.Fatal(err)
		}
		if &got[0] != &dst[0] {
			t.Errorf("fast %v: PrefillLast did not write to dst", fast)
		}
		if d := maxAbsDiff(got, want[len(want)-1]); d != 0 {
			t.Errorf("fast %v: PrefillLast differs from Prefill's last row by %g", fast, d)
		}
	}
}
