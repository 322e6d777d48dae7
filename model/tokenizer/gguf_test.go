package tokenizer

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/gguf"
)

// vocabOnly returns a tensor-less GGUF holding glm5-mini's tokenizer keys,
// changed by edit.
func vocabOnly(t *testing.T, edit func(w *gguf.Writer)) *gguf.File {
	t.Helper()
	src := openGGUF(t, glm5Mini)
	w := gguf.NewWriter()
	w.SetKV("general.architecture", gguf.String("glm-dsa"))
	for _, kv := range src.KVs {
		if strings.HasPrefix(kv.Key, "tokenizer.ggml.") {
			w.SetKV(kv.Key, kv.Value)
		}
	}
	edit(w)
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse("vocab-only.gguf", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestNewErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(w *gguf.Writer)
		want []string // substrings of the error
		is   error
	}{
		{"no tokenizer", func(w *gguf.Writer) {
			for _, kv := range w.KVs() {
				if strings.HasPrefix(kv.Key, "tokenizer.") {
					w.RemoveKV(kv.Key)
				}
			}
		}, []string{"vocab-only.gguf", `"tokenizer.ggml.model"`, "missing"}, ErrNoTokenizer},
		{"spm", func(w *gguf.Writer) { w.SetKV(KeyModel, gguf.String("llama")) },
			[]string{"vocab-only.gguf", "tokenizer.ggml.model", `"llama"`}, ErrUnsupported},
		{"pre", func(w *gguf.Writer) { w.SetKV(KeyPre, gguf.String("falcon")) },
			[]string{"tokenizer.ggml.pre", `"falcon"`, "glm4"}, ErrUnsupported},
		{"no pre", func(w *gguf.Writer) { w.RemoveKV(KeyPre) }, []string{`"tokenizer.ggml.pre"`, "missing"}, ErrUnsupported},
		{"no merges", func(w *gguf.Writer) { w.RemoveKV(KeyMerges) }, []string{KeyMerges}, gguf.ErrMissingKey},
		{"model type", func(w *gguf.Writer) { w.SetKV(KeyModel, gguf.Uint32(2)) }, []string{KeyModel}, nil},
		{"token types", func(w *gguf.Writer) { w.SetKV(KeyTokenType, gguf.Array([]int32{1, 1})) },
			[]string{KeyTokenType, "2 entries for 1024 tokens"}, nil},
		{"bos range", func(w *gguf.Writer) { w.SetKV(KeyBOS, gguf.Uint32(5000)) }, []string{KeyBOS, "5000"}, nil},
		{"add_bos type", func(w *gguf.Writer) { w.SetKV(KeyAddBOS, gguf.String("yes")) }, []string{KeyAddBOS}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(vocabOnly(t, c.edit))
			if err == nil {
				t.Fatal("no error")
			}
			for _, s := range c.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("error %v is not %v", err, c.is)
			}
		})
	}
}

func TestNewDefaults(t *testing.T) {
	// Without the optional keys, llama.cpp's defaults apply: no BOS for
	// glm4, add_bos_token false, EOT found by name ("<|endoftext|>").
	f := vocabOnly(t, func(w *gguf.Writer) {
		for _, k := range []string{KeyBOS, KeyEOT, KeyEOM, KeyUNK, KeyPAD, KeyAddBOS, KeyTokenType} {
			w.RemoveKV(k)
		}
	})
	tok, err := New(f)
	if err != nil {
		t.Fatal(err)
	}
	if tok.BOS() != None || tok.EOS() != 956 || tok.EOT() != 956 || tok.EOM() != None || tok.AddBOS() {
		t.Errorf("BOS %d EOS %d EOT %d EOM %d AddBOS %v", tok.BOS(), tok.EOS(), tok.EOT(), tok.EOM(), tok.AddBOS())
	}
	// Without token types every token is normal except those llama.cpp
	// makes CONTROL by name, so "<|user|>" is plain text now ...
	if got := tok.Encode("<|user|>", false, true); len(got) < 2 {
		t.Errorf("<|user|> without token types: %v", got)
	}
	// ... while "<|endoftext|>" is still recognised.
	if got := tok.Encode("<|endoftext|>", false, true); !slices.Equal(got, []int32{956}) {
		t.Errorf("<|endoftext|>: %v", got)
	}
}
