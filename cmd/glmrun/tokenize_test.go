package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/internal/testmodels"
	"github.com/glmrun/glmrun/model/tokenizer"
)

// tokModel is the random-weight golden model whose token ids, texts and
// vocabulary size (1024) the tests check: they name it with -m, since the
// bundled model (used without -m) is another one.
const tokModel = "../../testdata/models/glm5-mini.Q8_0.gguf"

// bundledTokenizer returns the tokenizer of the bundled model, the one
// glmrun uses without -m, for the tests that run without -m and check
// only what holds for any model: ids within its vocabulary, its
// end-of-generation ids.
func bundledTokenizer(t *testing.T) *tokenizer.Tokenizer {
	t.Helper()
	p, err := defaultModelPath("-m")
	if err != nil {
		t.Fatal(err)
	}
	_, tok := openTestModel(t, p)
	return tok
}

// openTestModel opens a model file and its tokenizer for a test; the file
// is closed when the test ends.
func openTestModel(t *testing.T, path string) (*gguf.File, *tokenizer.Tokenizer) {
	t.Helper()
	f, tok, err := openModelFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, tok
}

// runTok runs glmrun in-process and returns its exit status and output.
func runTok(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// goldenP1 returns the P1 prompt text and llama.cpp's ids for it (the
// text is the concatenation of the ref's prompt_pieces).
func goldenP1(t *testing.T) (string, string) {
	t.Helper()
	var ref struct {
		Prompt       []int32  `json:"prompt"`
		PromptPieces []string `json:"prompt_pieces"`
	}
	if err := json.Unmarshal(testmodels.Ref(t, "glm5-mini.Q8_0.deq-F32.P1"), &ref); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(ref.Prompt))
	for i, id := range ref.Prompt {
		ids[i] = strconv.Itoa(int(id))
	}
	return strings.Join(ref.PromptPieces, ""), strings.Join(ids, " ")
}

func TestTokenize(t *testing.T) {
	p1, p1IDs := goldenP1(t)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"golden P1", []string{"tokenize", "-m", tokModel, p1}, p1IDs},
		{"flags after text", []string{"tokenize", p1, "--model", tokModel}, p1IDs},
		{"words joined", []string{"tokenize", "-m", tokModel, "1", "2"}, "16 220 17"},
		{"special parsed", []string{"tokenize", "-m", tokModel, "<|user|>Hi<|assistant|>"}, "963 39 72 964"},
		{"special as text", []string{"tokenize", "-m", tokModel, "--no-parse-special", "<|user|>Hi"}, "27 91 872 91 29 39 72"},
		{"dash text", []string{"tokenize", "-m", tokModel, "--", "-1"}, "12 16"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := runTok(t, c.args...)
			if code != 0 || out != c.want+"\n" {
				t.Errorf("exit %d, stdout %q (stderr %q); want %q", code, out, errs, c.want)
			}
		})
	}
	// Without -m, the bundled model: its ids are its own, so the test
	// checks only that they are within its vocabulary and detokenize back
	// (without -m too) to the text.
	t.Run("bundled model", func(t *testing.T) {
		vocab := bundledTokenizer(t).NumTokens()
		code, out, errs := runTok(t, "tokenize", p1)
		ids := strings.Fields(out)
		if code != 0 || errs != "" || len(ids) == 0 || !strings.HasSuffix(out, "\n") {
			t.Fatalf("exit %d, stdout %q, stderr %q; want ids", code, out, errs)
		}
		for _, s := range ids {
			if id, err := strconv.Atoi(s); err != nil || id < 0 || id >= vocab {
				t.Errorf("token id %q: not in the bundled model's vocabulary [0, %d)", s, vocab)
			}
		}
		code, back, errs := runTok(t, "detokenize", strings.Join(ids, " "))
		if code != 0 || back != p1+"\n" {
			t.Errorf("detokenize: exit %d, stdout %q (stderr %q); want %q", code, back, errs, p1)
		}
	})
}

func TestTokenizeFile(t *testing.T) {
	p1, p1IDs := goldenP1(t)
	name := filepath.Join(t.TempDir(), "p1.txt")
	if err := os.WriteFile(name, []byte(p1), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := runTok(t, "tokenize", "-m", tokModel, "-f", name); code != 0 || out != p1IDs+"\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

func TestDetokenize(t *testing.T) {
	p1, p1IDs := goldenP1(t)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"golden P1", append([]string{"detokenize", "-m", tokModel}, strings.Fields(p1IDs)...), p1},
		{"one argument", []string{"detokenize", "-m", tokModel, p1IDs}, p1},
		{"llama-tokenize list", []string{"detokenize", "-m", tokModel, "[963, 39, 72, 964]"}, "<|user|>Hi<|assistant|>"},
		{"no special", []string{"detokenize", "-m", tokModel, "--no-special", "963,39,72,964"}, "Hi"},
		{"partial character", []string{"detokenize", "-m", tokModel, "127"}, "\xc3"}, // byte token 0xC3: half of a character
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := runTok(t, c.args...)
			if code != 0 || out != c.want+"\n" {
				t.Errorf("exit %d, stdout %q (stderr %q); want %q", code, out, errs, c.want)
			}
		})
	}
}

// TestTokenizeRoundTrip: tokenize, then detokenize the printed ids.
func TestTokenizeRoundTrip(t *testing.T) {
	for _, text := range []string{
		"Ünïcödé café, 中文, русский, emoji 🚀🦙",
		"[gMASK]<sop><|system|>Be brief.<|user|>What is 2+2?<|assistant|><think>",
		"def f(x):\n    return x * 2  # comment",
	} {
		code, ids, errs := runTok(t, "tokenize", "--", text)
		if code != 0 {
			t.Fatalf("tokenize %q: exit %d: %s", text, code, errs)
		}
		code, out, errs := runTok(t, "detokenize", strings.TrimSuffix(ids, "\n"))
		if code != 0 || out != text+"\n" {
			t.Errorf("round trip of %q: exit %d, %q (stderr %q)", text, code, out, errs)
		}
	}
}

func TestTokenizeErrors(t *testing.T) {
	dir := t.TempDir()
	// A valid GGUF without a tokenizer.
	noTok := filepath.Join(dir, "no-tokenizer.gguf")
	w := gguf.NewWriter()
	w.SetKV("general.architecture", gguf.String("glm-dsa"))
	if err := w.WriteFile(noTok); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"bad flag", []string{"tokenize", "--bogus", "hi"}, 2, []string{"bogus"}},
		{"no text", []string{"tokenize", "-m", tokModel}, 2, []string{"no text"}},
		{"text and file", []string{"tokenize", "-f", "x.txt", "hi"}, 2, []string{"not both"}},
		{"missing text file", []string{"tokenize", "-f", filepath.Join(dir, "nope.txt")}, 1, []string{"nope.txt"}},
		{"missing model", []string{"tokenize", "-m", filepath.Join(dir, "nope.gguf"), "hi"}, 1, []string{"nope.gguf"}},
		{"no tokenizer", []string{"tokenize", "-m", noTok, "hi"}, 1, []string{"no-tokenizer.gguf", "tokenizer.ggml.model", "no tokenizer"}},
		{"unsupported tokenizer", []string{"tokenize", "-m", "../../testdata/formats/llama-dense.real.Q8_0.gguf", "hi"}, 1,
			[]string{"llama-dense.real.Q8_0.gguf", "tokenizer.ggml.model", `"test"`}},
		{"detokenize bad flag", []string{"detokenize", "--bogus", "1"}, 2, []string{"bogus"}},
		{"detokenize no ids", []string{"detokenize"}, 2, []string{"no token ids"}},
		{"detokenize not an id", []string{"detokenize", "12", "x"}, 2, []string{`"x" is not a token id`}},
		{"detokenize negative", []string{"detokenize", "-m", tokModel, "--", "-1"}, 2, []string{`"-1" is not a token id`}},
		{"detokenize out of range", []string{"detokenize", "-m", tokModel, "1024"}, 1, []string{"1024 out of range"}},
		{"detokenize no tokenizer", []string{"detokenize", "-m", noTok, "1"}, 1, []string{"no tokenizer"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := runTok(t, c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, c.code, errs)
			}
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
			for _, s := range c.want {
				if !strings.Contains(errs, s) {
					t.Errorf("stderr %q does not mention %q", errs, s)
				}
			}
		})
	}
	// Without -m, the first id past the bundled model's vocabulary.
	t.Run("detokenize out of range, bundled model", func(t *testing.T) {
		vocab := strconv.Itoa(bundledTokenizer(t).NumTokens())
		code, out, errs := runTok(t, "detokenize", vocab)
		if code != 1 || out != "" || !strings.Contains(errs, vocab+" out of range") {
			t.Errorf("detokenize %s: exit %d, stdout %q, stderr %q; want exit 1 and %q", vocab, code, out, errs, vocab+" out of range")
		}
	})
}

func TestDefaultModelPath(t *testing.T) {
	p, err := defaultModelPath("-m")
	if err != nil {
		t.Fatal(err)
	}
	want, err := filepath.Abs(filepath.Join("..", "..", "testdata", "models", "glm5-mini.Q8_0.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if p != want {
		t.Errorf("defaultModelPath(-m) = %q, want %q", p, want)
	}
	// From a directory outside the repository it is not found, and the
	// error says to pass -m.
	t.Chdir(t.TempDir())
	if _, err := defaultModelPath("-m"); err == nil || !strings.Contains(err.Error(), "-m") {
		t.Errorf("outside the repository: error %v, want one suggesting -m", err)
	}
	code, _, errs := runTok(t, "tokenize", "hi")
	if code != 1 || !strings.Contains(errs, "pass -m") {
		t.Errorf("tokenize without -m outside the repository: exit %d, stderr %q", code, errs)
	}
}
