package model

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/tensor"
)

// loadTP loads a golden model split over tp devices.
func loadTP(t *testing.T, name string, tp int) *Model {
	t.Helper()
	m, err := Load(modelPath(t, name), Options{TensorParallel: tp, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// decodeAll feeds tokens one at a time through the decode path.
func decodeAll(t *testing.T, m *Model, tokens []int32) [][]float32 {
	t.Helper()
	s, err := m.NewSession(SessionOptions{ContextSize: len(tokens)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var rows [][]float32
	for _, tok := range tokens {
		row, err := s.Decode(tok)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, row)
	}
	return rows
}

// TestTensorParallel: on every golden model the logits with the model
// split over 2, 4 and 8 devices (as far as the heads, experts and FFN
// sizes divide) agree with one device within 1e-4, in the prefill and
// the decode path. The sparse model runs the 40-token prompt so that the
// DSA selection is active.
func TestTensorParallel(t *testing.T) {
	const tol = 1e-4
	for _, name := range goldenModels {
		t.Run(name, func(t *testing.T) {
			prompt := "P1"
			if strings.Contains(name, "sparse") {
				prompt = "P2"
			}
			ref, ok := readRef(t, name+".deq-F32."+prompt)
			if !ok {
				t.Fatalf("no ref %s", name)
			}
			one := loadTP(t, name, 1)
			wantPre := prefill(t, one, ref.Prompt)
			wantDec := decodeAll(t, one, ref.Prompt[:6])
			c := one.Config()
			for _, tp := range []int{2, 4, 8} {
				if _, err := NewPlan(&c, tp); err != nil {
					t.Logf("tp %d: %v", tp, err)
					continue
				}
				m := loadTP(t, name, tp)
				var pre, dec float64
				for i, row := range prefill(t, m, ref.Prompt) {
					pre = max(pre, maxAbsDiff(row, wantPre[i]))
				}
				for i, row := range decodeAll(t, m, ref.Prompt[:6]) {
					dec = max(dec, maxAbsDiff(row, wantDec[i]))
				}
				if pre > tol || dec > tol {
					t.Errorf("tp %d: logits differ from tp 1 by %.3g (prefill), %.3g (decode); want <= %g", tp, pre, dec, tol)
				}
				t.Logf("tp %d: max abs diff vs tp 1: prefill %.2g, decode %.2g", tp, pre, dec)
			}
		})
	}
}

// TestTensorParallelHooks: with 2 devices the hook also sees each
// device's partial attention and FFN outputs, which add up to the reduced
// ones; every shared name carries the values of one device, and the
// routing and DSA decisions are those of one device.
func TestTensorParallelHooks(t *testing.T) {
	run := func(tp int) (map[string][]float32, map[string][]int32, []string) {
		m := loadTP(t, "glm5-mini-sparse.Q8_0", tp)
		f := map[string][]float32{}
		ids := map[string][]int32{}
		var order []string
		s, err := m.NewSession(SessionOptions{
			Hook: func(name string, layer int, shape []int, data []float32) {
				f[name] = slices.Clone(data)
				order = append(order, name)
			},
			IDHook: func(name string, layer int, shape []int, v []int32) { ids[name] = slices.Clone(v) },
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Prefill(p2(t)[:12]); err != nil {
			t.Fatal(err)
		}
		return f, ids, order
	}
	f1, ids1, order1 := run(1)
	f2, ids2, order2 := run(2)
	for _, name := range order1 {
		if d := maxAbsDiff(f1[name], f2[name]); d > 1e-4 {
			t.Errorf("%s: tp 2 differs from tp 1 by %g", name, d)
		}
	}
	if !maps.EqualFunc(ids1, ids2, slices.Equal) {
		t.Errorf("routing or DSA selection differs between tp 1 and tp 2")
	}
	if len(ids1["blk.2.top_k"]) == 0 || len(ids1["blk.1.ffn_moe_topk"]) == 0 {
		t.Errorf("decisions missing: %v", slices.Collect(maps.Keys(ids1)))
	}
	var shards int
	for _, name := range order2 {
		base, k, ok := strings.Cut(name, ".shard")
		if !ok {
			continue
		}
		shards++
		if k != "0" {
			continue
		}
		sum := slices.Clone(f2[name])
		for i, v := range f2[base+".shard1"] {
			sum[i] += v
		}
		if d := maxAbsDiff(sum, f2[base]); d > 1e-5 {
			t.Errorf("%s: shards add up to %g from the reduced value", base, d)
		}
		if slices.Index(order2, base) < slices.Index(order2, base+".shard1") {
			t.Errorf("%s comes before its shards", base)
		}
	}
	if want := 2 * 2 * 3; shards != want { // attn_out and ffn_out, 2 devices, 3 layers
		t.Errorf("%d shard tensors, want %d", shards, want)
	}
}

// TestPlanErrors: a device count that does not divide what must be split
// fails with an error naming it, at Load too.
func TestPlanErrors(t *testing.T) {
	c := Config{Heads: 8, Experts: 16, FFExp: 256, SharedExp: 1, BlockCount: 3, DenseLayers: 1, FF: 512}
	for _, tc := range []struct {
		n    int
		want string
	}{
		{0, "at least 1 device"},
		{3, "8 attention heads"},
		{16, "8 attention heads"},
	} {
		if _, err := NewPlan(&c, tc.n); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%d devices: error %v, want %q", tc.n, err, tc.want)
		}
	}
	c.Heads = 32
	if _, err := NewPlan(&c, 32); err == nil || !strings.Contains(err.Error(), "16 routed experts") {
		t.Errorf("32 devices: error %v, want the experts named", err)
	}
	if p, err := NewPlan(&c, 8); err != nil || p != (Plan{Devices: 8, Heads: 4, FF: 64, SharedFF: 32, Experts: 2}) {
		t.Errorf("8 devices: %+v, %v", p, err)
	}
	if _, err := Load(modelPath(t, "glm5-mini.Q8_0"), Options{TensorParallel: 3}); err == nil ||
		!strings.Contains(err.Error(), "3 devices do not divide the 8 attention heads") {
		t.Errorf("Load with tp 3: %v", err)
	}
}

// TestDeviceMemory: what the loaded devices hold is what Plan.Memory
// predicts from the header, and a budget too small fails Load with an
// error naming the device.
func TestDeviceMemory(t *testing.T) {
	for _, tc := range []struct {
		name     string
		tp       int
		expanded bool
	}{
		{"glm5-mini.Q8_0", 1, false},
		{"glm5-mini.Q8_0", 8, false},
		{"glm5-mini.Q4_K_M", 2, true}, // 128 of 256 columns: not whole Q4_K blocks
		{"glm5-mini.Q4_K_M", 8, true}, // 32-column shards of Q4_K/Q6_K rows: F32
	} {
		t.Run(fmt.Sprintf("%s/tp%d", tc.name, tc.tp), func(t *testing.T) {
			m := loadTP(t, tc.name, tc.tp)
			c := m.Config()
			mem, err := m.Plan().Memory(&c, FileTensors(m.file), tensor.F32)
			if err != nil {
				t.Fatal(err)
			}
			var sum int64
			for d, dev := range m.Devices() {
				dm := mem.Devices[d]
				if got := dev.Used(); got != dm.Weights() {
					t.Errorf("device %d holds %d bytes, plan says %d (%+v)", d, got, dm.Weights(), dm)
				}
				if (dm.Expanded > 0) != tc.expanded {
					t.Errorf("device %d: %d bytes expanded to F32", d, dm.Expanded)
				}
				sum += dm.Sharded
			}
			if !tc.expanded {
				if total := sum + mem.Devices[0].Replicated + mem.Devices[0].First; total != mem.Total {
					t.Errorf("shards + replicated = %d bytes, file tensors %d", total, mem.Total)
				}
			}
			before := m.Devices()[0].Used()
			s, err := m.NewSession(SessionOptions{ContextSize: 8})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Prefill([]int32{1, 2, 3}); err != nil {
				t.Fatal(err)
			}
			if m.Devices()[0].Used() <= before {
				t.Error("the session's cache and buffers are not counted")
			}
			s.Close()
			if got := m.Devices()[0].Used(); got != before {
				t.Errorf("after Session.Close device 0 holds %d bytes, before the session %d", got, before)
			}
		})
	}
	_, err := Load(modelPath(t, "glm5-mini.Q8_0"), Options{TensorParallel: 2, DeviceMemory: 1 << 20})
	if err == nil || !strings.Contains(err.Error(), "cpu:0") || !strings.Contains(err.Error(), "do not fit") {
		t.Errorf("Load over budget: %v", err)
	}
}
