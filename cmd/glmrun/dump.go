package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/glmrun/glmrun/model"
	"github.com/glmrun/glmrun/model/dump"
	"github.com/glmrun/glmrun/tensor"
)

const dumpUsage = `usage: glmrun dump -m MODEL.gguf (--tokens ID,ID,... | --text TEXT) -o DIR [--decode] [--tp N]

Runs the tokens (or the text, tokenized with the model's tokenizer: BOS as
the model asks, special-token text such as "<|user|>" parsed) through the model and writes its hidden states to DIR: one
float32 .npy file per tensor ("embd", per layer "blk.N.attn_norm",
"blk.N.kqv_out", "blk.N.attn_out", "blk.N.ffn_inp", "blk.N.ffn_norm",
"blk.N.ffn_out", "blk.N.out" (the residual stream after layer N), ...,
"result_norm", "result_output"), shaped [tokens, width], the selected
experts and DSA keys as int32 .npy files, and DIR/index.json listing them in
forward order. By default the whole prompt goes through the prefill path in
one batch; --decode feeds one token at a time through the decode path and
writes the same files, rows concatenated. With --tp N > 1 (tensor
parallelism over N devices) each device's partial attention and FFN
outputs before the all-reduce are written too ("blk.N.attn_out.shardK",
"blk.N.ffn_out.shardK"). Compare dumps with "glmrun diff".

Flags:
`

func runDump(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("dump", stderr)
	var ff forwardFlags
	ff.register(fs)
	outDir := fs.String("o", "", "output directory (required; created if needed)")
	fs.Usage = func() {
		fmt.Fprint(stderr, dumpUsage)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	warnings, err := ff.check(fs)
	if err != nil {
		return err
	}
	if *outDir == "" {
		return fmt.Errorf("%w: -o DIR is required", errUsage)
	}
	printWarnings(stderr, "dump", warnings)
	f, m, tokens, err := ff.load(stderr, "dump")
	if err != nil {
		return err
	}
	defer f.Close()
	defer m.Close()
	ids := make([]int, len(tokens))
	for i, t := range tokens {
		ids[i] = int(t)
	}
	w, err := dump.Create(*outDir, dump.Info{Model: filepath.Base(ff.model), Tokens: ids})
	if err != nil {
		return err
	}
	runErr := runForDump(m, w, tokens, ff.decode, ff.cacheType)
	if err := w.Close(); runErr == nil && err != nil {
		runErr = err
	}
	if runErr != nil {
		return runErr
	}
	d, err := dump.Open(*outDir)
	if err != nil {
		return err
	}
	path := "prefill"
	if ff.decode {
		path = "decode"
	}
	_, err = fmt.Fprintf(stdout, "wrote %d tensors for %d tokens (%s path) to %s\n", len(d.Tensors), len(tokens), path, *outDir)
	return err
}

// runForDump runs tokens through a new session of m, its KV cache of type
// cache, whose hooks write to w.
func runForDump(m *model.Model, w *dump.Writer, tokens []int32, decode bool, cache tensor.Type) error {
	s, err := m.NewSession(model.SessionOptions{ContextSize: len(tokens), Hook: w.Hook, IDHook: w.IDHook, CacheType: cache})
	if err != nil {
		return err
	}
	if !decode {
		_, err := s.Prefill(tokens)
		return err
	}
	for _, t := range tokens {
		if _, err := s.Decode(t); err != nil {
			return err
		}
	}
	return nil
}
