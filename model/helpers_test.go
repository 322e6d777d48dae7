package model

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/glmrun/glmrun/gguf"
)

// modelPath returns the path of a golden model: shipped in testdata/models
// or derived.
func modelPath(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join("..", "testdata", "models", name+".gguf")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	switch name {
	case "glm5-mini-sparse.Q8_0":
		f, err := gguf.Open(modelPath(t, "glm5-mini.Q8_0"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		w := gguf.NewWriterFrom(f)
		w.SetKV("general.name", gguf.String("glm5-mini-sparse"))
		w.SetKV("glm-dsa.attention.indexer.top_k", gguf.Uint32(8))
		out := filepath.Join(t.TempDir(), name+".gguf")
		if err := w.WriteFile(out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	t.Skipf("model %s not available", name)
	return ""
}
