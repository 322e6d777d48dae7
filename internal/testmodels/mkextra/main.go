// Command mkextra writes the model files that testmodels ships in place of
// bigger originals from the team's shared test data:
//
//   - testdata/models/glm5-mini-nextn.extra.gguf: what glm5-mini-nextn.Q8_0
//     has beyond glm5-mini.Q8_0 (testmodels.Path rebuilds the full model);
//   - testdata/models/glm5-mini.BF16.subset.gguf: the metadata of
//     glm5-mini.BF16 and a few of its tensors, byte-identical, for BF16
//     dequantization checks on GLM shapes.
//
// It is a maintainer's tool, run by hand once when the originals change,
// never by tests: they read only what it wrote into testdata/. From the
// repository root, with DIR the folder of the original models:
//
//	go run ./internal/testmodels/mkextra -shared DIR
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/internal/testmodels"
)

// bf16Subset lists the tensors kept from glm5-mini.BF16: f32 norms and
// biases (1-D and 2-D), BF16 matrices of several shapes, the 3-D attn_k_b
// and attn_v_b, and the embedding.
var bf16Subset = []string{
	"output_norm.weight",
	"token_embd.weight",
	"blk.0.attn_k_b.weight",
	"blk.0.attn_kv_a_mqa.weight",
	"blk.0.attn_norm.weight",
	"blk.0.attn_q_b.weight",
	"blk.0.attn_v_b.weight",
	"blk.0.ffn_down.weight",
	"blk.0.indexer.k_norm.bias",
	"blk.1.exp_probs_b.bias",
	"blk.1.ffn_gate_inp.weight",
	"blk.1.indexer.attn_k.weight",
	"blk.1.indexer.proj.weight",
}

func main() {
	shared := flag.String("shared", "", "directory of the original models (required; the team's reference set, not in the repo)")
	out := flag.String("out", "testdata/models", "directory to write to (also holds glm5-mini.Q8_0.gguf)")
	flag.Parse()
	if *shared == "" {
		fmt.Fprintln(os.Stderr, "mkextra: -shared DIR is required")
		os.Exit(2)
	}
	if err := run(*shared, *out); err != nil {
		fmt.Fprintln(os.Stderr, "mkextra:", err)
		os.Exit(1)
	}
}

func run(shared, out string) error {
	full, err := gguf.Open(filepath.Join(shared, "glm5-mini-nextn.Q8_0.gguf"))
	if err != nil {
		return err
	}
	defer full.Close()
	base, err := gguf.Open(filepath.Join(out, "glm5-mini.Q8_0.gguf"))
	if err != nil {
		return err
	}
	defer base.Close()
	w, err := testmodels.Diff(full, base, "glm5-mini.Q8_0")
	if err != nil {
		return err
	}
	extraPath := filepath.Join(out, "glm5-mini-nextn.extra.gguf")
	if err := w.WriteFile(extraPath); err != nil {
		return err
	}
	// Check that the extra file rebuilds the original.
	extra, err := gguf.Open(extraPath)
	if err != nil {
		return err
	}
	defer extra.Close()
	rebuilt, err := testmodels.Patch(base, extra, "glm5-mini.Q8_0")
	if err != nil {
		return err
	}
	got, want := sha(rebuilt), fileSha(full.Path)
	if got != want {
		return fmt.Errorf("rebuilt nextn model has sha256 %s, the original %s", got, want)
	}
	fmt.Printf("%s: %d of %d tensors, %d bytes; rebuilds %s (sha256 %s)\n",
		extraPath, len(extra.Tensors), len(full.Tensors), size(extraPath), full.Path, got)

	bf16, err := gguf.Open(filepath.Join(shared, "glm5-mini.BF16.gguf"))
	if err != nil {
		return err
	}
	defer bf16.Close()
	sub, err := testmodels.Subset(bf16, bf16Subset)
	if err != nil {
		return err
	}
	subPath := filepath.Join(out, "glm5-mini.BF16.subset.gguf")
	if err := sub.WriteFile(subPath); err != nil {
		return err
	}
	fmt.Printf("%s: %d tensors, %d bytes\n", subPath, len(bf16Subset), size(subPath))
	return nil
}

func sha(w *gguf.Writer) string {
	h := sha256.New()
	if _, err := w.WriteTo(h); err != nil {
		return "error: " + err.Error()
	}
	return hex.EncodeToString(h.Sum(nil))
}

func fileSha(p string) string {
	f, err := os.Open(p)
	if err != nil {
		return "error: " + err.Error()
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "error: " + err.Error()
	}
	return hex.EncodeToString(h.Sum(nil))
}

func size(p string) int64 {
	st, err := os.Stat(p)
	if err != nil {
		return -1
	}
	return st.Size()
}
