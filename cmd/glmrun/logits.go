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
	"github.com/glmrun/glmrun/model"
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
	var ff forwardFlags
	ff.register(fs)
	top := fs.Int("top", 0, "also list the N largest logits per position")
	fs.Usage = func() {
		fmt.Fprint(stderr, logitsUsage)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	warnings, err := ff.check(fs)
	if err != nil {
		return err
	}
	if *top < 0 {
		return fmt.Errorf("%w: --top %d: want >= 0", errUsage, *top)
	}
	printWarnings(stderr, "logits", warnings)
	f, m, tokens, err := ff.load(stderr, "logits")
	if err != nil {
		return err
	}
	defer f.Close()
	defer m.Close()
	s, err := m.NewSession(model.SessionOptions{ContextSize: max(len(tokens), 1), CacheType: ff.cacheType})
	if err != nil {
		return err
	}
	out := logitsOutput{Tokens: tokens}
	if ff.decode {
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

// logSumExp is log Σ exp(row), in float64 after subtracting the maximum.
func logSumExp(row []float32) float64 {
	maxv := math.Inf(-1)
	for _, v := range row {
		maxv = max(maxv, float64(v))
	}
	var sum float64
	for _, v := range row {
		sum += math.Exp(float64(v) - maxv)
	}
	return maxv + math.Log(sum)
}

// topLogits returns the n largest logits of row (ties: lower id first)
// with their log-probabilities, logit − log Σ exp(logits) in float64.
func topLogits(row []float32, n int) []topEntry {
	lse := logSumExp(row)
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
