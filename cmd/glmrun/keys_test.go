package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/internal/testmodels"
)

// TestUnsupportedKeys: a model with a key glmrun does not implement is a
// load error naming the key for every command that runs it, --force runs
// it with a warning, and inspect lists the key.
func TestUnsupportedKeys(t *testing.T) {
	f, err := gguf.Open(testmodels.Path(t, "glm5-mini.Q8_0"))
	if err != nil {
		t.Fatal(err)
	}
	w := gguf.NewWriterFrom(f)
	w.SetKV("glm-dsa.attention.indexer.kpool", gguf.Uint32(4))
	path := filepath.Join(t.TempDir(), "kpool.gguf")
	err = w.WriteFile(path)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	const key = `"glm-dsa.attention.indexer.kpool"`
	for _, args := range [][]string{
		{"-m", path, "-p", "1 2", "-n", "2", "--temp", "0"},
		{"bench", "-m", path, "-p", "4", "-n", "2", "-r", "1"},
		{"logits", "-m", path, "--tokens", "1,2"},
	} {
		code, _, stderr := runCLI(t, args...)
		if code != 1 || !strings.Contains(stderr, key) || !strings.Contains(stderr, path) {
			t.Errorf("%q: exit %d, stderr %q; want 1 and an error naming %s and the file", args, code, stderr, key)
		}
		code, _, stderr = runCLI(t, append(args, "--force")...)
		if code != 0 || !strings.Contains(stderr, "warning") || !strings.Contains(stderr, key) {
			t.Errorf("%q --force: exit %d, stderr %q; want 0 and a warning naming %s", args, code, stderr, key)
		}
	}
	code, stdout, _ := runCLI(t, "inspect", path)
	if code != 0 || !strings.Contains(stdout, "glm-dsa.attention.indexer.kpool") || !strings.Contains(stdout, "not supported") {
		t.Errorf("inspect: exit %d, output without the key:\n%s", code, stdout)
	}
}

// TestInspectIndexerTypes: inspect spells out GLM-5.2's shared-indexer
// pattern, and its per-token KV cache leaves out the shared layer's
// indexer keys.
func TestInspectIndexerTypes(t *testing.T) {
	path := filepath.Join("..", "..", "testdata", "hf", "glm52-hfs.bf16.gguf")
	code, stdout, stderr := runCLI(t, "inspect", path)
	if code != 0 || !strings.Contains(stdout, "indexer types:     full, shared, full, full (1 shared") {
		t.Fatalf("inspect: exit %d, %s\n%s", code, stderr, stdout)
	}
	for _, tc := range []struct {
		ctk   string
		bytes int
	}{{"f32", 4}, {"f16", 2}} {
		code, stdout, stderr = runCLI(t, "inspect", "--json", "--tp", "1", "-ctk", tc.ctk, path)
		if code != 0 {
			t.Fatalf("inspect --json: exit %d, %s", code, stderr)
		}
		// 4 layers of 64+16 latent values, 3 of them with 64 indexer values.
		if want := fmt.Sprintf(`"kv_bytes_per_token": %d`, tc.bytes*(4*(64+16)+3*64)); !strings.Contains(stdout, want) {
			t.Errorf("inspect --json -ctk %s lacks %s", tc.ctk, want)
		}
	}
}
