package cuda

import (
	"encoding/json"
	"math"
	"testing"

	_ "github.com/glmrun/glmrun/backend/cpu" // the reference backend
	"github.com/glmrun/glmrun/internal/testmodels"
	"github.com/glmrun/glmrun/model"
)

// goldenRef is the part of a llama.cpp reference run this test reads
// (testdata/README.shared.md section 4.3).
type goldenRef struct {
	Prompt       []int32 `json:"prompt"`
	PromptLogits []struct {
		Logits []float32 `json:"logits"`
	} `json:"prompt_logits"`
	Greedy []struct {
		ID   int32 `json:"id"`
		Next struct {
			Top [][]float64 `json:"top"`
		} `json:"next"`
	} `json:"greedy"`
}

// TestGoldenForward runs whole golden models through the CUDA backend on
// the fake driver, every kernel executed by the CPU simulation of the .cu
// sources: the prompt's logits must match llama.cpp's f32-activation
// references within 1e-3 (testdata README) and the CPU backend within
// 1e-4; then a few greedy decode steps through the absorbed path.
func TestGoldenForward(t *testing.T) {
	const tolRef, tolCPU = 1e-3, 1e-4
	models := []string{"glm5-mini.Q8_0", "ds2-mini.Q8_0", "glm5-mini-sparse.Q8_0"}
	steps := 2
	if testing.Short() {
		models, steps = models[:1], 1
	}
	useFake(t)
	for _, name := range models {
		t.Run(name, func(t *testing.T) {
			var ref goldenRef
			if err := json.Unmarshal(testmodels.Ref(t, name+".deq-F32.P1"), &ref); err != nil {
				t.Fatal(err)
			}
			path := testmodels.Path(t, name)
			run := func(backendName string) (prompt [][]float32, next [][]float32) {
				m, err := model.Load(path, model.Options{Backend: backendName, Threads: 1})
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				s, err := m.NewSession(model.SessionOptions{ContextSize: 64})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				rows, err := s.Prefill(ref.Prompt)
				if err != nil {
					t.Fatal(err)
				}
				for k := 0; k < steps && k < len(ref.Greedy); k++ {
					row, err := s.Decode(ref.Greedy[k].ID)
					if err != nil {
						t.Fatal(err)
					}
					next = append(next, row)
				}
				return rows, next
			}
			gp, gn := run("cuda")
			cp, cn := run("cpu")
			var vsRef, vsCPU, greedy float64
			for i, row := range gp {
				vsRef = max(vsRef, maxAbs(row, ref.PromptLogits[i].Logits))
				vsCPU = max(vsCPU, maxAbs(row, cp[i]))
			}
			for k, row := range gn {
				vsCPU = max(vsCPU, maxAbs(row, cn[k]))
				for _, top := range ref.Greedy[k].Next.Top {
					greedy = max(greedy, math.Abs(float64(row[int(top[0])])-top[1]))
				}
			}
			if vsRef > tolRef || greedy > tolRef {
				t.Errorf("CUDA (simulated) vs llama.cpp: prompt logits %.3g, greedy top-5 %.3g > %g", vsRef, greedy, tolRef)
			}
			if vsCPU > tolCPU {
				t.Errorf("CUDA (simulated) vs CPU backend: %.3g > %g", vsCPU, tolCPU)
			}
			t.Logf("%d prompt tokens + %d decode steps: max abs logit diff vs llama.cpp %.3g (greedy top-5 %.3g), vs CPU backend %.3g",
				len(ref.Prompt), len(gn), vsRef, greedy, vsCPU)
		})
	}
	if testing.Verbose() {
		t.Logf("simulated kernels (name, launches, seconds):\n%s", fakeStats(t))
	}
}

func maxAbs(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var d float64
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}
