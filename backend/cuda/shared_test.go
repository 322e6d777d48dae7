package cuda

import (
	"path/filepath"
	"testing"

	"github.com/glmrun/glmrun/internal/testmodels"
	"github.com/glmrun/glmrun/model"
)

// TestSharedIndexerForward runs GLM-5.2's shared-indexer layers through
// the CUDA backend (the fake driver's simulation of the .cu sources, or a
// GPU): the 40-token prompt of testdata/hf/glm52-hfs, sparse from position
// 8 on, must give transformers' logits within 1e-3 in prefill and decode.
func TestSharedIndexerForward(t *testing.T) {
	const tol = 1e-3
	useFake(t)
	dir := filepath.Join("..", "..", "testdata", "hf")
	ref := testmodels.ReadHFLogits(t, "glm52-hfs.P.batch")
	m, err := model.Load(filepath.Join(dir, "glm52-hfs.bf16.gguf"), model.Options{Backend: "cuda", Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, decode := range []bool{false, true} {
		s, err := m.NewSession(model.SessionOptions{ContextSize: 64})
		if err != nil {
			t.Fatal(err)
		}
		var rows [][]float32
		if decode {
			for _, tok := range ref.Tokens {
				row, err := s.Decode(tok)
				if err != nil {
					t.Fatal(err)
				}
				rows = append(rows, row)
			}
		} else if rows, err = s.Prefill(ref.Tokens); err != nil {
			t.Fatal(err)
		}
		s.Close()
		var worst float64
		for i, row := range rows {
			worst = max(worst, testmodels.MaxAbsDiff(row, ref.PromptLogits[i].Logits))
		}
		t.Logf("decode %v: max |cuda − transformers| %.2g", decode, worst)
		if worst > tol {
			t.Errorf("decode %v: max abs logit diff %.3g from transformers > %g", decode, worst, tol)
		}
	}
}
