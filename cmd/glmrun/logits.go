package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	_ "github.com/glmrun/glmrun/backend/cpu"  // registers the "cpu" backend
	_ "github.com/glmrun/glmrun/backend/cuda" // registers "cuda" (libcuda.so.1 is loaded only when chosen)
	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/model"
	"github.com/glmrun/glmrun/model/tokenizer"
)

const logitsUsage = `usage: glmrun logits -m MODEL.gguf (--tokens ID,ID,... | --text TEXT) [--decode] [--top N] [--tp N]

Runs the tokens through the model and prints one JSON object to stdout:
{"tokens":[...],"logits":[[...vocab floats...], ...one row per position]},
plus "top": per position the N largest logits as {"id","logit","logprob"}
when --top N is given. By default the whole prompt goes through the
prefill path in one batch; --decode feeds one token at a time through the
decode path. --tp N splits the model over N devices (tensor parallelism;
the logits agree with --tp 1 to rounding). --text tokenizes with the
model's tokenizer (special tokens such as [gMASK] are recognised; BOS as
the model's add_bos_token says).

Flags:
`

// topEntry is one of the N best next tokens at a position.
type topEntry struct {
	ID      int     `json:"id"`
	Logit   float32 `json:"logit"`
	Logprob float64 `json:"logprob"`
}

// logitsOutput is the JSON printed by glmrun logits.
type logitsOutput struct {
	Tokens []int32      `json:"tokens"`
	Logits [][]float32  `json:"logits"`
	Top    [][]topEntry `json:"top,omitempty"`
}

func runLogits(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("logits", stderr)
	modelPath := fs.String("m", "", "model GGUF file (required)")
	tokenList := fs.String("tokens", "", "comma-separated token ids")
	text := fs.String("text", "", "text to tokenize with the model's tokenizer (instead of --tokens)")
	decode := fs.Bool("decode", false, "one token at a time through the decode path")
	top := fs.Int("top", 0, "also list the N largest logits per position")
	threads := fs.Int("threads", 0, "worker goroutines per device (0: the physical cores)")
	fast := fs.Bool("fast", false, "the fast matrix products (activations quantized as ggml does, integer kernels: llama.cpp's quantized path) instead of float32 activations")
	tp := fs.Int("tp", 1, "tensor parallelism: split the model over N devices (virtual CPU devices on the cpu backend)")
	backendName := fs.String("backend", "cpu", "compute backend: cpu or cuda (dump on each and glmrun diff the two)")
	fs.Usage = func() {
		fmt.Fprint(stderr, logitsUsage)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	case *modelPath == "":
		return fmt.Errorf("%w: -m MODEL.gguf is required", errUsage)
	case *top < 0:
		return fmt.Errorf("%w: --top %d: want >= 0", errUsage, *top)
	case *threads < 0:
		return fmt.Errorf("%w: -threads %d: want >= 0", errUsage, *threads)
	case *tp < 1:
		return fmt.Errorf("%w: --tp %d: want >= 1", errUsage, *tp)
	case *text != "" && *tokenList != "":
		return fmt.Errorf("%w: give --tokens or --text, not both", errUsage)
	}
	var tokens []int32
	if *text == "" {
		var err error
		if tokens, err = parseTokenIDs(*tokenList); err != nil {
			return fmt.Errorf("%w: --tokens: %v", errUsage, err)
		}
	}
	f, err := gguf.Open(*modelPath)
	if err != nil {
		return err
	}
	defer f.Close()
	if *text != "" {
		tok, err := tokenizer.New(f)
		if err != nil {
			return err
		}
		// As llama.cpp's refs: the model's BOS rule, special tokens parsed.
		if tokens = tok.Encode(*text, true, true); len(tokens) == 0 {
			return errors.New("--text gives no tokens")
		}
	}
	m, err := model.New(f, model.Options{Threads: *threads, TensorParallel: *tp, Fast: *fast, Backend: *backendName})
	if err != nil {
		return err
	}
	s, err := m.NewSession(model.SessionOptions{ContextSize: max(len(tokens), 1)})
	if err != nil {
		return err
	}
	out := logitsOutput{Tokens: tokens}
	if *decode {
		for _, tok := range tokens {
			row, err := s.Decode(tok)
			if err != nil {
				return err
			}
			out.Logits = append(out.Logits, row)
		}
	} else if out.Logits, err = s.Prefill(tokens); err != nil {
		return err
	}
	if *top > 0 {
		for _, row := range out.Logits {
			out.Top = append(out.Top, topLogits(row, *top))
		}
	}
	bw := bufio.NewWriter(stdout)
	if err := json.NewEncoder(bw).Encode(out); err != nil {
		return err
	}
	return bw.Flush()
}

// topLogits returns the n largest logits of row (ties: lower id first)
// with their log-probabilities, logit − log Σ exp(logits) in float64.
func topLogits(row []float32, n int) []topEntry {
	maxv := math.Inf(-1)
	for _, v := range row {
		maxv = max(maxv, float64(v))
	}
	var sum float64
	for _, v := range row {
		sum += math.Exp(float64(v) - maxv)
	}
	lse := maxv + math.Log(sum)
	ids := make([]int, len(row))
	for i := range ids {
		ids[i] = i
	}
	sort.SliceStable(ids, func(a, b int) bool { return row[ids[a]] > row[ids[b]] })
	n = min(n, len(ids))
	top := make([]topEntry, n)
	for i, id := range ids[:n] {
		top[i] = topEntry{ID: id, Logit: row[id], Logprob: float64(row[id]) - lse}
	}
	return top
}

// parseTokenIDs parses a comma-separated list of non-negative token ids.
func parseTokenIDs(s string) ([]int32, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("no token ids")
	}
	var ids []int32
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		v, err := strconv.ParseInt(f, 10, 32)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("bad token id %q", f)
		}
		ids = append(ids, int32(v))
	}
	return ids, nil
}
