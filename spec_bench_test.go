package glmrun_test

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/glmrun/glmrun"
)

// tinyModel is the small GLM-5 trained by tools/train, with its MTP block.
const tinyModel = "testdata/models/glm5-tiny.Q8_0.gguf"

// tinyEval is testdata/tinyglm/eval.json.gz (tools/train/evalset.py):
// problems drawn from the items the training data never contained.
type tinyEval struct {
	Arith []struct {
		Question string `json:"question"`
	} `json:"arith"`
	Tools []struct {
		Tools    []json.RawMessage `json:"tools"`
		Question string            `json:"question"`
	} `json:"tools"`
	Recall []struct {
		Question string `json:"question"`
	} `json:"recall"`
}

func loadTinyEval() (*tinyEval, error) {
	f, err := os.Open("testdata/tinyglm/eval.json.gz")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	var e tinyEval
	return &e, json.NewDecoder(z).Decode(&e)
}

// BenchmarkSpecMTP measures speculative decoding with the trained model's
// MTP block on the held-out tasks: chat arithmetic with thinking, tool
// calls and long-context recall, greedy and at temperature 0.7, without
// speculation (K0) and drafting K tokens per step. It reports decode
// tokens/s (after the first token), the share of drafts kept and the
// drafts kept per verification pass.
//
//	go test -run '^$' -bench SpecMTP -benchtime 1x .
func BenchmarkSpecMTP(b *testing.B) {
	e, err := loadTinyEval()
	if err != nil {
		b.Fatal(err)
	}
	type task struct {
		name  string
		convs [][]glmrun.Message
		tools [][]json.RawMessage
	}
	var tasks []task
	ar := task{name: "arith"}
	for _, p := range e.Arith[:20] {
		ar.convs = append(ar.convs, []glmrun.Message{{Role: "user", Content: p.Question}})
		ar.tools = append(ar.tools, nil)
	}
	tl := task{name: "tools"}
	for _, p := range e.Tools[:20] {
		tl.convs = append(tl.convs, []glmrun.Message{{Role: "user", Content: p.Question}})
		tl.tools = append(tl.tools, p.Tools)
	}
	rc := task{name: "recall"}
	for _, p := range e.Recall[:5] {
		rc.convs = append(rc.convs, []glmrun.Message{{Role: "user", Content: p.Question}})
		rc.tools = append(rc.tools, nil)
	}
	tasks = append(tasks, ar, tl, rc)
	models := map[int]*glmrun.Model{}
	defer func() {
		for _, m := range models {
			m.Close()
		}
	}()
	for _, tk := range tasks {
		for _, temp := range []float32{0, 0.7} {
			for _, k := range []int{0, 1, 2, 3, 4} {
				b.Run(fmt.Sprintf("%s/temp%.1f/K%d", tk.name, temp, k), func(b *testing.B) {
					m := models[k]
					if m == nil {
						if m, err = glmrun.Load(tinyModel, glmrun.Options{ContextSize: 2048, SpecDraft: k}); err != nil {
							b.Fatal(err)
						}
						models[k] = m
					}
					s, err := m.NewSession(glmrun.SessionOptions{})
					if err != nil {
						b.Fatal(err)
					}
					defer s.Close()
					var gen, drafted, kept, rounds int
					var secs float64
					for i := 0; i < b.N; i++ {
						for j, msgs := range tk.convs {
							opts := glmrun.ChatOptions{Tools: tk.tools[j]}
							opts.MaxTokens = 160
							opts.Temperature = temp
							opts.Seed = uint64(j)
							for _, err := range s.Chat(context.Background(), msgs, opts) {
								if err != nil {
									b.Fatal(err)
								}
							}
							st := s.Stats()
							gen += st.Generated - 1
							secs += st.EvalTime.Seconds()
							drafted, kept, rounds = drafted+st.Drafted, kept+st.Accepted, rounds+st.SpecRounds
						}
					}
					b.ReportMetric(float64(gen)/secs, "tok/s")
					if drafted > 0 {
						b.ReportMetric(100*float64(kept)/float64(drafted), "%kept")
						b.ReportMetric(float64(kept)/float64(rounds), "kept/pass")
					}
				})
			}
		}
	}
}
