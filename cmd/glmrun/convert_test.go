package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/gguf"
)

// TestConvertCommand runs "glmrun convert" on a test checkpoint and checks
// the exit status, the report and the file; the conversion itself is
// checked against llama.cpp in package convert.
func TestConvertCommand(t *testing.T) {
	const ckpt = "../../testdata/hf/glm5-fp8s"
	out := filepath.Join(t.TempDir(), "out.gguf")
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout []string // substrings
		stderr []string
	}{
		{"q8_0, flags after the directory", []string{"convert", ckpt, "-o", out, "--outtype", "q8_0"}, 0,
			[]string{out + `: glm-dsa "Glm5 Fp8S" from GlmMoeDsaForCausalLM, 4 blocks, q8_0 weights`, "90 tensors (35 F32, 55 Q8_0)", "MB/s"}, nil},
		{"flags first, auto", []string{"convert", "-o", out, "--no-mtp", ckpt}, 0, []string{"bf16 weights", "55 BF16"}, nil},
		{"no -o", []string{"convert", ckpt}, 2, nil, []string{"-o OUT.gguf is required", "usage: glmrun convert"}},
		{"no directory", []string{"convert", "-o", out}, 2, nil, []string{"want one HF_DIR, have 0"}},
		{"bad outtype", []string{"convert", ckpt, "-o", out, "--outtype", "q4_0"}, 2, nil, []string{`--outtype "q4_0"`}},
		{"not a directory", []string{"convert", ckpt + "/config.json", "-o", out}, 2, nil, []string{"is not a directory"}},
		{"output directory missing", []string{"convert", ckpt, "-o", filepath.Join(out, "x", "y.gguf")}, 2, nil, []string{"does not exist"}},
		{"not a checkpoint", []string{"convert", "../../testdata/hf", "-o", out}, 1, nil, []string{"glmrun convert: convert:", "config.json"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runTok(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %q", code, tc.code, stderr)
			}
			for _, s := range tc.stdout {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout %q lacks %q", stdout, s)
				}
			}
			for _, s := range tc.stderr {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr %q lacks %q", stderr, s)
				}
			}
			if tc.code == 0 {
				// Not a terminal: no progress line.
				if strings.Contains(stderr, "\r") {
					t.Errorf("progress written to a non-terminal: %q", stderr)
				}
				f, err := gguf.Open(out)
				if err != nil {
					t.Fatal(err)
				}
				f.Close()
				os.Remove(out)
			}
		})
	}
}
