package convert

import (
	"path/filepath"
	"testing"

	_ "github.com/glmrun/glmrun/backend/cpu" // registers the "cpu" backend
	"github.com/glmrun/glmrun/internal/testmodels"
	"github.com/glmrun/glmrun/model"
)

// TestConvertedLogits runs each converted checkpoint with the library's
// exact (float32-activation) path and compares its logits with
// transformers' at every prompt position: prefill against the batch run,
// decoding one token at a time against the one-at-a-time run. The bound is
// 1e-3, as for every reference here. bf16 weights convert exactly, and FP8
// is compared through f32 (value × scale in float32, what transformers
// computes), so what is left is float32 rounding in two different
// implementations.
func TestConvertedLogits(t *testing.T) {
	const tol = 1e-3
	tests := []struct{ checkpoint, outType string }{
		{"glm5-hfs", OutBF16},
		{"flash-hfs", OutBF16},
		{"glm5-fp8s", OutF32},
		{"glm52-hfs", OutBF16}, // GLM-5.2: a shared-indexer layer
	}
	for _, tc := range tests {
		t.Run(tc.checkpoint+"."+tc.outType, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), tc.checkpoint+".gguf")
			if _, err := Convert(filepath.Join(hfDir, tc.checkpoint), out, Options{OutType: tc.outType}); err != nil {
				t.Fatal(err)
			}
			m, err := model.Load(out, model.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			batch := testmodels.ReadHFLogits(t, tc.checkpoint+".P.batch")
			seq := testmodels.ReadHFLogits(t, tc.checkpoint+".P.seq")

			s, err := m.NewSession(model.SessionOptions{})
			if err != nil {
				t.Fatal(err)
			}
			rows, err := s.Prefill(batch.Tokens)
			if err != nil {
				t.Fatal(err)
			}
			var prefill float64
			for i, row := range rows {
				prefill = max(prefill, testmodels.MaxAbsDiff(row, batch.PromptLogits[i].Logits))
			}

			d, err := m.NewSession(model.SessionOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var decode float64
			for i, tok := range seq.Tokens {
				row, err := d.Decode(tok)
				if err != nil {
					t.Fatal(err)
				}
				decode = max(decode, testmodels.MaxAbsDiff(row, seq.PromptLogits[i].Logits))
			}
			t.Logf("max abs logit error vs transformers: prefill %.3g, decode %.3g", prefill, decode)
			if prefill > tol {
				t.Errorf("prefill: max abs logit error %.3g > %g", prefill, tol)
			}
			if decode > tol {
				t.Errorf("decode: max abs logit error %.3g > %g", decode, tol)
			}
		})
	}
}
