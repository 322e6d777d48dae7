package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/model/synth"
)

const synthUsage = `usage: glmrun synth -o FILE.gguf [flags]

Writes a synthetic model with random weights, for benchmarks (glmrun bench)
without downloading a model. With -arch deepseek2 (the default) the shape
is GLM-4.7-Flash's with 6 blocks (n_embd 2048, 20 heads, q_lora 768,
kv_lora 512, nope 192, rope 64, v 256, 64 experts of 1536, 4 used, 1 shared,
dense FFN 10240 in block 0, 151552 tokens): about 2.3 GB at Q4_K_M. With
-arch glm-dsa it is GLM-5's with 4 blocks: its attention (n_embd 6144, 64
heads, q_lora 2048, kv_lora 512, nope 192, rope 64, v 256), its DSA indexer
(32 heads of 128, top_k 2048) and vocabulary (154880), a dense FFN of 12288
in block 0, and 16 experts of 2048 (8 used, 1 shared) instead of 256:
about 3.6 GB at Q4_K_M. The other flags change either shape. The weights
are random valid quantization blocks in llama.cpp's Q4_K_M mix (or Q8_0);
the tokenizer is copied from the bundled model (or -tokenizer), padded with
unused tokens. The whole file is built in memory, then written.

flags:
`

// runSynth is "glmrun synth".
func runSynth(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("synth", stderr)
	fs.Usage = func() { fmt.Fprint(stderr, synthUsage); fs.PrintDefaults() }
	// -arch picks the defaults of the shape flags, so it is read first.
	arch := "deepseek2"
	for i, a := range args {
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name != "arch" || !strings.HasPrefix(a, "-") {
			continue
		}
		if !hasVal && i+1 < len(args) {
			val = args[i+1]
		}
		arch = val
	}
	var s synth.Shape
	switch arch {
	case "deepseek2":
		s = synth.Flash(6)
	case synth.ArchGLMDSA:
		s = synth.GLM5(4)
	default:
		return fmt.Errorf("%w: -arch %q: want deepseek2 or %s", errUsage, arch, synth.ArchGLMDSA)
	}
	fs.String("arch", arch, "`architecture`: deepseek2 (GLM-4.7-Flash's shape) or glm-dsa (GLM-5's)")
	out := fs.String("o", "", "output `FILE.gguf` (required; put it outside the repository, e.g. /tmp)")
	mix := fs.String("mix", string(synth.MixQ4KM), "weight types: `Q4_K_M` or Q8_0")
	seed := fs.Uint64("seed", 1, "random `seed`")
	tokPath := fs.String("tokenizer", "", "copy the tokenizer of `FILE.gguf` (default: the bundled "+defaultModelRel+")")
	fs.IntVar(&s.Layers, "layers", s.Layers, "transformer `blocks`")
	fs.IntVar(&s.LeadDense, "dense-lead", s.LeadDense, "leading `blocks` with a dense FFN")
	fs.IntVar(&s.Embd, "embd", s.Embd, "embedding `width`")
	fs.IntVar(&s.Vocab, "vocab", s.Vocab, "vocabulary `size`")
	fs.IntVar(&s.Context, "ctx", s.Context, "context_length `tokens`")
	fs.IntVar(&s.Heads, "heads", s.Heads, "attention `heads`")
	fs.IntVar(&s.QRank, "q-lora", s.QRank, "q_lora_rank `N`")
	fs.IntVar(&s.KVRank, "kv-lora", s.KVRank, "kv_lora_rank `N`")
	fs.IntVar(&s.DNope, "nope", s.DNope, "qk nope head `dims`")
	fs.IntVar(&s.DRope, "rope", s.DRope, "qk rope head `dims`")
	fs.IntVar(&s.DV, "v", s.DV, "v head `dims`")
	fs.IntVar(&s.DenseFFN, "ffn", s.DenseFFN, "dense FFN `width`")
	fs.IntVar(&s.ExpertFFN, "expert-ffn", s.ExpertFFN, "expert FFN `width`")
	fs.IntVar(&s.Experts, "experts", s.Experts, "routed `experts`")
	fs.IntVar(&s.Used, "experts-used", s.Used, "experts per `token`")
	fs.IntVar(&s.Shared, "experts-shared", s.Shared, "shared `experts`")
	fs.IntVar(&s.IndexHeads, "indexer-heads", s.IndexHeads, "DSA indexer `heads` (glm-dsa)")
	fs.IntVar(&s.IndexDim, "indexer-dim", s.IndexDim, "DSA indexer key `dims` (glm-dsa)")
	fs.IntVar(&s.IndexTopK, "indexer-top-k", s.IndexTopK, "DSA indexer top_k `keys` (glm-dsa)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("%w: -o FILE.gguf is required", errUsage)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	m := synth.Mix(strings.ToUpper(*mix))
	if m != synth.MixQ4KM && m != synth.MixQ80 {
		return fmt.Errorf("%w: -mix %q: want Q4_K_M or Q8_0", errUsage, *mix)
	}
	// The file is built in memory for minutes before it is written: a
	// directory that is not there should fail now, not then.
	if dir := filepath.Dir(*out); !isDir(dir) {
		return fmt.Errorf("%w: -o %s: directory %s does not exist", errUsage, *out, dir)
	}
	tp, err := modelPathFor("--tokenizer", *tokPath)
	if err != nil {
		return err
	}
	tf, err := gguf.Open(tp)
	if err != nil {
		return err
	}
	defer tf.Close()
	start := time.Now()
	o := synth.Options{Shape: s, Mix: m, Seed: *seed, Tokenizer: tf}
	// A progress line that redraws itself, for a person at a terminal only.
	tty := isTerminal(stderr)
	if tty {
		var last time.Time
		o.Progress = func(done, total int64) {
			if now := time.Now(); now.Sub(last) > time.Second || done == total {
				last = now
				fmt.Fprintf(stderr, "\rsynth: %d%% of %.2f GB", 100*done/max(total, 1), float64(total)/1e9)
			}
		}
	}
	n, err := synth.Write(*out, o)
	if tty {
		fmt.Fprintln(stderr)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %s %d blocks, %s, %.2f GB of weights, %.1fs\n",
		*out, arch, s.Layers, m, float64(n)/1e9, time.Since(start).Seconds())
	return nil
}

// isDir reports whether path is a directory.
func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}
