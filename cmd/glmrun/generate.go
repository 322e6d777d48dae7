package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/glmrun/glmrun"
	"github.com/glmrun/glmrun/attention"
	"github.com/glmrun/glmrun/internal/units"
	"github.com/glmrun/glmrun/model/grammar"
)

// defaultMaxTokens is -n's default. llama.cpp's is -1 (until the end of
// generation or a full context); a finite default keeps a run on the
// bundled random-weights model short.
const defaultMaxTokens = 128

// genFlags are the flags shared by generation and chat: model, runtime
// and sampling.
type genFlags struct {
	specMTP      int
	model        string
	threads      int
	ctxSize      int
	backend      string
	tp           int
	n            int
	temp         float64
	topK         int
	topP         float64
	minP         float64
	repeatPen    float64
	repeatLastN  int
	presencePen  float64
	frequencyPen float64
	seed         int64
	stops        stringList
	bias         stringList
	ignoreEOS    bool
	special      bool
	logprobs     int
	exact        bool
	invariant    bool
	noRepack     bool
	force        bool
	cache        cacheFlags
	placement    deviceFlags

	// The constraint flags (generate only): GBNF text or file, JSON
	// schema text or file; check compiles the one given into grammar.
	grammarText, grammarFile, schemaText, schemaFile string
	grammar                                          *grammar.Grammar
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ", ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// register defines the shared flags on fs.
func (g *genFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&g.model, "m", "", "model `FILE.gguf`; the first shard of a split model (default: the bundled "+defaultModelRel+")")
	fs.StringVar(&g.model, "model", "", "same as -m `FILE.gguf`")
	fs.IntVar(&g.threads, "t", 0, "worker `threads` per device (0: the physical cores; more than the CPUs is warned about)")
	fs.IntVar(&g.threads, "threads", 0, "same as -t `N`")
	fs.IntVar(&g.ctxSize, "c", 0, "context size in `tokens`, prompt and reply: the KV cache is allocated for this many at start (0: the model's training context, lowered to what fits in 3/4 of the memory available; more than the training context only as far as the model's RoPE scaling extends it)")
	fs.IntVar(&g.ctxSize, "ctx-size", 0, "same as -c `N`")
	g.cache.register(fs)
	g.placement.register(fs)
	fs.StringVar(&g.backend, "backend", "cpu", "compute `backend`: cpu or cuda (NVIDIA GPUs through libcuda.so.1)")
	fs.IntVar(&g.tp, "tp", 1, "tensor parallelism: split attention heads and experts over `N` devices (on the cpu backend virtual ones, each with -t workers)")
	fs.IntVar(&g.n, "n", defaultMaxTokens, "the most `tokens` to generate (-1: until the end of generation or a full context)")
	fs.IntVar(&g.n, "n-predict", defaultMaxTokens, "same as -n `N`")
	fs.Float64Var(&g.temp, "temp", 0.8, "sampling `temperature`, >= 0 (0: greedy)")
	fs.IntVar(&g.topK, "top-k", 40, "keep the `K` most likely tokens (0 or -1: off)")
	fs.Float64Var(&g.topP, "top-p", 0.95, "keep the most likely tokens up to cumulative probability `P`, 0 < P <= 1 (1: off)")
	fs.Float64Var(&g.minP, "min-p", 0.05, "keep tokens at least `P` times as likely as the best, 0 <= P <= 1 (0: off)")
	fs.Float64Var(&g.repeatPen, "repeat-penalty", 1, "divide the positive logits of recent tokens by `X` and multiply the negative ones, X > 0 (1: off)")
	fs.IntVar(&g.repeatLastN, "repeat-last-n", 64, "the penalties look at the last `N` tokens (0: off, -1: the whole context)")
	fs.Float64Var(&g.presencePen, "presence-penalty", 0, "subtract `X` from the logits of recent tokens, -2 <= X <= 2 (0: off; negative: favour them)")
	fs.Float64Var(&g.frequencyPen, "frequency-penalty", 0, "subtract `X` per occurrence from the logits of recent tokens, -2 <= X <= 2 (0: off)")
	fs.Int64Var(&g.seed, "seed", -1, "random `seed` (-1: pick one and print it to stderr)")
	fs.Int64Var(&g.seed, "s", -1, "same as --seed `N`")
	fs.Var(&g.stops, "stop", "stop when the text contains `STRING` (not printed; repeatable)")
	fs.Var(&g.bias, "logit-bias", "add BIAS to token ID's logit, written `ID+BIAS` or ID-BIAS (ID-inf bans it; repeatable)")
	fs.BoolVar(&g.ignoreEOS, "ignore-eos", false, "keep generating after end-of-generation tokens")
	fs.BoolVar(&g.special, "special", false, "print control tokens (<|user|>, ...) as their text")
	fs.BoolVar(&g.exact, "exact", false, "float32 activations in every matrix product (the path of the deq-F32 references; slower) instead of the fast quantized-activation kernels")
	fs.BoolVar(&g.invariant, "batch-invariant", false, batchInvariantUsage)
	fs.BoolVar(&g.noRepack, "no-repack", false, noRepackUsage)
	fs.BoolVar(&g.force, "force", false, forceUsage)
	fs.IntVar(&g.specMTP, "spec-mtp", 0, specMTPUsage)
	fs.IntVar(&g.logprobs, "logprobs", 0, "print one JSON line per token with its log-probability and the `N` most likely alternatives, instead of plain text")
}

// check validates every flag value before anything is loaded or printed,
// with llama.cpp's ranges where it has them (and an error where llama.cpp
// clamps or ignores a value that can only be a mistake). It returns the
// warnings to print (threads beyond the CPUs) or a usage error naming the
// flag. The sampling ranges:
//
//	--temp >= 0 (0: greedy; llama.cpp clamps a negative one to 0)
//	--top-k >= -1 (0 or -1: off, as the server's top_k)
//	--top-p in (0, 1] (1: off; llama.cpp ignores a P above 1, and
//	  P = 0 would mean "off" here but "the best token only" there)
//	--min-p in [0, 1] (0: off)
//	--repeat-penalty > 0 (1: off; 0 would divide by zero)
//	--presence-penalty, --frequency-penalty in [-2, 2] (OpenAI's range;
//	  negative ones favour repeats, as in llama.cpp)
//	--repeat-last-n >= -1 (llama.cpp's range: 0 off, -1 the whole context)
//
// and every number finite as a float32.
func (g *genFlags) check() (warnings []string, err error) {
	if err := checkDevices("-t (--threads)", g.threads, g.tp, g.backend, &warnings); err != nil {
		return nil, err
	}
	if err := g.placement.check(); err != nil {
		return nil, err
	}
	if _, err := g.cache.parse(); err != nil {
		return nil, err
	}
	temp, topP, minP, rep := float32(g.temp), float32(g.topP), float32(g.minP), float32(g.repeatPen)
	switch {
	case g.ctxSize < 0:
		return nil, usageErr("-c (--ctx-size) %d: want >= 0 (0: the default)", g.ctxSize)
	case g.tp < 1:
		return nil, usageErr("--tp %d: want >= 1", g.tp)
	case g.n < -1:
		return nil, usageErr("-n %d: want >= 0, or -1 for no limit", g.n)
	case g.specMTP < 0 || g.specMTP > maxSpecDraft:
		return nil, usageErr("--spec-mtp %d: want 0 (off) to %d drafted tokens", g.specMTP, maxSpecDraft)
	case !finite32(g.temp) || temp < 0:
		return nil, usageErr("--temp %g: want a number >= 0 (0: greedy)", g.temp)
	case g.topK < -1:
		return nil, usageErr("--top-k %d: want >= 0 (0 or -1: off)", g.topK)
	case !(topP > 0 && topP <= 1):
		return nil, usageErr("--top-p %g: want 0 < P <= 1 (1: off)", g.topP)
	case !(minP >= 0 && minP <= 1):
		return nil, usageErr("--min-p %g: want 0 <= P <= 1 (0: off)", g.minP)
	case !finite32(g.repeatPen) || !(rep > 0):
		return nil, usageErr("--repeat-penalty %g: want a number > 0 (1: off)", g.repeatPen)
	case g.repeatLastN < -1:
		return nil, usageErr("--repeat-last-n %d: want >= 0 (0: off), or -1 for the whole context", g.repeatLastN)
	case !(g.presencePen >= -2 && g.presencePen <= 2):
		return nil, usageErr("--presence-penalty %g: want -2 <= X <= 2 (0: off)", g.presencePen)
	case !(g.frequencyPen >= -2 && g.frequencyPen <= 2):
		return nil, usageErr("--frequency-penalty %g: want -2 <= X <= 2 (0: off)", g.frequencyPen)
	case g.seed < -1:
		return nil, usageErr("--seed %d: want >= 0, or -1 for a random one", g.seed)
	case g.logprobs < 0:
		return nil, usageErr("--logprobs %d: want >= 0 (0: plain text)", g.logprobs)
	}
	for _, s := range g.stops {
		if s == "" {
			return nil, usageErr("--stop \"\": want a non-empty string")
		}
	}
	if _, err := g.logitBias(); err != nil {
		return nil, err
	}
	if err := g.compileGrammar(); err != nil {
		return nil, err
	}
	return warnings, nil
}

// compileGrammar reads the constraint flag given (at most one) into
// g.grammar: a usage error names the flag and what is wrong with it.
func (g *genFlags) compileGrammar() error {
	var src, flag string
	n := 0
	for _, c := range []struct {
		flag, val  string
		file, json bool
	}{
		{"--grammar", g.grammarText, false, false}, {"--grammar-file", g.grammarFile, true, false},
		{"--json-schema", g.schemaText, false, true}, {"--json-schema-file", g.schemaFile, true, true},
	} {
		if c.val == "" {
			continue
		}
		n++
		flag, src = c.flag, c.val
		if c.file {
			b, err := readTextFile(c.val)
			if err != nil {
				return usageErr("%s: %v", c.flag, err)
			}
			src = string(b)
		}
		if c.json {
			gb, err := grammar.SchemaGrammar([]byte(src))
			if err != nil {
				return usageErr("%s: %v", c.flag, err)
			}
			src = gb
		}
	}
	if n == 0 {
		return nil
	}
	if n > 1 {
		return usageErr("--grammar, --grammar-file, --json-schema and --json-schema-file: give one")
	}
	gr, err := grammar.Parse(src)
	if err != nil {
		return usageErr("%s: %v", flag, err)
	}
	g.grammar = gr
	return nil
}

var biasRE = regexp.MustCompile(`^(\d+)([+-])(inf|[0-9.]+(?:[eE][+-]?\d+)?)$`)

// logitBias parses the --logit-bias flags.
func (g *genFlags) logitBias() (map[int32]float32, error) {
	if len(g.bias) == 0 {
		return nil, nil
	}
	m := make(map[int32]float32, len(g.bias))
	for _, b := range g.bias {
		sub := biasRE.FindStringSubmatch(b)
		if sub == nil {
			return nil, fmt.Errorf("%w: --logit-bias %q: want ID+BIAS or ID-BIAS (e.g. 15+2.5, 956-inf)", errUsage, b)
		}
		id, err := strconv.ParseInt(sub[1], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%w: --logit-bias %q: %v", errUsage, b, err)
		}
		v := math.Inf(1)
		if sub[3] == "inf" && sub[2] == "+" {
			// +Inf would make every other token impossible and the
			// probabilities NaN; forcing a token is not what a bias is for.
			return nil, usageErr("--logit-bias %q: +inf is not a bias (ID-inf bans a token; a large finite bias favours one)", b)
		}
		if sub[3] != "inf" {
			if v, err = strconv.ParseFloat(sub[3], 32); err != nil {
				return nil, fmt.Errorf("%w: --logit-bias %q: %v", errUsage, b, err)
			}
		}
		if sub[2] == "-" {
			v = -v
		}
		m[int32(id)] += float32(v)
	}
	return m, nil
}

// options builds the generation options; a negative seed is replaced by a
// random one, printed to stderr.
func (g *genFlags) options(stderr io.Writer) (glmrun.GenerateOptions, error) {
	bias, err := g.logitBias()
	if err != nil {
		return glmrun.GenerateOptions{}, err
	}
	seed := uint64(g.seed)
	if g.seed < 0 {
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			return glmrun.GenerateOptions{}, fmt.Errorf("random seed: %w", err)
		}
		seed = uint64(binary.LittleEndian.Uint32(b[:]))
		fmt.Fprintf(stderr, "glmrun: seed = %d\n", seed)
	}
	o := glmrun.GenerateOptions{
		SampleOptions: glmrun.SampleOptions{
			Temperature:      float32(g.temp),
			TopK:             g.topK,
			TopP:             float32(g.topP),
			MinP:             float32(g.minP),
			RepeatPenalty:    float32(g.repeatPen),
			PresencePenalty:  float32(g.presencePen),
			FrequencyPenalty: float32(g.frequencyPen),
			PenaltyLastN:     g.repeatLastN,
			LogitBias:        bias,
			Seed:             seed,
		},
		MaxTokens:   max(g.n, 0),
		Stop:        g.stops,
		IgnoreEOS:   g.ignoreEOS,
		Special:     g.special,
		Logprobs:    g.logprobs > 0,
		TopLogprobs: g.logprobs,
		// Plain text goes to a terminal byte for byte, as llama-cli prints
		// it (a byte-level token that is half a character shows as the
		// terminal shows it); --logprobs' JSON lines need valid UTF-8.
		RawBytes: g.logprobs == 0,
		Grammar:  g.grammar,
	}
	return o, nil
}

// load loads the model (the bundled one without -m), showing progress on
// stderr for a big model or a terminal, and opens a session.
func (g *genFlags) load(stderr io.Writer, cmd string) (*glmrun.Model, *glmrun.Session, error) {
	path, err := modelPath(g.model)
	if err != nil {
		return nil, nil, err
	}
	opts := glmrun.Options{Threads: g.threads, Backend: g.backend, TensorParallel: g.tp, CPUMoE: g.placement.all, NCPUMoE: g.placement.n, Collectives: g.placement.collectives, Exact: g.exact, BatchInvariant: g.invariant, NoRepack: g.noRepack,
		AllowUnknownKeys: g.force, SpecDraft: g.specMTP, CacheType: g.cache.k}
	if g.tp == 1 {
		opts.TensorParallel = 0
	}
	opts.Progress = progressFor(path, stderr)
	m, err := glmrun.Load(path, opts)
	if err != nil {
		return nil, nil, err
	}
	printWarnings(stderr, cmd, m.Warnings())
	printRepacked(stderr, "glmrun", m.RepackedBytes())
	s, err := m.NewSession(glmrun.SessionOptions{ContextSize: g.ctxSize}) // 0: the library's default
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	if g.ctxSize == 0 {
		if _, note := m.FitContext(); note != "" {
			fmt.Fprintf(stderr, "glmrun: %s\n", note)
		}
	}
	n, b := s.ContextSize(), s.CacheBytes()
	fmt.Fprintf(stderr, "glmrun: KV cache = %s for %d tokens (%s per token, %s)\n", units.Bytes(b), n, units.Bytes(b/int64(n)),
		attention.CacheTypeName(m.CacheType()))
	return m, s, nil
}

const generateUsage = `usage: glmrun [generate] [-m MODEL.gguf] (-p PROMPT | -f FILE) [flags]

Generates a continuation of PROMPT and streams it to stdout (after the
prompt itself, unless --no-display-prompt); timings go to stderr at the
end, as llama-cli does. Without -m, the bundled tiny GLM-5-shaped model
(random weights: it shows the pipeline working, its text is gibberish) is
used. Special tokens written in the prompt ([gMASK], <|user|>) are parsed;
BOS is added if the model asks for it. --temp 0 decodes greedily.
Generation ends at an end-of-generation token, a --stop string, -n tokens
or a full context; Ctrl-C stops it early (the timings are printed and the
exit status is 0; a second Ctrl-C exits at once with 130). Every flag
value is checked before the model is loaded (a bad one: exit 2).

flags:
`

// newGenerateFlags returns generate's flag set.
func newGenerateFlags(stderr io.Writer) (*flag.FlagSet, *genFlags, *string, *string, *bool) {
	fs := newFlagSet("generate", stderr)
	g := &genFlags{}
	g.register(fs)
	prompt := fs.String("p", "", "the `PROMPT` text")
	fs.StringVar(prompt, "prompt", "", "same as -p `PROMPT`")
	file := fs.String("f", "", "read the prompt from `FILE` (- for standard input)")
	fs.StringVar(file, "file", "", "same as -f `FILE`")
	noDisplay := fs.Bool("no-display-prompt", false, "print only the generated text, not the prompt before it")
	fs.StringVar(&g.grammarText, "grammar", "", "limit the text to the sentences of a GBNF `GRAMMAR` (llama.cpp's notation; <[ID]> names a token)")
	fs.StringVar(&g.grammarFile, "grammar-file", "", "read the --grammar from `FILE`")
	fs.StringVar(&g.schemaText, "json-schema", "", "limit the text to JSON valid under a JSON `SCHEMA` (the subset the server's response_format takes)")
	fs.StringVar(&g.schemaText, "j", "", "same as --json-schema `SCHEMA`")
	fs.StringVar(&g.schemaFile, "json-schema-file", "", "read the --json-schema from `FILE`")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), generateUsage)
		fs.PrintDefaults()
	}
	return fs, g, prompt, file, noDisplay
}

// runGenerate generates text from a prompt: glmrun's default command.
func runGenerate(args []string, stdout, stderr io.Writer) error {
	fs, g, prompt, file, noDisplay := newGenerateFlags(stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q (give the prompt with -p)", errUsage, fs.Arg(0))
	}
	warnings, err := g.check()
	if err != nil {
		return err
	}
	text := *prompt
	switch {
	case *prompt != "" && *file != "":
		return fmt.Errorf("%w: give the prompt with -p or -f, not both", errUsage)
	case *file != "":
		b, err := readTextFile(*file)
		if err != nil {
			return err
		}
		text = string(b)
	case *prompt == "":
		return fmt.Errorf("%w: no prompt: give -p TEXT or -f FILE", errUsage)
	}
	printWarnings(stderr, "generate", warnings)
	opts, err := g.options(stderr)
	if err != nil {
		return err
	}
	// Loading checks what only the file knows (-c against the training
	// context, --tp against the heads): its errors come before the prompt
	// is printed.
	m, s, err := g.load(stderr, "generate")
	if err != nil {
		return err
	}
	defer m.Close()
	if err := s.Prompt(text); err != nil {
		return err
	}
	ctx, stop := interruptible(context.Background())
	defer stop()

	start := time.Now()
	out := newFlushWriter(stdout)
	if g.logprobs == 0 && !*noDisplay {
		out.WriteString(text)
		out.Flush()
	}
	var genErr error
	if g.n != 0 {
		genErr = streamTokens(out, m, s.Generate(ctx, opts), g.logprobs)
	}
	if g.logprobs == 0 {
		out.WriteString("\n")
	}
	if err := out.Flush(); err != nil {
		return err
	}
	stop() // a Ctrl-C from here on ends the process as usual
	printTimings(stderr, m, s.Stats(), time.Since(start))
	if interrupted(ctx, genErr) {
		// Stopped as asked: the timings say "stopped: interrupted".
		return nil
	}
	return genErr
}

// printWarnings prints check's warnings, one line each.
func printWarnings(w io.Writer, name string, warnings []string) {
	for _, msg := range warnings {
		fmt.Fprintf(w, "glmrun %s: warning: %s\n", name, msg)
	}
}

// streamTokens writes each token's text as it comes, or with logprobs a
// JSON line per token.
func streamTokens(out *flushWriter, m *glmrun.Model, seq func(func(glmrun.Token, error) bool), logprobs int) error {
	tok := m.Tokenizer()
	for t, err := range seq {
		if err != nil {
			return err
		}
		if logprobs == 0 {
			out.WriteString(t.Text)
		} else {
			line := logprobLine{ID: t.ID, Piece: tok.Piece(t.ID, true), Text: t.Text, Logprob: t.Logprob, Stop: string(t.Stop)}
			for _, a := range t.Top {
				line.Top = append(line.Top, logprobAlt{ID: a.ID, Piece: tok.Piece(a.ID, true), Logprob: a.Logprob})
			}
			b, err := json.Marshal(line)
			if err != nil {
				return err
			}
			out.Write(append(b, '\n'))
		}
		if err := out.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// logprobLine is one --logprobs output line.
type logprobLine struct {
	ID      int32        `json:"id"`
	Piece   string       `json:"piece"` // the token's bytes (as valid UTF-8 where they are not)
	Text    string       `json:"text"`  // what plain output prints for it
	Logprob float64      `json:"logprob"`
	Top     []logprobAlt `json:"top"`
	Stop    string       `json:"stop,omitempty"`
}

type logprobAlt struct {
	ID      int32   `json:"id"`
	Piece   string  `json:"piece"`
	Logprob float64 `json:"logprob"`
}

// printTimings writes llama.cpp-style performance lines.
func printTimings(w io.Writer, m *glmrun.Model, st glmrun.Stats, total time.Duration) {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	rate := func(n int, d time.Duration) string {
		if n == 0 || d <= 0 {
			return ""
		}
		return fmt.Sprintf(" (%8.2f ms per token, %8.2f tokens per second)", ms(d)/float64(n), float64(n)/d.Seconds())
	}
	fmt.Fprintf(w, "\nglmrun: load time        = %10.2f ms\n", ms(m.LoadTime()))
	fmt.Fprintf(w, "glmrun: prompt eval time = %10.2f ms / %5d tokens%s\n", ms(st.PromptTime), st.PromptTokens, rate(st.PromptTokens, st.PromptTime))
	fmt.Fprintf(w, "glmrun:        eval time = %10.2f ms / %5d runs  %s\n", ms(st.EvalTime), st.EvalTokens, rate(st.EvalTokens, st.EvalTime))
	fmt.Fprintf(w, "glmrun:       total time = %10.2f ms / %5d tokens\n", ms(total+m.LoadTime()), st.PromptTokens+st.Generated)
	if st.Drafted > 0 {
		fmt.Fprintf(w, "glmrun: speculative: %d of %d drafted tokens accepted (%.1f%%)\n", st.Accepted, st.Drafted,
			100*float64(st.Accepted)/float64(st.Drafted))
	}
	if st.Stop != glmrun.StopNone {
		fmt.Fprintf(w, "glmrun: stopped: %s after %d tokens\n", stopWords[st.Stop], st.Generated)
	}
}

var stopWords = map[glmrun.StopReason]string{
	glmrun.StopEOG:      "end-of-generation token",
	glmrun.StopString:   "stop string",
	glmrun.StopLength:   "token limit (-n)",
	glmrun.StopContext:  "context full (-c)",
	glmrun.StopCanceled: "interrupted",
	glmrun.StopBreak:    "interrupted",
	glmrun.StopGrammar:  "the grammar is complete",
}

// flushWriter buffers writes to stdout and flushes them per token, so text
// streams without a system call per byte; it remembers the first error.
type flushWriter struct {
	w   *bufio.Writer
	err error
}

func newFlushWriter(w io.Writer) *flushWriter { return &flushWriter{w: bufio.NewWriter(w)} }

func (f *flushWriter) WriteString(s string) {
	if f.err == nil {
		_, f.err = f.w.WriteString(s)
	}
}

func (f *flushWriter) Write(b []byte) {
	if f.err == nil {
		_, f.err = f.w.Write(b)
	}
}

func (f *flushWriter) Flush() error {
	if f.err == nil {
		f.err = f.w.Flush()
	}
	return f.err
}

// bigModel is the file size from which loading shows progress even when
// stderr is not a terminal.
const bigModel = 1 << 30

// progressFor returns a Progress callback for loading the model at path,
// or nil when the model is small and stderr is not a terminal, or when the
// model is larger than most of the machine's memory (reading it all in
// at load would only push itself out again).
func progressFor(path string, stderr io.Writer) func(done, total int64) {
	size := modelSize(path)
	tty := isTerminal(stderr)
	if !tty && size < bigModel {
		return nil
	}
	if mem := memTotal(); mem > 0 && size > mem/10*8 {
		return nil
	}
	lastPct := -1
	return func(done, total int64) {
		if total <= 0 {
			return
		}
		pct := int(done * 100 / total)
		if pct == lastPct || (!tty && lastPct >= 0 && pct/10 == lastPct/10 && pct != 100) {
			return
		}
		lastPct = pct
		line := fmt.Sprintf("glmrun: loading %s: %3d%% (%.2f / %.2f GiB)", path, pct, float64(done)/(1<<30), float64(total)/(1<<30))
		switch {
		case tty && pct < 100:
			fmt.Fprint(stderr, "\r"+line)
		case tty:
			fmt.Fprintln(stderr, "\r"+line)
		default:
			fmt.Fprintln(stderr, line)
		}
	}
}

var splitRE = regexp.MustCompile(`-(\d{5})-of-(\d{5})\.gguf$`)

// modelSize estimates the bytes of the model at path: the file, times the
// shard count for a split model. 0 if unknown.
func modelSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	if m := splitRE.FindStringSubmatch(path); m != nil {
		if n, err := strconv.Atoi(m[2]); err == nil && n > 0 {
			return fi.Size() * int64(n)
		}
	}
	return fi.Size()
}

// memTotal returns the machine's memory in bytes from /proc/meminfo, or 0.
func memTotal() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return kb << 10
				}
			}
		}
	}
	return 0
}
