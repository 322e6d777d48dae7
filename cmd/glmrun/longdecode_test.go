package main

import (
	"encoding/json"
	"math"
	"path/filepath"
	"testing"

	"github.com/glmrun/glmrun/internal/testmodels"
	"github.com/glmrun/glmrun/model"
)

// decodeRef is what tools/decode-ref.py writes: llama-server's prefill of
// Prompt, then Steps greedy decode steps, each with the chosen id and the
// top ids' log-probabilities (none for a token that ends inside a UTF-8
// character: the server sends none for it).
type decodeRef struct {
	Version string  `json:"version"`
	Command string  `json:"command"`
	Prompt  []int32 `json:"prompt"`
	Steps   []struct {
		ID  int32        `json:"id"`
		Top [][2]float64 `json:"top"` // [id, log-probability]
	} `json:"steps"`
}

// Bounds of TestLongDecodeMatchesLlamaCpp, those of the fast path against
// llama.cpp on the golden models (model's TestFastDense, its P2 prompt):
// the int8 roundings of activations that lie within float noise of a tie
// take another side in another engine's summation order, and one such
// flip moves a logit by 0.01-0.1.
const (
	longDecodeMaxDiff  = 0.2
	longDecodeMeanDiff = 0.03
)

// TestLongDecodeMatchesLlamaCpp: at GLM-5's attention and indexer widths
// (glmDSAWidths: top_k 2048), a 6144-token prompt prefilled and then 64
// tokens decoded one at a time, every query past the 2048th seeing the
// 2048 keys its indexer picks; at each step glmrun's log-probabilities of
// the 20 tokens llama-server ranked first equal llama-server's
// (testdata/refs/glm-dsa-widths.decode-ref.json.gz, made by
// tools/decode-ref.py) within the fast path's bounds. glmrun decodes
// llama-server's tokens, so that a near tie of the first two tokens cannot
// make the two continuations part (a step whose token ends inside a UTF-8
// character has no log-probabilities in the reference and is decoded
// only). Attending to every key instead (the same file with top_k 8192)
// moves these log-probabilities by up to 3.0, 0.44 on average: an
// indexer that picked other keys than llama.cpp's would not pass.
func TestLongDecodeMatchesLlamaCpp(t *testing.T) {
	if testing.Short() {
		t.Skip("a 6144-token prefill at GLM-5's attention widths")
	}
	ref := readDecodeRef(t, "glm-dsa-widths.decode-ref")
	path := filepath.Join(t.TempDir(), "glm-dsa-widths.gguf")
	if code, _, errs := runCLI(t, append([]string{"synth", "-o", path}, glmDSAWidths...)...); code != 0 {
		t.Fatalf("synth: exit %d: %s", code, errs)
	}
	maxD, meanD := longDecodeDiffs(t, path, ref)
	if maxD > longDecodeMaxDiff || meanD > longDecodeMeanDiff {
		t.Errorf("log-probabilities against llama-server's: max |diff| %.4f, mean %.4f; want at most %g and %g",
			maxD, meanD, longDecodeMaxDiff, longDecodeMeanDiff)
	}
	t.Logf("%d prompt tokens, %d decode steps: max |diff| of the top-%d log-probabilities %.4f, mean %.4f (%s)",
		len(ref.Prompt), len(ref.Steps), len(ref.Steps[0].Top), maxD, meanD, ref.Version)
}

// longDecodeDiffs prefills ref's prompt on the model at path (fast path,
// f16 cache as llama-server's default), then decodes ref's tokens, and
// returns the largest and the mean |glmrun − llama.cpp| over every step's
// top log-probabilities (the first step's are the prompt's last
// position's).
func longDecodeDiffs(t *testing.T, path string, ref *decodeRef) (maxD, meanD float64) {
	t.Helper()
	m, err := model.Load(path, model.Options{Fast: true, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s, err := m.NewSession(model.SessionOptions{ContextSize: len(ref.Prompt) + len(ref.Steps), CacheType: model.DefaultCacheType})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	logits := make([]float32, m.Config().VocabSize)
	if _, err := s.PrefillLast(logits, ref.Prompt); err != nil {
		t.Fatal(err)
	}
	var sum float64
	n, compared := 0, 0
	for k, step := range ref.Steps {
		if len(step.Top) > 0 {
			compared++
		}
		lse := logSumExp(logits)
		for _, top := range step.Top {
			d := math.Abs(float64(logits[int(top[0])]) - lse - top[1])
			maxD = max(maxD, d)
			sum += d
			n++
		}
		if k+1 < len(ref.Steps) {
			if err := s.DecodeInto(logits, step.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	if compared < len(ref.Steps)*3/4 {
		t.Fatalf("%d of %d steps have log-probabilities to compare: want most", compared, len(ref.Steps))
	}
	return maxD, sum / float64(n)
}

func readDecodeRef(t *testing.T, name string) *decodeRef {
	t.Helper()
	var ref decodeRef
	if err := json.Unmarshal(testmodels.Ref(t, name), &ref); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(ref.Prompt) == 0 || len(ref.Steps) == 0 || len(ref.Steps[0].Top) == 0 {
		t.Fatalf("%s: %d prompt tokens, %d steps: nothing to compare", name, len(ref.Prompt), len(ref.Steps))
	}
	return &ref
}
