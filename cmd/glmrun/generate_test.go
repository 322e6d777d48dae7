package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/internal/testmodels"
	"github.com/glmrun/glmrun/tensor"
)

// genRef is the part of a llama.cpp P1 ref the generation tests use.
type genRef struct {
	Prompt       []int32  `json:"prompt"`
	PromptPieces []string `json:"prompt_pieces"`
	Greedy       []struct {
		ID int32 `json:"id"`
	} `json:"greedy"`
}

func readGenRef(t *testing.T, model string) (text string, prompt, greedy []int32) {
	t.Helper()
	var ref genRef
	if err := json.Unmarshal(testmodels.Ref(t, model+".deq-F32.P1"), &ref); err != nil {
		t.Fatal(err)
	}
	for _, g := range ref.Greedy {
		greedy = append(greedy, g.ID)
	}
	return strings.Join(ref.PromptPieces, ""), ref.Prompt, greedy
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestGenerateGolden reproduces llama.cpp's greedy continuations through
// the CLI, as plain text and as --logprobs lines.
func TestGenerateGolden(t *testing.T) {
	for _, name := range []string{"glm5-mini.Q8_0", "ds2-mini.Q8_0", "glm5-dense.Q8_0"} {
		t.Run(name, func(t *testing.T) {
			text, prompt, greedy := readGenRef(t, name)
			path := "../../testdata/models/" + name + ".gguf"
			args := []string{"-m", path, "-p", text, "--temp", "0", "-n", "8", "-c", "64", "--ignore-eos", "--exact", "-ctk", "f32"}
			code, out, errs := runCLI(t, append(args, "--logprobs", "2")...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			var ids []int32
			for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
				var l logprobLine
				if err := json.Unmarshal([]byte(line), &l); err != nil {
					t.Fatalf("line %q: %v", line, err)
				}
				if len(l.Top) != 2 || l.Top[0].ID != l.ID || l.Top[0].Logprob != l.Logprob || l.Logprob > 0 {
					t.Errorf("greedy token %d: logprob %g, top %+v", l.ID, l.Logprob, l.Top)
				}
				ids = append(ids, l.ID)
			}
			if !slices.Equal(ids, greedy) {
				t.Errorf("ids %v, llama.cpp %v", ids, greedy)
			}

			// Plain text: the prompt, then the text of the same ids.
			_, tok := openTestModel(t, path)
			if got := tok.Encode(text, true, true); !slices.Equal(got, prompt) {
				t.Fatalf("prompt tokens %v, llama.cpp %v", got, prompt)
			}
			gen, err := tok.Decode(greedy, false)
			if err != nil {
				t.Fatal(err)
			}
			code, out, errs = runCLI(t, append([]string{"generate", "--tp", "2"}, args...)...)
			if code != 0 || out != text+gen+"\n" {
				t.Errorf("exit %d, stdout %q; want %q", code, out, text+gen+"\n")
			}
			for _, w := range []string{"KV cache = ", " per token, f32)", "load time", "prompt eval time", "/    20 tokens", "eval time", "/     7 runs", "token limit"} {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errs)
				}
			}
		})
	}
}

func TestGenerate(t *testing.T) {
	const p = "1 2 3 4 5"
	// All but the "bundled model" case run glm5-mini (its EOS 956, its 9
	// prompt tokens, its random weights that make seeds differ); that one
	// runs without -m and checks only what holds for any model.
	_, seed42, _ := runCLI(t, "-m", tokModel, "-p", p, "--seed", "42", "-n", "12", "--ignore-eos", "--no-display-prompt")
	for _, c := range []struct {
		name     string
		args     []string
		stdout   func(string) bool
		inStderr []string
	}{
		{"bundled model", []string{"-p", p, "-n", "4"},
			func(s string) bool { return strings.HasPrefix(s, p) && strings.HasSuffix(s, "\n") },
			[]string{"seed = ", "prompt eval time", "stopped: "}},
		{"same seed", []string{"-p", p, "--seed", "42", "-n", "12", "--ignore-eos", "--no-display-prompt"},
			func(s string) bool { return s == seed42 && s != "\n" }, nil},
		{"same seed, -s and --no-display-prompt first", []string{"--no-display-prompt", "-s", "42", "-p", p, "-n", "12", "--ignore-eos"},
			func(s string) bool { return s == seed42 }, nil},
		{"eos", []string{"-p", p, "--logit-bias", "956+1000"},
			func(s string) bool { return s == p+"\n" }, []string{"end-of-generation"}},
		{"zero tokens", []string{"-p", p, "-n", "0"},
			func(s string) bool { return s == p+"\n" }, []string{"prompt eval time"}},
		{"context full", []string{"-p", p, "-c", "12", "-n", "-1", "--ignore-eos", "--temp", "0"},
			func(s string) bool { return strings.HasPrefix(s, p) }, []string{"context full", "after 3 tokens"}},
		{"sampling flags", []string{"-p", p, "-n", "3", "--temp", "0.7", "--top-k", "5", "--top-p", "0.9", "--min-p", "0.1",
			"--repeat-penalty", "1.1", "--repeat-last-n", "8", "--presence-penalty", "0.5", "--frequency-penalty", "0.5",
			"-t", "1", "--tp", "1", "--backend", "cpu", "--seed", "1"},
			func(s string) bool { return strings.HasPrefix(s, p) }, []string{"token limit"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := c.args
			if c.name != "bundled model" {
				args = append([]string{"-m", tokModel}, args...)
			}
			code, out, errs := runCLI(t, args...)
			if code != 0 || !c.stdout(out) {
				t.Errorf("exit %d, stdout %q, stderr:\n%s", code, out, errs)
			}
			for _, w := range c.inStderr {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errs)
				}
			}
		})
	}
	differ := false
	for _, seed := range []string{"1", "2", "3"} {
		if _, out, _ := runCLI(t, "-m", tokModel, "-p", p, "--seed", seed, "-n", "12", "--ignore-eos", "--no-display-prompt"); out != seed42 {
			differ = true
		}
	}
	if !differ {
		t.Errorf("seeds 1-3 all printed seed 42's %q", seed42)
	}
}

// TestGenerateStop stops on a string spanning two tokens of the greedy
// text.
func TestGenerateStop(t *testing.T) {
	text, _, _ := readGenRef(t, "glm5-mini.Q8_0")
	args := []string{"-m", tokModel, "-p", text, "--temp", "0", "-n", "8", "--no-display-prompt"}
	_, full, _ := runCLI(t, args...)
	// The greedy text is "\xb5” ro.S up..." ; " ro" + ".S" meet at "o.".
	i := strings.Index(full, "o.")
	if i < 0 {
		t.Fatalf("greedy text %q has no \"o.\"", full)
	}
	code, out, errs := runCLI(t, append(args, "--stop", "o.")...)
	if code != 0 || out != full[:i]+"\n" || !strings.Contains(errs, "stopped: stop string after 4 tokens") {
		t.Errorf("exit %d, stdout %q, want %q; stderr:\n%s", code, out, full[:i]+"\n", errs)
	}
}

func TestGenerateErrors(t *testing.T) {
	dir := t.TempDir()
	f, err := gguf.Open(tokModel)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriterFrom(f)
	for _, kv := range f.KVs {
		if strings.HasPrefix(kv.Key, "tokenizer.") {
			w.RemoveKV(kv.Key)
		}
	}
	noTok := filepath.Join(dir, "notok.gguf")
	if err := w.WriteFile(noTok); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "nope.gguf")
	for _, c := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"unknown flag", []string{"-p", "x", "--bogus"}, 2, []string{"bogus"}},
		{"unknown flag in generate", []string{"generate", "--bogus"}, 2, []string{"bogus"}},
		{"no prompt", []string{"-m", tokModel}, 2, []string{"no prompt"}},
		{"stray argument", []string{"-p", "x", "more"}, 2, []string{`"more"`}},
		{"bad logit bias", []string{"-p", "x", "--logit-bias", "12"}, 2, []string{"--logit-bias"}},
		{"bad -n", []string{"-p", "x", "-n", "-5"}, 2, []string{"-n -5"}},
		{"bad -c", []string{"-p", "x", "-c", "-1"}, 2, []string{"-c (--ctx-size) -1"}},
		{"bad --ctx-size", []string{"-p", "x", "--ctx-size", "-4096"}, 2, []string{"-c (--ctx-size) -4096"}},
		{"missing model", []string{"-m", missing, "-p", "x"}, 1, []string{"nope.gguf"}},
		{"prompt longer than the context", []string{"-m", tokModel, "-p", "1 2 3 4 5 6 7 8 9", "-c", "8"}, 1, []string{"17 tokens", "context size 8"}},
		{"no tokenizer", []string{"-m", noTok, "-p", "x"}, 1, []string{"notok.gguf", "no tokenizer"}},
		{"tensor parallel", []string{"-p", "x", "--tp", "3"}, 1, []string{"3 devices"}},
		{"cuda", []string{"-p", "x", "--backend", "cuda"}, 1, []string{"cuda", "no CUDA driver"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "cuda" { // no driver, even on a GPU machine
				t.Setenv("GLMRUN_LIBCUDA", filepath.Join(dir, "no-libcuda.so.1"))
			}
			code, out, errs := runCLI(t, c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, c.code, errs)
			}
			for _, w := range c.want {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errs)
				}
			}
			if strings.Contains(errs, "panic") || out != "" {
				t.Errorf("stdout %q, stderr:\n%s", out, errs)
			}
		})
	}
}

// TestGenerateHelp checks that -h documents every flag.
func TestGenerateHelp(t *testing.T) {
	flags := []string{"-m", "-p", "-f", "-n", "-t", "-c", "-temp", "-top-k", "-top-p", "-min-p", "-repeat-penalty",
		"-repeat-last-n", "-presence-penalty", "-frequency-penalty", "-seed", "-logprobs", "-tp", "-no-display-prompt",
		"-stop", "-logit-bias", "-ignore-eos", "-backend"}
	for _, args := range [][]string{{"-h"}, {"generate", "-h"}, {"help"}} {
		code, _, errs := runCLI(t, args...)
		if code != 0 {
			t.Errorf("%v: exit %d", args, code)
		}
		for _, f := range flags {
			if !strings.Contains(errs, "  "+f+" ") && !strings.Contains(errs, "  "+f+"\n") {
				t.Errorf("%v: help lacks %s", args, f)
			}
		}
	}
	code, _, errs := runCLI(t, "chat", "-h")
	if code != 0 || !strings.Contains(errs, "-system") || !strings.Contains(errs, "-no-think") || !strings.Contains(errs, "-temp") {
		t.Errorf("chat -h: exit %d\n%s", code, errs)
	}
}

func TestProgressFor(t *testing.T) {
	var b bytes.Buffer
	if progressFor(tokModel, &b) != nil {
		t.Error("progress for a small model with stderr not a terminal")
	}
	// A sparse file stands in for a big model: 2 shards of 600 MiB.
	big := filepath.Join(t.TempDir(), "big-00001-of-00002.gguf")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(600 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got := modelSize(big); got != 1200<<20 {
		t.Errorf("modelSize %d, want 2 shards of 600 MiB", got)
	}
	p := progressFor(big, &b)
	if p == nil {
		t.Fatal("no progress for a 1.2 GiB model")
	}
	for _, done := range []int64{0, 5, 10, 55, 100} {
		p(done, 100)
	}
	want := []string{"  0%", " 10%", " 55%", "100%"}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != len(want) {
		t.Fatalf("progress lines %q, want %d", lines, len(want))
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) || !strings.Contains(lines[i], "big-00001-of-00002.gguf") {
			t.Errorf("line %d %q lacks %q", i, lines[i], w)
		}
	}
}

// TestGenerateGrammarFlags: --grammar, --grammar-file and --json-schema
// hold the untrained bundled model's text to their sentences, and a bad or
// second constraint is a usage error naming the flag.
func TestGenerateGrammarFlags(t *testing.T) {
	dir := t.TempDir()
	gf := filepath.Join(dir, "yn.gbnf")
	if err := os.WriteFile(gf, []byte(`root ::= " yes" | " no"`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--grammar", `root ::= " yes" | " no"`},
		{"--grammar-file", gf},
	} {
		code, out, errs := runCLI(t, append([]string{"-p", "Answer:", "--temp", "1", "--seed", "5", "--no-display-prompt"}, args...)...)
		if code != 0 || (out != " yes\n" && out != " no\n") || !strings.Contains(errs, "the grammar is complete") {
			t.Errorf("%v: exit %d, stdout %q, stderr %s", args, code, out, errs)
		}
	}
	schema := `{"type": "object", "properties": {"n": {"type": "integer"}, "ok": {"type": "boolean"}}, "required": ["n", "ok"], "additionalProperties": false}`
	for seed := range 3 {
		code, out, errs := runCLI(t, "-p", "Data:", "-j", schema, "-n", "200", "--seed", fmt.Sprint(seed), "--no-display-prompt")
		var v struct {
			N  *int  `json:"n"`
			OK *bool `json:"ok"`
		}
		if code != 0 {
			t.Fatalf("-j: exit %d: %s", code, errs)
		}
		if strings.Contains(errs, "the grammar is complete") {
			dec := json.NewDecoder(strings.NewReader(out))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&v); err != nil || v.N == nil || v.OK == nil {
				t.Errorf("-j seed %d: %q does not match the schema: %v", seed, out, err)
			}
		} else if !strings.Contains(errs, "token limit") {
			t.Errorf("-j seed %d: ended otherwise: %s", seed, errs)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--grammar", "root ::= x"}, `--grammar: grammar: rule "x" is used but not defined`},
		{[]string{"--grammar-file", filepath.Join(dir, "none.gbnf")}, "--grammar-file:"},
		{[]string{"--json-schema", `{"pattern": "a"}`}, `--json-schema: grammar: schema keyword "pattern"`},
		{[]string{"--grammar", `root ::= "a"`, "-j", "{}"}, "give one"},
	} {
		if code, _, errs := runCLI(t, append([]string{"-p", "x"}, c.args...)...); code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, %s; want 2 and %q", c.args, code, errs, c.want)
		}
	}
}

// TestNoRepack: the fast path repacks the bundled Q8_0 weights where the
// CPU has packed kernels and says so on stderr; --no-repack keeps the
// file's layout and says nothing. (That both layouts give the same logits
// within rounding is the backend's and the model's tests.)
func TestNoRepack(t *testing.T) {
	args := []string{"-m", tokModel, "-p", "1 2 3 4 5", "--temp", "0", "-n", "6", "--ignore-eos", "--no-display-prompt"}
	code, packed, errs := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if _, ok := tensor.PackedGemm(tensor.Q8_0); ok != strings.Contains(errs, "glmrun: repacked ") {
		t.Errorf("packed kernels %v, stderr:\n%s", ok, errs)
	}
	code, plain, errs := runCLI(t, append(args, "--no-repack")...)
	if code != 0 || strings.Contains(errs, "repacked") || plain == "" || packed == "" {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, plain, errs)
	}
}
