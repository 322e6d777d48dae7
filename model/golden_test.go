package model

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/glmrun/glmrun/internal/testmodels"
)

// refRun is a llama.cpp reference run (testdata/README.shared.md §4.3).
type refRun struct {
	Model        string  `json:"model"`
	Mode         string  `json:"mode"`
	Prompt       []int32 `json:"prompt"`
	PromptLogits []struct {
		Top    [][]float64 `json:"top"`
		Logits []float32   `json:"logits"`
	} `json:"prompt_logits"`
	Greedy []struct {
		ID    int32   `json:"id"`
		Logit float64 `json:"logit"`
		Next  struct {
			Top [][]float64 `json:"top"`
		} `json:"next"`
	} `json:"greedy"`
}

// readRef decodes testdata/refs/<name>.json.gz; ok is false if absent.
func readRef(t *testing.T, name string) (r *refRun, ok bool) {
	t.Helper()
	r = new(refRun)
	return r, readRefJSON(t, name, r)
}

// readRefJSON decodes testdata/refs/<name>.json.gz into v; it returns
// false if the file is absent.
func readRefJSON(t *testing.T, name string, v any) bool {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "testdata", "refs", name+".json.gz"))
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.NewDecoder(zr).Decode(v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return true
}

// goldenModels are the models with f32-activation refs.
var goldenModels = []string{
	"glm5-mini.Q8_0", "glm5-mini.Q4_K_M", "glm5-mini.Q6_K",
	"glm5-mini-sparse.Q8_0", "glm5-mini-nextn.Q8_0",
	"ds2-mini.Q8_0", "ds2-mini.Q4_K_M",
	"glm5-dense.Q8_0", "glm5-dense.Q4_K_M",
}

// loadTest loads a golden model (shipped or derived) for the test's life.
func loadTest(t *testing.T, name string) *Model {
	t.Helper()
	m, err := Load(modelPath(t, name), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// maxAbsDiff is testmodels.MaxAbsDiff, for the package's many tests.
var maxAbsDiff = testmodels.MaxAbsDiff

func argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

// TestGoldenLogits checks the prefill and decode paths against llama.cpp's
// deq-F32 references: logits within 1e-3 at every position, the greedy
// continuation ids, decode vs prefill within 1e-4, and the one-token-at-a-
// time (.seq) references within 1e-3.
func TestGoldenLogits(t *testing.T) {
	const tolRef, tolPaths = 1e-3, 1e-4
	for _, name := range goldenModels {
		t.Run(name, func(t *testing.T) {
			m := loadTest(t, name)
			for _, p := range []string{"P1", "P2"} {
				ref, ok := readRef(t, name+".deq-F32."+p)
				if !ok {
					t.Fatalf("no ref %s.deq-F32.%s", name, p)
				}
				// Prefill path, then greedy decode steps.
				s, err := m.NewSession(SessionOptions{})
				if err != nil {
					t.Fatal(err)
				}
				rows, err := s.Prefill(ref.Prompt)
				if err != nil {
					t.Fatal(err)
				}
				var worst float64
				for i, row := range rows {
					d := maxAbsDiff(row, ref.PromptLogits[i].Logits)
					worst = max(worst, d)
					if d > tolRef {
						t.Errorf("%s prefill pos %d: max abs logit diff %.3g > %g", p, i, d, tolRef)
					}
				}
				last := rows[len(rows)-1]
				var greedyWorst float64
				for k, g := range ref.Greedy {
					if id := argmax(last); id != g.ID {
						t.Fatalf("%s greedy step %d: id %d, llama.cpp %d", p, k, id, g.ID)
					}
					if last, err = s.Decode(g.ID); err != nil {
						t.Fatal(err)
					}
					for _, top := range g.Next.Top {
						greedyWorst = max(greedyWorst, math.Abs(float64(last[int(top[0])])-top[1]))
					}
				}
				if greedyWorst > tolRef {
					t.Errorf("%s greedy steps: top-5 logits off by %.3g", p, greedyWorst)
				}

				// Decode path, one token at a time.
				d, err := m.NewSession(SessionOptions{})
				if err != nil {
					t.Fatal(err)
				}
				seq, hasSeq := readRef(t, name+".deq-F32."+p+".seq")
				var vsPrefill, vsSeq, vsRef float64
				for i, tok := range ref.Prompt {
					row, err := d.Decode(tok)
					if err != nil {
						t.Fatal(err)
					}
					vsPrefill = max(vsPrefill, maxAbsDiff(row, rows[i]))
					// llama.cpp's batch and seq runs are bit-identical on F32 weights.
					vsRef = max(vsRef, maxAbsDiff(row, ref.PromptLogits[i].Logits))
					if hasSeq {
						vsSeq = max(vsSeq, maxAbsDiff(row, seq.PromptLogits[i].Logits))
					}
				}
				if vsPrefill > tolPaths {
					t.Errorf("%s decode vs prefill: max abs %.3g > %g", p, vsPrefill, tolPaths)
				}
				if vsRef > tolRef {
					t.Errorf("%s decode vs llama.cpp ref: max abs %.3g > %g", p, vsRef, tolRef)
				}
				if vsSeq > tolRef {
					t.Errorf("%s decode vs llama.cpp seq ref: max abs %.3g > %g", p, vsSeq, tolRef)
				}
				t.Logf("%s: prefill vs ref %.2g, greedy top-5 %.2g, decode vs prefill %.2g, decode vs ref %.2g, decode vs seq ref %.2g (seq ref: %v)",
					p, worst, greedyWorst, vsPrefill, vsRef, vsSeq, hasSeq)
			}
		})
	}
}
