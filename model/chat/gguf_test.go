package chat

import (
	"os"
	"testing"

	"github.com/glmrun/glmrun/gguf"
)

// TestTemplateFromGGUF checks that testdata/glm5-mini.jinja is the
// tokenizer.chat_template of the bundled models, and that the template read
// from a model renders the reference conversations.
func TestTemplateFromGGUF(t *testing.T) {
	want, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	cases := loadRefCases(t)
	for _, name := range []string{"glm5-mini.Q8_0", "glm5-mini.Q4_K_M", "ds2-mini.Q8_0"} {
		t.Run(name, func(t *testing.T) {
			f, err := gguf.Open("../../testdata/models/" + name + ".gguf")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			src, err := f.String("tokenizer.chat_template")
			if err != nil {
				t.Fatal(err)
			}
			if src != string(want) {
				t.Fatalf("tokenizer.chat_template differs from %s", templatePath)
			}
			tmpl, err := Parse(src)
			if err != nil {
				t.Fatal(err)
			}
			bos, err := f.Uint("tokenizer.ggml.bos_token_id")
			if err != nil {
				t.Fatal(err)
			}
			tokens, err := f.Strings("tokenizer.ggml.tokens")
			if err != nil {
				t.Fatal(err)
			}
			if bos >= uint64(len(tokens)) {
				t.Fatalf("bos id %d outside the vocabulary", bos)
			}
			for _, c := range cases {
				opts := c.options(t)
				opts.BOSToken = tokens[bos]
				got, err := tmpl.Render(c.Messages, opts)
				if err != nil {
					t.Fatal(err)
				}
				if got != c.Prompt {
					t.Errorf("got %q, want %q", got, c.Prompt)
				}
			}
		})
	}
}
