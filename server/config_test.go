package server

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/glmrun/glmrun"
	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/model/chat"
)

// TestNewConfig: New takes the tokenizer and the chat template from the
// glmrun.Model, and refuses, naming what is wrong, a missing model, a file
// whose chat template does not parse (unless Config.Template overrides
// it), SpecDraft on a model loaded without its MTP block, and a closed
// model.
func TestNewConfig(t *testing.T) {
	l := testModel(t)
	s, err := New(Config{Model: l.g, Parallel: 1, ContextSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	if s.tok != l.g.Tokenizer() || s.cfg.Template != l.g.Template() {
		t.Errorf("the server's tokenizer and template are not the model's")
	}
	s.Close()

	if _, err := New(Config{}); err == nil || !strings.Contains(err.Error(), "Config.Model") {
		t.Errorf("no model: error %v, want one naming Config.Model", err)
	}
	if _, err := New(Config{Model: l.g, ContextSize: 64, SpecDraft: 2}); err == nil ||
		!strings.Contains(err.Error(), "MTP") || !strings.Contains(err.Error(), "glmrun.Options.SpecDraft") {
		t.Errorf("SpecDraft without MTP: error %v, want one naming the MTP block and glmrun.Options.SpecDraft", err)
	}

	f, err := gguf.Open(testModelPath)
	if err != nil {
		t.Fatal(err)
	}
	w := gguf.NewWriterFrom(f)
	w.SetKV("tokenizer.chat_template", gguf.String("{% if %}"))
	path := filepath.Join(t.TempDir(), "bad-template.gguf")
	err = w.WriteFile(path)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	bad, err := glmrun.Load(path, glmrun.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if _, err := New(Config{Model: bad, Parallel: 1, ContextSize: 64}); err == nil ||
		!strings.Contains(err.Error(), "tokenizer.chat_template") || !strings.Contains(err.Error(), "Config.Template") {
		t.Errorf("unparsable template: error %v, want one naming tokenizer.chat_template and Config.Template", err)
	}
	s, err = New(Config{Model: bad, Template: chat.GLM5(), Parallel: 1, ContextSize: 64})
	if err != nil {
		t.Fatalf("unparsable template overridden: %v", err)
	}
	s.Close()

	bad.Close()
	if _, err := New(Config{Model: bad, Template: chat.GLM5(), Parallel: 1, ContextSize: 64}); err == nil ||
		!strings.Contains(err.Error(), "closed") {
		t.Errorf("closed model: error %v, want one saying it is closed", err)
	}
}
