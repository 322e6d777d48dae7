package model

import (
	"strings"
	"testing"

	"github.com/glmrun/glmrun/tensor"
)

// llamaCppDistance returns a max-abs-logit distance llama.cpp measured
// between two of its own runs (testdata/refs/tolerances.json.gz, section
// "runtime"), such as "glm5-mini.F32.P2.kv_f16": F16 KV cache against F32.
func llamaCppDistance(t *testing.T, key string) float64 {
	t.Helper()
	var tol struct {
		Runtime map[string]struct {
			MaxAbsLogit float64 `json:"max_abs_logit"`
		} `json:"runtime"`
	}
	if !readRefJSON(t, "tolerances", &tol) {
		t.Fatal("no testdata/refs/tolerances.json.gz")
	}
	r, ok := tol.Runtime[key]
	if !ok {
		t.Fatalf("tolerances.json has no runtime entry %q", key)
	}
	return r.MaxAbsLogit
}

// TestCacheTypeLogits: with an F16 KV cache the logits of the prompt P2
// (float32 activations) move from the F32 cache's by no more than
// llama.cpp's own F16-vs-F32 cache distance on the same model's F32
// weights; BF16 (8 bits of mantissa, not 11) moves them more. Q8_0 needs
// rows of whole 32-value blocks, which these models' 272-wide latents are
// not: a session with it is an error naming the widths.
func TestCacheTypeLogits(t *testing.T) {
	for _, name := range []string{"glm5-mini.Q8_0", "ds2-mini.Q8_0"} {
		t.Run(name, func(t *testing.T) {
			m := loadTest(t, name)
			ref, ok := readRef(t, name+".deq-F32.P2")
			if !ok {
				t.Fatalf("no ref %s.deq-F32.P2", name)
			}
			run := func(ct tensor.Type) [][]float32 {
				s, err := m.NewSession(SessionOptions{CacheType: ct})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				rows, err := s.Prefill(ref.Prompt)
				if err != nil {
					t.Fatal(err)
				}
				return rows
			}
			dist := func(a, b [][]float32) float64 {
				var worst float64
				for i := range a {
					worst = max(worst, maxAbsDiff(a[i], b[i]))
				}
				return worst
			}
			f32, f16, bf16 := run(tensor.F32), run(tensor.F16), run(tensor.BF16)
			limit := llamaCppDistance(t, name[:strings.LastIndexByte(name, '.')]+".F32.P2.kv_f16")
			d16, dbf := dist(f16, f32), dist(bf16, f32)
			if d16 == 0 || d16 > limit {
				t.Errorf("F16 cache: logits %.3g from the F32 cache's; llama.cpp's own F16 cache distance %.3g", d16, limit)
			}
			if dbf <= d16 {
				t.Errorf("BF16 cache: logits %.3g from the F32 cache's, no more than F16's %.3g", dbf, d16)
			}
			t.Logf("F16 %.3g (llama.cpp %.3g), BF16 %.3g", d16, limit, dbf)
			if _, err := m.NewSession(SessionOptions{CacheType: tensor.Q8_0}); err == nil {
				t.Error("a Q8_0 cache of 272-wide rows: no error")
			}
		})
	}
}
