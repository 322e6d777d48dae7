package main

import (
	"bytes"
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/internal/testmodels"
)

// TestLogits runs "glmrun logits" on glm5-mini with the P1 prompt, in both
// paths, and checks the JSON against llama.cpp's deq-F32 reference.
func TestLogits(t *testing.T) {
	var ref struct {
		Prompt       []int32 `json:"prompt"`
		PromptLogits []struct {
			Top    [][]float64 `json:"top"`
			Logits []float32   `json:"logits"`
		} `json:"prompt_logits"`
	}
	if err := json.Unmarshal(testmodels.Ref(t, "glm5-mini.Q8_0.deq-F32.P1"), &ref); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(ref.Prompt))
	for i, id := range ref.Prompt {
		ids[i] = jsonInt(id)
	}
	modelFile := filepath.Join("..", "..", "testdata", "models", "glm5-mini.Q8_0.gguf")
	for _, mode := range []string{"prefill", "decode", "text"} {
		t.Run(mode, func(t *testing.T) {
			args := []string{"logits", "-ctk", "f32", "-m", modelFile, "--tokens", strings.Join(ids, ","), "--top", "3"}
			switch mode {
			case "decode":
				args = append(args, "--decode")
			case "text": // the P1 prompt's text (glm5-mini.tokenizer-cases.json)
				args = []string{"logits", "-ctk", "f32", "-m", modelFile, "--text", "1 2 3 4 5 6 7 8 9 10", "--top", "3"}
			}
			var stdout, stderr bytes.Buffer
			if code := run(args, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			var out logitsOutput
			if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(out.Tokens, ref.Prompt) {
				t.Fatalf("tokens %v, want %v", out.Tokens, ref.Prompt)
			}
			if len(out.Tokens) != len(ref.Prompt) || len(out.Logits) != len(ref.Prompt) || len(out.Top) != len(ref.Prompt) {
				t.Fatalf("%d tokens, %d logit rows, %d top rows; want %d", len(out.Tokens), len(out.Logits), len(out.Top), len(ref.Prompt))
			}
			for i, row := range out.Logits {
				want := ref.PromptLogits[i]
				if len(row) != len(want.Logits) {
					t.Fatalf("row %d: %d logits, want %d", i, len(row), len(want.Logits))
				}
				for j := range row {
					if d := math.Abs(float64(row[j] - want.Logits[j])); d > 1e-3 {
						t.Fatalf("row %d logit %d: %g, llama.cpp %g", i, j, row[j], want.Logits[j])
					}
				}
				for k, e := range out.Top[i] {
					wt := want.Top[k]
					if e.ID != int(wt[0]) || math.Abs(e.Logprob-wt[2]) > 1e-3 {
						t.Errorf("row %d top %d: %+v, llama.cpp id %v logprob %v", i, k, e, wt[0], wt[2])
					}
				}
			}
		})
	}
}

func jsonInt(v int32) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestLogitsErrors: bad flags are usage errors (exit 2), bad tokens and
// files fail with a message (exit 1).
func TestLogitsErrors(t *testing.T) {
	modelFile := filepath.Join("..", "..", "testdata", "models", "glm5-mini.Q8_0.gguf")
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no model", []string{"logits", "--tokens", "1"}, 2, "-m MODEL.gguf is required"},
		{"no tokens", []string{"logits", "-m", modelFile}, 2, "no token ids"},
		{"bad token", []string{"logits", "-m", modelFile, "--tokens", "1,x"}, 2, `bad token id "x"`},
		{"negative top", []string{"logits", "-m", modelFile, "--tokens", "1", "--top", "-1"}, 2, "--top -1"},
		{"outside vocab", []string{"logits", "-m", modelFile, "--tokens", "1,5000"}, 1, "outside the vocabulary"},
		{"tokens and text", []string{"logits", "-m", modelFile, "--tokens", "1", "--text", "a"}, 2, "not both"},
		{"missing file", []string{"logits", "-m", "nonexistent.gguf", "--tokens", "1"}, 1, "nonexistent.gguf"},
		{"no cuda driver", []string{"logits", "-m", modelFile, "--tokens", "1", "--backend", "cuda"}, 1, "no CUDA driver"},
		{"dump without cuda driver", []string{"dump", "-m", modelFile, "--tokens", "1", "-o", "DIR", "--backend", "cuda"}, 1, "no CUDA driver"},
		{"unknown backend", []string{"logits", "-m", modelFile, "--tokens", "1", "--backend", "tpu"}, 2, `--backend "tpu"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// No driver, even on a GPU machine.
			t.Setenv("GLMRUN_LIBCUDA", filepath.Join(t.TempDir(), "no-libcuda.so.1"))
			for i, a := range tc.args {
				if a == "DIR" {
					tc.args[i] = t.TempDir()
				}
			}
			var stdout, stderr bytes.Buffer
			code := run(tc.args, &stdout, &stderr)
			if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr.String(), tc.code, tc.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout not empty: %q", stdout.String())
			}
		})
	}
}
