package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/glmrun/glmrun"
	"github.com/glmrun/glmrun/attention"
	"github.com/glmrun/glmrun/backend/cpu"
	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/internal/units"
	"github.com/glmrun/glmrun/model"
)

const benchUsage = `usage: glmrun bench [-m MODEL.gguf] [-p N] [-n N] [-d N[,N...]] [-t N] [-r N] [--json]

Measures prompt processing (pp: one batch of -p random tokens from an empty
context, logits of the last one only) and text generation (tg: -n tokens
decoded one at a time from an empty context), in tokens per second, mean ±
standard deviation over -r repetitions after one warm-up run, as
llama-bench does. The weights are used straight from the file's memory
map, or, for the types the CPU has packed kernels for, from the copy in
interleaved rows made as the model loads (llama-bench's -rtr; --no-repack
keeps the file's layout). Every page of the file is touched once before
the model loads (llama-bench's
mmap is populated when it loads), so that no test pays for the first
touch of weights it happens to be the first to use (a MoE model's
experts); the KV cache is allocated for -d + -p + -n positions. With -d N
(llama-bench's depth) both tests start after N random tokens already in the
context instead (prefilled once, not timed, and kept: each repetition cuts
the cache back to them), as "pp512 @ d8192"; several depths run one after
the other in increasing order, the context extended from one to the next.
Prints a table, or with --json one JSON object (a list of one object per
depth for several depths).

With --spec-mtp K[,K...] it also measures speculative decoding with the
model's MTP block: the time of one verification pass of K+1 tokens against
one decode step (on any model: the ceiling of the gain for an acceptance),
and, on a model with an MTP block, -n tokens generated through the library
from a chat prompt (--spec-prompt), without speculation and with each K:
tokens per second, the share of drafts accepted and the drafts kept per
pass.

flags:
`

// benchResult is what bench prints with --json.
type benchResult struct {
	Model         string       `json:"model"`
	ModelBytes    int64        `json:"model_bytes"`
	Backend       string       `json:"backend"`
	Path          string       `json:"path"` // "fast", "fast-invariant" (--batch-invariant) or "exact"
	Threads       int          `json:"threads"`
	TypeK         string       `json:"type_k"` // KV cache type (-ctk), llama-bench's field
	CacheBytes    int64        `json:"kv_cache_bytes"`
	TP            int          `json:"tp"`
	Reps          int          `json:"reps"`
	NPrompt       int          `json:"n_prompt"`
	NGen          int          `json:"n_gen"`
	NDepth        int          `json:"n_depth"` // tokens in the context before each test, llama-bench's field
	Depth         int          `json:"depth"`   // the same, under the name scripts that compare depths read
	SpecK         []int        `json:"spec_k,omitempty"`
	SpecVerify    []float64    `json:"spec_verify_per_step,omitempty"` // pass of K+1 tokens / one decode step
	SpecGen       []specResult `json:"spec_generate,omitempty"`
	PPTokensPerS  float64      `json:"pp_tokens_per_s"`
	PPStddev      float64      `json:"pp_stddev"`
	TGTokensPerS  float64      `json:"tg_tokens_per_s"`
	TGStddev      float64      `json:"tg_stddev"`
	PPPerCPUSec   float64      `json:"pp_tokens_per_cpu_s"` // tokens per second of process CPU time
	TGPerCPUSec   float64      `json:"tg_tokens_per_cpu_s"`
	LoadAverage   float64      `json:"load_average"` // 1-minute load average at the end (other processes)
	PPSamples     []float64    `json:"pp_samples"`
	TGSamples     []float64    `json:"tg_samples"`
	PeakRSSBytes  int64        `json:"peak_rss_bytes"`
	LoadSeconds   float64      `json:"load_seconds"`
	RepackedBytes int64        `json:"repacked_bytes"` // weights rewritten into the CPU's packed layout (0 with --no-repack)
	GOMAXPROCS    int          `json:"gomaxprocs"`
	PhysicalCores int          `json:"default_threads"`
}

// benchFlags are the values of bench's flags that check validates.
type benchFlags struct {
	nPrompt, nGen, threads, reps, tp int
	depths                           []int
	backend                          string
}

// check validates bench's flags before the model is loaded: a usage error
// naming the flag, or the warnings to print. -p + -n is the KV cache, which
// the model's training context bounds; that is checked at load.
func (bf benchFlags) check() (warnings []string, err error) {
	switch {
	case bf.nPrompt < 0 || bf.nGen < 0 || bf.nPrompt+bf.nGen == 0:
		return nil, usageErr("-p %d -n %d: want >= 0, not both 0", bf.nPrompt, bf.nGen)
	case bf.nPrompt > math.MaxInt32 || bf.nGen > math.MaxInt32:
		// Their sum is the context; an overflow must not reach the
		// allocations.
		return nil, usageErr("-p %d -n %d: want at most %d each", bf.nPrompt, bf.nGen, math.MaxInt32)
	case bf.reps < 1:
		return nil, usageErr("-r %d: want >= 1", bf.reps)
	case bf.tp < 1:
		return nil, usageErr("--tp %d: want >= 1", bf.tp)
	}
	if err := checkDevices("-t", bf.threads, bf.tp, bf.backend, &warnings); err != nil {
		return nil, err
	}
	return warnings, nil
}

// runBench is "glmrun bench".
func runBench(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench", stderr)
	fs.Usage = func() { fmt.Fprint(stderr, benchUsage); fs.PrintDefaults() }
	modelFlag := fs.String("m", "", "model `FILE.gguf` (default: the bundled "+defaultModelRel+")")
	nPrompt := fs.Int("p", 512, "prompt `tokens` (0: no pp test)")
	nGen := fs.Int("n", 128, "generated `tokens` (0: no tg test)")
	depthList := fs.String("d", "0", "`tokens[,tokens...]` already in the context before each test (llama-bench's depth)")
	threads := fs.Int("t", 0, "worker `threads` per device (0: the physical cores)")
	reps := fs.Int("r", 3, "`repetitions` of each test")
	tp := fs.Int("tp", 1, "tensor parallelism over `N` devices")
	backendName := fs.String("backend", "cpu", "compute `backend`")
	exact := fs.Bool("exact", false, "float32 activations (the exact path) instead of the fast kernels")
	invariant := fs.Bool("batch-invariant", false, batchInvariantUsage)
	noRepack := fs.Bool("no-repack", false, noRepackUsage)
	force := fs.Bool("force", false, forceUsage)
	var cache cacheFlags
	cache.register(fs)
	var placement deviceFlags
	placement.register(fs)
	asJSON := fs.Bool("json", false, "print one JSON object")
	seed := fs.Uint64("seed", 1, "random `seed` of the prompt tokens")
	specList := fs.String("spec-mtp", "", "also measure speculative decoding with the MTP block, drafting `K[,K...]` tokens")
	specPrompt := fs.String("spec-prompt", specBenchPrompt, "the user `message` --spec-mtp generates a reply to (chat template, thinking on)")
	specTemp := fs.Float64("temp", 0, "sampling `temperature` of the --spec-mtp generations (0: greedy)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the measured runs to `FILE` (go tool pprof)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	depths, err := parseDepths(*depthList)
	if err != nil {
		return err
	}
	warnings, err := benchFlags{nPrompt: *nPrompt, nGen: *nGen, depths: depths, threads: *threads, reps: *reps, tp: *tp, backend: *backendName}.check()
	if err != nil {
		return err
	}
	printWarnings(stderr, "bench", warnings)
	if err := placement.check(); err != nil {
		return err
	}
	cacheType, err := cache.parse()
	if err != nil {
		return err
	}
	ks, err := parseDraftList(*specList)
	if err != nil {
		return err
	}
	if len(ks) > 0 && len(depths) > 1 {
		return usageErr("--spec-mtp with %d depths (-d %s): want one", len(depths), *depthList)
	}
	maxDepth := depths[len(depths)-1]
	if !(*specTemp >= 0 && *specTemp < 100) {
		return usageErr("--temp %g: want a number >= 0 (0: greedy)", *specTemp)
	}
	path, err := modelPath(*modelFlag)
	if err != nil {
		return err
	}
	// The profile is written after the load and the warm-up: a path that
	// cannot be created should fail before them.
	var pf *os.File
	if *cpuProfile != "" {
		if pf, err = os.Create(*cpuProfile); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pf.Close()
	}
	f, err := gguf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	// The weights, once: page them in before the model loads, so that the
	// pages of those it repacks leave the resident set with the copy.
	pageIn(f)
	start := time.Now()
	m, err := model.New(f, model.Options{Threads: *threads, TensorParallel: *tp, CPUMoE: placement.all, NCPUMoE: placement.n, Collectives: placement.collectives, Backend: *backendName, Fast: !*exact,
		BatchInvariant: *invariant, NoRepack: *noRepack, AllowUnknownKeys: *force})
	if err != nil {
		return err
	}
	printWarnings(stderr, "bench", m.Warnings())
	defer m.Close()
	res := benchResult{
		Model: filepath.Base(path), Backend: *backendName, Path: "fast", Threads: *threads, TP: *tp, TypeK: attention.CacheTypeName(cacheType),
		Reps: *reps, NPrompt: *nPrompt, NGen: *nGen, LoadSeconds: time.Since(start).Seconds(), RepackedBytes: m.RepackedBytes(),
		GOMAXPROCS: runtime.GOMAXPROCS(0), PhysicalCores: cpu.DefaultThreads(),
	}
	switch {
	case *exact:
		res.Path = "exact"
	case *invariant:
		res.Path = "fast-invariant"
	}
	if res.Threads == 0 {
		res.Threads = cpu.DefaultThreads()
	}
	for _, t := range f.Tensors {
		res.ModelBytes += int64(len(t.Data))
	}
	c := m.Config()
	ctxSize := max(maxDepth+*nPrompt+*nGen, 1)
	for _, k := range ks {
		ctxSize = max(ctxSize, maxDepth+k+1, maxDepth+16)
	}
	s, err := m.NewSession(model.SessionOptions{ContextSize: ctxSize, CacheType: cacheType})
	if err != nil {
		return err
	}
	defer s.Close()
	res.CacheBytes = s.CacheBytes()
	r := rand.New(rand.NewPCG(*seed, 2))
	random := func(n int) []int32 {
		ids := make([]int32, n)
		for i := range ids {
			ids[i] = int32(r.IntN(c.VocabSize))
		}
		return ids
	}
	prompt := random(*nPrompt)
	logits := make([]float32, c.VocabSize)
	var ppCPU, tgCPU float64 // CPU seconds of the measured runs
	pp := func(depth int) (float64, error) {
		s.Truncate(depth) // in range: the depth is what the cache holds at least
		t0, c0 := time.Now(), cpuSeconds()
		if _, err := s.PrefillLast(logits, prompt); err != nil {
			return 0, err
		}
		ppCPU += cpuSeconds() - c0
		return float64(len(prompt)) / time.Since(t0).Seconds(), nil
	}
	tg := func(depth, n int) (float64, error) {
		s.Truncate(depth)
		tok := int32(r.IntN(c.VocabSize))
		t0, c0 := time.Now(), cpuSeconds()
		for range n {
			if err := s.DecodeInto(logits, tok); err != nil {
				return 0, err
			}
			tok = argmax(logits)
		}
		tgCPU += cpuSeconds() - c0
		return float64(n) / time.Since(t0).Seconds(), nil
	}
	results := make([]benchResult, 0, len(depths))
	filled := 0
	for _, depth := range depths {
		// The context before the tests: extended from the last depth in
		// prompt-sized batches, not timed.
		s.Truncate(filled) // in range: the cache holds at least filled tokens
		for ctx := random(depth - filled); len(ctx) > 0; {
			k := min(len(ctx), 512)
			if _, err := s.PrefillLast(logits, ctx[:k]); err != nil {
				return err
			}
			ctx = ctx[k:]
		}
		filled = depth
		// Warm-up: size every buffer for this depth.
		if *nPrompt > 0 {
			if _, err := pp(depth); err != nil {
				return err
			}
		}
		if *nGen > 0 {
			if _, err := tg(depth, min(*nGen, 4)); err != nil {
				return err
			}
		}
		if pf != nil && len(results) == 0 {
			if err := pprof.StartCPUProfile(pf); err != nil {
				return err
			}
			defer pprof.StopCPUProfile()
		}
		ppCPU, tgCPU = 0, 0 // the warm-up does not count
		d := res
		d.NDepth, d.Depth = depth, depth
		for range *reps {
			if *nPrompt > 0 {
				v, err := pp(depth)
				if err != nil {
					return err
				}
				d.PPSamples = append(d.PPSamples, v)
			}
			if *nGen > 0 {
				v, err := tg(depth, *nGen)
				if err != nil {
					return err
				}
				d.TGSamples = append(d.TGSamples, v)
			}
		}
		d.PPTokensPerS, d.PPStddev = meanStd(d.PPSamples)
		d.TGTokensPerS, d.TGStddev = meanStd(d.TGSamples)
		if ppCPU > 0 {
			d.PPPerCPUSec = float64(*reps**nPrompt) / ppCPU
		}
		if tgCPU > 0 {
			d.TGPerCPUSec = float64(*reps**nGen) / tgCPU
		}
		d.PeakRSSBytes = peakRSS()
		results = append(results, d)
	}
	// --spec-mtp has one depth: its results go with that depth's.
	spec := &results[0]
	if len(ks) > 0 {
		spec.SpecK = ks
		ratios, stepMS, err := verifyCost(s, maxDepth, ks, *reps, random, logits)
		if err != nil {
			return err
		}
		spec.SpecVerify = ratios
		if c.NextN > 0 {
			lopts := glmrun.Options{Threads: *threads, TensorParallel: *tp, CPUMoE: placement.all, NCPUMoE: placement.n, Collectives: placement.collectives, Backend: *backendName, Exact: *exact,
				BatchInvariant: *invariant, NoRepack: *noRepack, AllowUnknownKeys: *force, CacheType: cache.k}
			if *tp == 1 {
				lopts.TensorParallel = 0
			}
			for _, k := range append([]int{0}, ks...) {
				g, err := specGenerate(path, lopts, k, *specPrompt, *nGen, *reps, *specTemp)
				if err != nil {
					return err
				}
				spec.SpecGen = append(spec.SpecGen, g)
			}
		}
		defer func() {
			if !*asJSON {
				printSpec(stdout, ks, ratios, stepMS, spec.SpecGen, *specTemp)
			}
		}()
	}
	load := loadAverage()
	for i := range results {
		results[i].LoadAverage = load
	}
	if *asJSON {
		var v any = results[0]
		if len(results) > 1 {
			v = results
		}
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s\n", b)
		return err
	}
	fmt.Fprintf(stdout, "| model | size | backend | path | threads | type_k | test | t/s |\n|---|---:|---|---|---:|---|---:|---:|\n")
	row := func(test string, mean, std float64) {
		fmt.Fprintf(stdout, "| %s | %.2f GiB | %s | %s | %d | %s | %s | %.2f ± %.2f |\n",
			res.Model, float64(res.ModelBytes)/(1<<30), res.Backend, res.Path, res.Threads, res.TypeK, test, mean, std)
	}
	var perCPU []string
	for _, d := range results {
		at := ""
		if d.NDepth > 0 {
			at = " @ d" + strconv.Itoa(d.NDepth) // llama-bench's notation
		}
		if *nPrompt > 0 {
			row("pp"+strconv.Itoa(*nPrompt)+at, d.PPTokensPerS, d.PPStddev)
		}
		if *nGen > 0 {
			row("tg"+strconv.Itoa(*nGen)+at, d.TGTokensPerS, d.TGStddev)
		}
		perCPU = append(perCPU, fmt.Sprintf("pp %.1f, tg %.1f tokens", d.PPPerCPUSec, d.TGPerCPUSec))
	}
	last := results[len(results)-1]
	fmt.Fprintf(stdout, "peak RSS %.2f GiB, KV cache %s (%s), repacked weights %s, load %.2fs, %d repetitions; per CPU-second: %s; load average %.2f\n",
		float64(last.PeakRSSBytes)/(1<<30), units.Bytes(res.CacheBytes), res.TypeK, units.Bytes(res.RepackedBytes), res.LoadSeconds, res.Reps, strings.Join(perCPU, " / "), load)
	return nil
}

// parseDepths reads -d: comma-separated token counts, each 0 to
// math.MaxInt32, returned in increasing order without repeats.
func parseDepths(list string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 || n > math.MaxInt32 {
			return nil, usageErr("-d %q: want tokens from 0 to %d, comma-separated", list, math.MaxInt32)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

// meanStd returns the mean and the sample standard deviation of xs (0
// for fewer than two).
func meanStd(xs []float64) (mean, std float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss / float64(len(xs)-1))
}

// peakRSS returns the process's peak resident set size (VmHWM of
// /proc/self/status), or 0 where that is not available.
func peakRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmHWM:")); ok {
			kb, err := strconv.ParseInt(string(bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(v), []byte("kB")))), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// loadAverage returns the 1-minute load average of /proc/loadavg, or 0.
func loadAverage() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := bytes.Fields(data)
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(string(f[0]), 64)
	return v
}

// pageIn reads one byte of every 4 KB page of f's tensor data, so that
// the kernel maps the whole file (from the page cache, or from disk)
// before anything is measured.
func pageIn(f *gguf.File) byte {
	var x byte
	for _, t := range f.Tensors {
		for i := 0; i < len(t.Data); i += 4096 {
			x ^= t.Data[i]
		}
	}
	return x
}
