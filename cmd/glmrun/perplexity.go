package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/glmrun/glmrun/model"
	"github.com/glmrun/glmrun/tensor"
)

// glmrun perplexity computes what llama.cpp's llama-perplexity computes in
// its default mode (no --kl-divergence, --hellaswag, --ppl-stride ...), so
// that the two agree on the same file, text and flags:
//
//   - The text is the -f file's bytes, one trailing newline dropped (as
//     llama.cpp's -f reads a file), tokenized with BOS as the vocabulary's
//     add_bos_token says and special-token text not parsed
//     (common_tokenize(ctx, text, add_special=true, parse_special=false)).
//   - It must have at least 2·n_ctx tokens; the chunks are the first
//     tokens/n_ctx runs of n_ctx tokens (--chunks N: at most N of them).
//   - Each chunk is a sequence of its own, from position 0 on an empty
//     cache; with add_bos_token its first token is replaced by BOS for the
//     forward pass.
//   - Only the second half of a chunk is scored: with first = n_ctx/2, for
//     j = first … n_ctx−2 the negative log-likelihood of token j+1 under the
//     logits at j: max and exp in float32, the sum of the exps and the log
//     in float64 (llama.cpp's log_softmax).
//   - After each chunk stdout gets "[i]PPL," (exp of the mean NLL so far,
//     %.4f); at the end stderr gets "Final estimate: PPL = %.4f +/- %.5f",
//     the error being PPL·sqrt((mean(v²) − mean(v)²)/(count−1)) over the
//     per-token NLLs v. The informational lines go to stderr and the ETA's
//     tail ("0.05 minutes") to stdout, where llama.cpp's LOG_INF and LOG
//     send them.
//
// -c defaults to 512, as llama-perplexity's does (it sets n_ctx = 512
// before parsing the flags), and -b to 2048, -ub to 512 (llama.cpp's
// common defaults). llama-perplexity turns -b into n_seq = max(1, b/c)
// chunks decoded together as parallel sequences and a batch size of
// min(b, n_seq·c); glmrun prints the same n_seq and batch_size but runs the
// chunks one after another (its "seconds per pass" is one chunk's), each
// in logical batches of batch_size tokens cut into physical ones of
// min(-ub, batch_size): llama.cpp's pieces when n_seq = 1. With n_seq > 1
// llama.cpp's physical batches may hold several chunks or cut one
// elsewhere; the per-chunk math is the same, and only the fast path's
// rounding can tell the difference. One departure: a -c beyond the model's
// training context (and what its RoPE scaling extends it to) is an error,
// where llama-perplexity warns and goes on.

const perplexityUsage = `usage: glmrun perplexity [-m MODEL.gguf] -f TEXT_FILE [-c 512] [-b 2048] [-ub 512] [--chunks N] [-t N] [--exact] [flags]

Computes the perplexity of the model on a text as llama.cpp's
llama-perplexity does: the text (special-token text not parsed, BOS as the
model's add_bos_token says) is cut into chunks of -c tokens, each run from
an empty cache (its first token replaced by BOS when the model adds BOS),
and the second half of every chunk is scored. The running estimate after
each chunk goes to stdout ("[1]12.3456,[2]13.2345,..."), the final line
"Final estimate: PPL = X +/- Y" to stderr, as llama-perplexity prints them.
The text needs at least 2 × -c tokens. The fast quantized-activation
kernels are used (llama.cpp's CPU path); --exact switches to float32
activations. Every flag value is checked before the model is loaded (a bad
one: exit 2).

flags:
`

// Defaults of llama-perplexity.
const (
	pplDefaultCtx    = 512  // perplexity.cpp's main sets params.n_ctx = 512
	pplDefaultBatch  = 2048 // common_params.n_batch
	pplDefaultUbatch = 512  // common_params.n_ubatch
	// pplMinCtx is the smallest -c that scores a token: a chunk scores
	// c − 1 − c/2 of them.
	pplMinCtx = 3
)

// pplFlags are perplexity's flags.
type pplFlags struct {
	model, file, backend       string
	ctx, batch, ubatch, chunks int
	threads, tp                int
	exact, invariant, force    bool
	noRepack                   bool
	cache                      cacheFlags
	placement                  deviceFlags
	cacheType                  tensor.Type // parsed by check
}

// register defines the flags on fs, with llama-perplexity's names.
func (p *pplFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&p.model, "m", "", "model `FILE.gguf` (default: the bundled "+defaultModelRel+")")
	fs.StringVar(&p.model, "model", "", "same as -m `FILE.gguf`")
	fs.StringVar(&p.file, "f", "", "the text `FILE` to score (required; - for standard input)")
	fs.StringVar(&p.file, "file", "", "same as -f `FILE`")
	fs.IntVar(&p.ctx, "c", pplDefaultCtx, fmt.Sprintf("chunk size in `tokens` (llama-perplexity's n_ctx), >= %d", pplMinCtx))
	fs.IntVar(&p.ctx, "ctx-size", pplDefaultCtx, "same as -c `N`")
	fs.IntVar(&p.batch, "b", pplDefaultBatch, "logical batch size in `tokens`, as llama-perplexity's -b (chunks per batch: b/c)")
	fs.IntVar(&p.batch, "batch-size", pplDefaultBatch, "same as -b `N`")
	fs.IntVar(&p.ubatch, "ub", pplDefaultUbatch, "physical batch size in `tokens`: the most tokens in one forward pass (capped to -b)")
	fs.IntVar(&p.ubatch, "ubatch-size", pplDefaultUbatch, "same as -ub `N`")
	fs.IntVar(&p.chunks, "chunks", -1, "score at most `N` chunks (-1: all)")
	fs.IntVar(&p.threads, "t", 0, "worker `threads` per device (0: the physical cores; more than the CPUs is warned about)")
	fs.IntVar(&p.threads, "threads", 0, "same as -t `N`")
	fs.StringVar(&p.backend, "backend", "cpu", "compute `backend`: cpu or cuda")
	fs.IntVar(&p.tp, "tp", 1, "tensor parallelism: split the model over `N` devices")
	fs.BoolVar(&p.exact, "exact", false, "float32 activations in every matrix product (slower) instead of the fast quantized-activation kernels")
	fs.BoolVar(&p.invariant, "batch-invariant", false, batchInvariantUsage)
	fs.BoolVar(&p.noRepack, "no-repack", false, noRepackUsage)
	fs.BoolVar(&p.force, "force", false, forceUsage)
	p.cache.register(fs)
	p.placement.register(fs)
}

// check validates the flag values before anything is opened: a usage error
// naming the flag, or the warnings to print.
func (p *pplFlags) check() (warnings []string, err error) {
	switch {
	case p.file == "":
		return nil, usageErr("-f FILE is required: the text to compute the perplexity of")
	case p.ctx < pplMinCtx:
		return nil, usageErr("-c (--ctx-size) %d: want >= %d (a chunk of c tokens scores its last c-1-c/2)", p.ctx, pplMinCtx)
	case p.ctx > math.MaxInt32:
		return nil, usageErr("-c (--ctx-size) %d: want at most %d", p.ctx, math.MaxInt32)
	case p.batch < 1:
		return nil, usageErr("-b (--batch-size) %d: want >= 1", p.batch)
	case p.ubatch < 1:
		return nil, usageErr("-ub (--ubatch-size) %d: want >= 1", p.ubatch)
	case p.chunks == 0 || p.chunks < -1:
		return nil, usageErr("--chunks %d: want >= 1, or -1 for all", p.chunks)
	case p.tp < 1:
		return nil, usageErr("--tp %d: want >= 1", p.tp)
	}
	if err := checkDevices("-t (--threads)", p.threads, p.tp, p.backend, &warnings); err != nil {
		return nil, err
	}
	if err := p.placement.check(); err != nil {
		return nil, err
	}
	if p.cacheType, err = p.cache.parse(); err != nil {
		return nil, err
	}
	return warnings, nil
}

// pplPlan is how llama-perplexity cuts the tokens and batches the chunks.
type pplPlan struct {
	nCtx    int // tokens per chunk
	nBatch  int // the logical batch: min(-b, nSeq·nCtx)
	nUbatch int // the physical batch: min(-ub, nBatch)
	nSeq    int // chunks llama.cpp decodes together: max(1, -b / nCtx)
	nChunk  int // chunks scored
	first   int // the first position scored: nCtx/2
}

// newPPLPlan returns the plan for nTokens tokens and the checked flags.
func newPPLPlan(nTokens int, p *pplFlags) pplPlan {
	pl := pplPlan{nCtx: p.ctx, nSeq: max(1, p.batch/p.ctx), first: p.ctx / 2}
	pl.nBatch = min(p.batch, pl.nSeq*pl.nCtx)
	pl.nUbatch = min(p.ubatch, pl.nBatch)
	pl.nChunk = nTokens / pl.nCtx
	if p.chunks > 0 {
		pl.nChunk = min(pl.nChunk, p.chunks)
	}
	return pl
}

// scored returns the tokens a chunk scores.
func (pl pplPlan) scored() int { return pl.nCtx - 1 - pl.first }

// pplStats accumulates the per-token negative log-likelihoods as
// llama-perplexity does: their sum and the sum of their squares.
type pplStats struct {
	nll, nll2 float64
	count     int
}

func (st *pplStats) add(v float64) {
	st.nll += v
	st.nll2 += v * v
	st.count++
}

// ppl returns exp(mean NLL).
func (st *pplStats) ppl() float64 { return math.Exp(st.nll / float64(st.count)) }

// final returns the perplexity and llama-perplexity's error estimate,
// PPL·sqrt(var/(count−1)) with var = mean(v²) − mean(v)²; ok is false when
// var is not positive (llama.cpp then prints no estimate).
func (st *pplStats) final() (ppl, err float64, ok bool) {
	n := float64(st.count)
	mean, mean2 := st.nll/n, st.nll2/n
	ppl = math.Exp(mean)
	v := mean2 - mean*mean
	if !(v > 0) {
		return ppl, 0, false
	}
	return ppl, math.Sqrt(v/(n-1)) * ppl, true
}

// tokenNLL returns −log softmax(row)[tok] computed as llama-perplexity's
// log_softmax: the max and each exp(logit − max) in float32, their sum in
// float64, then (logit[tok] − max) − log(sum) in float64.
func tokenNLL(row []float32, tok int32) float64 {
	maxv := row[0]
	for _, v := range row[1:] {
		maxv = max(maxv, v)
	}
	var sum float64
	for _, v := range row {
		sum += float64(expf(v - maxv))
	}
	return -(float64(row[tok]-maxv) - math.Log(sum))
}

// expf is C's expf: exp rounded to float32.
func expf(x float32) float32 { return float32(math.Exp(float64(x))) }

// pplSession is what scoring a chunk needs of a sequence: a
// *model.Session (a fake in tests).
type pplSession interface {
	Reset()
	Prefill(tokens []int32) ([][]float32, error)
	PrefillLast(dst []float32, tokens []int32) ([]float32, error)
}

// scoreChunk runs chunk c of tokens through s from an empty cache and adds
// the NLLs of its second half to st. in is a buffer of nCtx tokens; bos is
// put first when addBOS. The chunk goes in llama.cpp's pieces (logical
// batches of nBatch tokens, physical ones of nUbatch); a piece wholly
// before the scored half runs without the output head on its rows.
func scoreChunk(s pplSession, pl pplPlan, tokens []int32, c int, addBOS bool, bos int32, in []int32, st *pplStats) error {
	start := c * pl.nCtx
	chunk := tokens[start : start+pl.nCtx]
	in = append(in[:0], chunk...)
	if addBOS {
		in[0] = bos
	}
	s.Reset()
	for b0 := 0; b0 < pl.nCtx; b0 += pl.nBatch {
		b1 := min(b0+pl.nBatch, pl.nCtx)
		for p0 := b0; p0 < b1; p0 += pl.nUbatch {
			p1 := min(p0+pl.nUbatch, b1)
			if p1 <= pl.first {
				if _, err := s.PrefillLast(nil, in[p0:p1]); err != nil {
					return err
				}
				continue
			}
			rows, err := s.Prefill(in[p0:p1])
			if err != nil {
				return err
			}
			for j := max(p0, pl.first); j < min(p1, pl.nCtx-1); j++ {
				st.add(tokenNLL(rows[j-p0], chunk[j+1]))
			}
		}
	}
	return nil
}

// cFloat formats v with %.{prec}f as C's printf does, NaN and infinities
// included ("nan", "-inf").
func cFloat(v float64, prec int) string {
	switch {
	case math.IsNaN(v) && math.Signbit(v):
		return "-nan"
	case math.IsNaN(v):
		return "nan"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	}
	return fmt.Sprintf("%.*f", prec, v)
}

// runPerplexity is "glmrun perplexity".
func runPerplexity(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("perplexity", stderr)
	var p pplFlags
	p.register(fs)
	fs.Usage = func() { fmt.Fprint(stderr, perplexityUsage); fs.PrintDefaults() }
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q (give the text with -f FILE)", errUsage, fs.Arg(0))
	}
	warnings, err := p.check()
	if err != nil {
		return err
	}
	printWarnings(stderr, "perplexity", warnings)

	// The text first: a missing or empty file fails before the model is
	// opened.
	b, err := readTextFile(p.file)
	if err != nil {
		return fmt.Errorf("-f: %w", err)
	}
	text := strings.TrimSuffix(string(b), "\n") // llama.cpp's -f drops one trailing newline
	if text == "" {
		return fmt.Errorf("-f %s: the file is empty: there is no text to score", p.file)
	}
	path, err := modelPath(p.model)
	if err != nil {
		return err
	}
	f, tok, err := openModelFile(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if tok.AddEOS() {
		// llama-perplexity asserts the same: an EOS at the end of the text
		// would be scored as if it were text.
		return fmt.Errorf("%s: the vocabulary adds EOS to every text (tokenizer.ggml.add_eos_token), which perplexity does not support", path)
	}

	fmt.Fprintf(stderr, "perplexity: tokenizing the input ..\n")
	t0 := time.Now()
	tokens := tok.Encode(text, true, false)
	fmt.Fprintf(stderr, "perplexity: tokenization took %.6g ms\n", float64(time.Since(t0).Microseconds())/1e3)
	if len(tokens) < 2*p.ctx {
		return fmt.Errorf("-f %s: the text tokenizes to only %d tokens; a context of %d (-c) needs at least %d",
			p.file, len(tokens), p.ctx, 2*p.ctx)
	}
	pl := newPPLPlan(len(tokens), &p)
	if n := pl.nChunk * pl.scored(); n < 2 {
		// Only with --chunks 1 and -c 3 or 4: no error estimate from one
		// token.
		return fmt.Errorf("%d chunk(s) of %d tokens (-c, --chunks) score %d token(s): want at least 2 for an error estimate",
			pl.nChunk, pl.nCtx, n)
	}

	m, err := model.New(f, model.Options{Threads: p.threads, TensorParallel: p.tp, CPUMoE: p.placement.all, NCPUMoE: p.placement.n, Collectives: p.placement.collectives, Backend: p.backend, Fast: !p.exact,
		BatchInvariant: p.invariant, NoRepack: p.noRepack, AllowUnknownKeys: p.force})
	if err != nil {
		return err
	}
	defer m.Close()
	printWarnings(stderr, "perplexity", m.Warnings())
	s, err := m.NewSession(model.SessionOptions{ContextSize: pl.nCtx, CacheType: p.cacheType})
	if err != nil {
		return fmt.Errorf("-c %d: %w", pl.nCtx, err)
	}
	defer s.Close()

	fmt.Fprintf(stderr, "perplexity: calculating perplexity over %d chunks, n_ctx=%d, batch_size=%d, n_seq=%d\n",
		pl.nChunk, pl.nCtx, pl.nBatch, pl.nSeq)
	var st pplStats
	in := make([]int32, pl.nCtx)
	for c := range pl.nChunk {
		t0 := time.Now()
		if err := scoreChunk(s, pl, tokens, c, tok.AddBOS(), tok.BOS(), in, &st); err != nil {
			return fmt.Errorf("chunk %d: %w", c+1, err)
		}
		if c == 0 {
			// llama.cpp times its first pass (n_seq chunks); glmrun's is
			// one chunk. The ETA's head is LOG_INF (stderr), its tail LOG
			// (stdout).
			sec := time.Since(t0).Seconds()
			fmt.Fprintf(stderr, "perplexity: %.2f seconds per pass - ETA ", sec)
			total := int(sec * float64(pl.nChunk))
			if total >= 60*60 {
				fmt.Fprintf(stdout, "%d hours ", total/(60*60))
				total %= 60 * 60
			}
			fmt.Fprintf(stdout, "%.2f minutes\n", float64(total)/60)
		}
		fmt.Fprintf(stdout, "[%d]%s,", c+1, cFloat(st.ppl(), 4))
	}
	fmt.Fprintln(stdout)
	ppl, e, ok := st.final()
	if !ok {
		return fmt.Errorf("unexpected negative standard deviation of log(prob) over %d tokens (PPL = %s): no error estimate", st.count, cFloat(ppl, 4))
	}
	fmt.Fprintf(stderr, "Final estimate: PPL = %s +/- %s\n", cFloat(ppl, 4), cFloat(e, 5))
	fmt.Fprintln(stdout) // llama-perplexity's main ends its output with an empty line
	return nil
}
