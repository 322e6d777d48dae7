package model

import (
	"maps"
	"slices"
	"testing"
)

// TestCPUMoE: with the routed experts on a CPU device of their own
// (Options.CPUMoE, NCPUMoE), standing in for a GPU plus the CPU, the
// logits of the prefill and decode paths equal the single-device run's
// bit for bit (the same kernels on the same rows), on the float32 and the
// fast path, and so do the routing decisions the hook sees; split over two
// devices with the experts on the CPU the logits agree with the same split
// without it within TestTensorParallel's 1e-4 (only the order in which the
// experts' partial sums are added changes).
func TestCPUMoE(t *testing.T) {
	load := func(t *testing.T, name string, o Options) *Model {
		t.Helper()
		o.Threads = 1
		m, err := Load(modelPath(t, name), o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	run := func(t *testing.T, m *Model, prompt []int32) (pre, dec [][]float32, ids map[string][]int32) {
		t.Helper()
		ids = map[string][]int32{}
		s, err := m.NewSession(SessionOptions{ContextSize: len(prompt) + 4,
			IDHook: func(name string, layer int, shape []int, v []int32) { ids[name] = slices.Clone(v) }})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if pre, err = s.Prefill(prompt); err != nil {
			t.Fatal(err)
		}
		for _, tok := range prompt[:4] {
			row, err := s.Decode(tok)
			if err != nil {
				t.Fatal(err)
			}
			dec = append(dec, row)
		}
		return pre, dec, ids
	}
	for _, name := range []string{"glm5-mini-sparse.Q8_0", "ds2-mini.Q4_K_M"} {
		for _, fast := range []bool{false, true} {
			t.Run(name+map[bool]string{false: "/f32", true: "/fast"}[fast], func(t *testing.T) {
				ref, ok := readRef(t, name+".deq-F32.P2")
				if !ok {
					ref, _ = readRef(t, name+".deq-F32.P1")
				}
				prompt := ref.Prompt
				wantPre, wantDec, wantIDs := run(t, load(t, name, Options{Fast: fast}), prompt)
				if len(wantIDs) == 0 {
					t.Fatal("no routing decisions seen")
				}
				for _, o := range []Options{{CPUMoE: true}, {NCPUMoE: 2}, {NCPUMoE: 1000}} {
					o.Fast = fast
					m := load(t, name, o)
					want := min(o.NCPUMoE, m.blocks())
					if o.CPUMoE {
						want = m.blocks()
					}
					if m.CPUMoEBlocks() != want {
						t.Errorf("%+v: %d blocks with CPU experts, want %d", o, m.CPUMoEBlocks(), want)
					}
					pre, dec, ids := run(t, m, prompt)
					if !slices.EqualFunc(pre, wantPre, slices.Equal) || !slices.EqualFunc(dec, wantDec, slices.Equal) {
						t.Errorf("CPU MoE %+v: logits differ from one device", o)
					}
					if !maps.EqualFunc(ids, wantIDs, slices.Equal) {
						t.Errorf("CPU MoE %+v: routing or DSA selection differs from one device", o)
					}
				}
				// Split over two devices the routed experts' partial sums
				// add up in another order (all on device 0 instead of half
				// on each), the rest of the step is the same.
				tpPre, tpDec, _ := run(t, load(t, name, Options{Fast: fast, TensorParallel: 2}), prompt)
				pre, dec, _ := run(t, load(t, name, Options{Fast: fast, CPUMoE: true, TensorParallel: 2}), prompt)
				var d float64
				for i := range pre {
					d = max(d, maxAbsDiff(pre[i], tpPre[i]))
				}
				for i := range dec {
					d = max(d, maxAbsDiff(dec[i], tpDec[i]))
				}
				if d > 1e-4 {
					t.Errorf("tp 2 with CPU MoE: logits differ from tp 2 by %.3g; want <= 1e-4", d)
				}
				t.Logf("tp 2 with CPU MoE against tp 2: max abs diff %.2g", d)
			})
		}
	}
}

// TestCPUMoEMemory: the routed experts on the CPU take their bytes off the
// plan's device (the budget a GPU's memory sets), and a negative block
// count is an error naming it.
func TestCPUMoEMemory(t *testing.T) {
	usedBy := func(o Options) int64 {
		m, err := Load(modelPath(t, "ds2-mini.Q8_0"), o)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		return m.Devices()[0].Used()
	}
	all, some := usedBy(Options{}), usedBy(Options{CPUMoE: true})
	if some >= all {
		t.Errorf("device 0 holds %d bytes with the experts on the CPU, %d without", some, all)
	}
	if _, err := Load(modelPath(t, "ds2-mini.Q8_0"), Options{NCPUMoE: -1}); err == nil {
		t.Error("NCPUMoE -1 loaded")
	}
}
