package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/glmrun/glmrun/attention"
	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/internal/units"
	"github.com/glmrun/glmrun/model"
	"github.com/glmrun/glmrun/model/tokenizer"
	"github.com/glmrun/glmrun/tensor"
)

// specMTPUsage is the help of --spec-mtp, shared by the commands that
// generate.
const specMTPUsage = "speculative decoding with the model's MTP block: draft `K` tokens per step, checked by the model in one pass (0: off; greedy output is unchanged, sampled output keeps its distribution)"

// maxSpecDraft bounds --spec-mtp: beyond a few tokens a chained draft is
// almost never accepted, and a verification pass grows with K.
const maxSpecDraft = 16

// printRepacked says, when weights were repacked as they loaded, how much
// memory the copy takes.
func printRepacked(w io.Writer, prefix string, n int64) {
	if n > 0 {
		fmt.Fprintf(w, "%s: repacked %s of weights into interleaved rows for the fast products (memory beyond the file's pages; --no-repack keeps the file's layout)\n",
			prefix, units.Bytes(n))
	}
}

// noRepackUsage is the help of --no-repack, which every command that loads a
// model with the fast products has, as --batch-invariant.
const noRepackUsage = "keep the weights in the file's layout (no repacked copy in memory; prompts slower)"

// batchInvariantUsage is the help of --batch-invariant.
const batchInvariantUsage = "every token's products computed as when it is alone, bit for bit (prefill equals token-by-token decoding, a batched step one-by-one decoding); slower for prompts and batches of 16+ tokens"

// forceUsage is the help of --force, which every command that runs a
// model has.
const forceUsage = "load a file whose metadata has keys that change the forward pass in ways glmrun does not implement, or keys it does not know (its logits may be wrong; the keys are printed)"

// cacheTypeUsage is the help of -ctk (--cache-type-k), which every command
// that runs the model has.
const cacheTypeUsage = "KV cache `type`, llama.cpp's names: f16, bf16, q8_0 (half of f16's memory; rows of whole 32-value blocks) or f32 (the reference numbers); the latent and the DSA indexer keys are stored in it (default: f16, as llama.cpp's)"

// cacheFlags are -ctk and -ctv. MLA caches one latent that serves as both
// keys and values, so -ctv is accepted (llama.cpp wants both for MLA
// models) only with -ctk's value.
type cacheFlags struct{ k, v string }

// register defines -ctk, --cache-type-k, -ctv and --cache-type-v on fs.
func (c *cacheFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.k, "ctk", "", cacheTypeUsage)
	fs.StringVar(&c.k, "cache-type-k", "", "same as -ctk `TYPE`")
	fs.StringVar(&c.v, "ctv", "", "the V cache `type`: MLA's latent is both K and V, so only -ctk's type (llama.cpp's -ctv, accepted for its command lines)")
	fs.StringVar(&c.v, "cache-type-v", "", "same as -ctv `TYPE`")
}

// parse checks the values: a usage error naming the flag. No -ctk is
// model.DefaultCacheType.
func (c *cacheFlags) parse() (tensor.Type, error) {
	t := model.DefaultCacheType
	if c.k != "" {
		var err error
		if t, err = attention.ParseCacheType(c.k); err != nil {
			return 0, usageErr("-ctk (--cache-type-k): %v", err)
		}
	}
	if c.v != "" {
		v, err := attention.ParseCacheType(c.v)
		if err != nil {
			return 0, usageErr("-ctv (--cache-type-v): %v", err)
		}
		if v != t {
			return 0, usageErr("-ctv %s with -ctk %s: the MLA latent is both the keys and the values, so they take one type (give -ctk only)",
				c.v, attention.CacheTypeName(t))
		}
	}
	return t, nil
}

// deviceFlags are the flags of where the model runs that every command
// that runs it has: --cpu-moe and --n-cpu-moe (llama.cpp's names), and
// --collectives.
type deviceFlags struct {
	all         bool
	n           int
	collectives string
}

// register defines the flags on fs.
func (c *deviceFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&c.all, "cpu-moe", false, "run the routed experts of every MoE block on the CPU and the rest (attention, norms, shared experts, output head) on the backend's devices, as llama.cpp's --cpu-moe: for experts that do not fit a GPU; on the cpu backend the results are the same")
	fs.IntVar(&c.n, "n-cpu-moe", 0, "the same for the MoE blocks among the first `N` blocks only (llama.cpp's --n-cpu-moe)")
	fs.StringVar(&c.collectives, "collectives", "", "`p2p|nccl|host`: how the cuda backend's tensor-parallel devices sum and share results: device to device, ordered by events (p2p, the default where the driver has it), by NCCL (libnccl.so.2; one GPU a device), or through host memory (host); p2p and host give the same values, NCCL adds in its own order; the cpu backend has one way and ignores it")
}

// check returns a usage error naming the flag for a negative block count
// or an unknown way of collectives.
func (c *deviceFlags) check() error {
	if c.n < 0 {
		return usageErr("--n-cpu-moe %d: want >= 0", c.n)
	}
	switch c.collectives {
	case "", "p2p", "nccl", "host":
	default:
		return usageErr("--collectives %q: want p2p, nccl or host", c.collectives)
	}
	return nil
}

// forwardFlags are the flags shared by the commands that run the model once
// over a token sequence and look at what it computed (logits, dump): the
// model, the tokens or the text, which path, and where it runs.
type forwardFlags struct {
	model, tokens, text, backend string
	decode, fast, invariant      bool
	noRepack                     bool
	force                        bool
	threads, tp                  int
	cache                        cacheFlags
	placement                    deviceFlags
	cacheType                    tensor.Type // -ctk, parsed by check
	ids                          []int32     // --tokens, parsed by check
}

// register defines the flags on fs.
func (ff *forwardFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&ff.model, "m", "", "model GGUF file (required)")
	fs.StringVar(&ff.tokens, "tokens", "", "comma-separated token ids")
	fs.StringVar(&ff.text, "text", "", "text to tokenize with the model's tokenizer (instead of --tokens)")
	fs.BoolVar(&ff.decode, "decode", false, "one token at a time through the decode path")
	fs.IntVar(&ff.threads, "threads", 0, "worker goroutines per device (0: the physical cores; more than the CPUs is warned about)")
	fs.BoolVar(&ff.fast, "fast", false, "the fast matrix products (activations quantized as ggml does, integer kernels: llama.cpp's quantized path) instead of float32 activations")
	fs.BoolVar(&ff.invariant, "batch-invariant", false, "with --fast, "+batchInvariantUsage)
	fs.BoolVar(&ff.noRepack, "no-repack", false, "with --fast, "+noRepackUsage)
	fs.BoolVar(&ff.force, "force", false, forceUsage)
	fs.IntVar(&ff.tp, "tp", 1, "tensor parallelism: split the model over N devices (virtual CPU devices on the cpu backend)")
	fs.StringVar(&ff.backend, "backend", "cpu", "compute backend: cpu or cuda (dump on each and glmrun diff the two)")
	ff.cache.register(fs)
	ff.placement.register(fs)
}

// check validates every flag value (and the token list) before the model
// is opened: a usage error naming the flag, or the warnings to print.
func (ff *forwardFlags) check(fs *flag.FlagSet) (warnings []string, err error) {
	switch {
	case fs.NArg() > 0:
		return nil, usageErr("unexpected argument %q", fs.Arg(0))
	case ff.model == "":
		return nil, usageErr("-m MODEL.gguf is required")
	case ff.tp < 1:
		return nil, usageErr("--tp %d: want >= 1", ff.tp)
	case ff.text != "" && ff.tokens != "":
		return nil, usageErr("give --tokens or --text, not both")
	}
	if err := checkDevices("--threads", ff.threads, ff.tp, ff.backend, &warnings); err != nil {
		return nil, err
	}
	if ff.cacheType, err = ff.cache.parse(); err != nil {
		return nil, err
	}
	if err := ff.placement.check(); err != nil {
		return nil, err
	}
	if ff.text == "" {
		if ff.ids, err = parseTokenIDs(ff.tokens); err != nil {
			return nil, usageErr("--tokens: %v", err)
		}
	}
	return warnings, nil
}

// load opens the model file, builds the model and resolves the token
// sequence (--text is tokenized as llama.cpp's refs were: the model's BOS
// rule, special tokens parsed). check must have passed. The caller closes
// both the file and the model.
func (ff *forwardFlags) load(stderr io.Writer, cmd string) (*gguf.File, *model.Model, []int32, error) {
	tokens := ff.ids
	f, err := gguf.Open(ff.model)
	if err != nil {
		return nil, nil, nil, err
	}
	if ff.text != "" {
		tok, err := tokenizer.New(f)
		if err != nil {
			f.Close()
			return nil, nil, nil, err
		}
		if tokens = tok.Encode(ff.text, true, true); len(tokens) == 0 {
			f.Close()
			return nil, nil, nil, fmt.Errorf("%w: --text %q gives no tokens", errUsage, ff.text)
		}
	}
	m, err := model.New(f, model.Options{Threads: ff.threads, TensorParallel: ff.tp, CPUMoE: ff.placement.all, NCPUMoE: ff.placement.n, Collectives: ff.placement.collectives, Fast: ff.fast, BatchInvariant: ff.invariant, NoRepack: ff.noRepack,
		Backend: ff.backend, AllowUnknownKeys: ff.force})
	if err != nil {
		f.Close()
		return nil, nil, nil, err
	}
	printWarnings(stderr, cmd, m.Warnings())
	return f, m, tokens, nil
}
