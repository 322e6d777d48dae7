package glmrun

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/glmrun/glmrun/attention"
	_ "github.com/glmrun/glmrun/backend/cpu"  // the CPU backend, registered for model.Load
	_ "github.com/glmrun/glmrun/backend/cuda" // the CUDA backend (loads libcuda.so.1 only when chosen)
	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/model"
	"github.com/glmrun/glmrun/model/chat"
	"github.com/glmrun/glmrun/model/grammar"
	"github.com/glmrun/glmrun/model/tokenizer"
	"github.com/glmrun/glmrun/tensor"
)

// Options configure Load.
type Options struct {
	// Threads is the number of worker goroutines per device; 0 means the
	// backend's default (on the CPU, the number of physical cores).
	Threads int
	// ContextSize is the default number of positions of a Session's KV
	// cache, which NewSession allocates in full; 0 means FitContext's:
	// the model's training context, lowered to what fits in the memory
	// available.
	ContextSize int
	// CacheType is the element type of the KV cache, by llama.cpp's
	// --cache-type-k names: "f16", "bf16", "q8_0" (rows of whole 32-value
	// blocks) or "f32" (the reference numbers, twice f16's memory). The
	// latent and the DSA indexer keys are stored in it; attention reads
	// them back exactly. "" is f16 (llama.cpp's default).
	CacheType string
	// Backend selects the compute backend: "" or "cpu", or "cuda" (NVIDIA
	// GPUs through the driver's libcuda.so.1; without one Load fails with
	// an error wrapping cuda.ErrNoDriver or cuda.ErrNoDevice).
	Backend string
	// TensorParallel is the number of devices the weights are split over
	// (attention heads and experts); 0 and 1 mean one. On the CPU backend
	// the devices are virtual, each with its own workers.
	TensorParallel int
	// CPUMoE runs the routed experts of every MoE block on the CPU, and
	// the rest of the model (attention, norms, shared experts, output head)
	// on the Backend's devices: llama.cpp's --cpu-moe, how a GLM-5 or
	// DeepSeek model whose experts do not fit a GPU's memory runs on one.
	// NCPUMoE does so for the first NCPUMoE blocks only (--n-cpu-moe N).
	// On the cpu backend the results are the same either way.
	CPUMoE  bool
	NCPUMoE int
	// Exact selects float32 activations for every matrix product (the
	// path that reproduces llama.cpp's deq-F32 references to ~1e-5). By
	// default Load uses the backend's fast products: on the CPU,
	// activations quantized as ggml does and integer dot products on the
	// quantized weights, the numbers of llama.cpp's own CPU path.
	Exact bool
	// BatchInvariant makes every product give each token the result it
	// gets alone, bit for bit: prefill then computes what decoding token by
	// token does, and a batched step what decoding one by one does. By
	// default those agree within float rounding (as in llama.cpp and vLLM),
	// and prompts and batches of sixteen or more tokens run faster.
	BatchInvariant bool
	// NoRepack keeps the weights in the file's layout: by default the CPU
	// rewrites those of the types it has packed kernels for (Q8_0 and Q5_0;
	// Q4_K and Q6_K without AVX-512 VNNI) into interleaved groups of rows as
	// they load, which makes prompts faster (1.3-1.7 times on AVX2) and
	// costs memory the size of those weights (the file's own pages of them
	// are then dropped).
	NoRepack bool
	// Collectives is how a GPU backend's tensor-parallel devices sum and
	// share results: "p2p" (device to device, ordered by events; the
	// default where the driver has it) or "host" (through host memory);
	// the same values either way.
	Collectives string
	// AllowUnknownKeys loads a file whose metadata has keys that change the
	// forward pass in ways glmrun does not implement, or keys it does not
	// know; without it they are a load error naming them. Warnings lists
	// them then.
	AllowUnknownKeys bool
	// SpecDraft turns on speculative decoding with the model's own MTP
	// (NextN) block: each step drafts SpecDraft tokens with it, chained,
	// and the trunk checks them all in one batched pass, keeping the
	// longest prefix it agrees with (llama.cpp's --draft, vLLM's
	// num_speculative_tokens). 0 turns it off; a model without an MTP block
	// is then a load error. Greedy output is plain decoding's token for
	// token (bit for bit with BatchInvariant), and sampled output has the
	// target's distribution (the speculative-sampling acceptance rule).
	SpecDraft int
	// Progress, when set, makes Load read the weights once from the file
	// (paging the memory map in, so the first tokens do not wait on the
	// disk) and report the bytes read so far against the total.
	Progress func(done, total int64)
}

// DefaultContextSize is the default context size where the memory
// available cannot be told (see Model.FitContext).
const DefaultContextSize = model.DefaultContextSize

// ErrContextFull is wrapped by the errors for a sequence that does not fit
// a Session's context.
var ErrContextFull = model.ErrContextFull

// ErrClosed is wrapped by the error of every method that needs the weights
// or the KV cache of a Session that was closed, or whose Model was.
var ErrClosed = errors.New("closed")

var (
	errModelClosed   = fmt.Errorf("glmrun: the model is closed: %w", ErrClosed)
	errSessionClosed = fmt.Errorf("glmrun: the session is closed: %w", ErrClosed)
)

// Model is a loaded model with its tokenizer and chat template. It is
// immutable and may be shared by Sessions running in several goroutines.
type Model struct {
	path     string
	opts     Options
	cache    tensor.Type // Options.CacheType
	file     *gguf.File
	m        *model.Model
	tok      *tokenizer.Tokenizer
	tmpl     *chat.Template
	tmplErr  error // why the file's chat template was not usable, if so
	loadTime time.Duration
	sink     byte // keeps pageIn's reads from being optimised away

	// inUse is held for reading by every step that reads the weights or a
	// KV cache, and for writing by Close, which so unmaps the file only
	// after the steps in flight have ended. closed is set first, so that
	// no new step starts.
	inUse  sync.RWMutex
	closed atomic.Bool

	vocabOnce sync.Once // builds vocab on first use
	vocab     *grammar.Vocab
	vocabErr  error
}

// GrammarVocab returns the tokenizer's vocabulary as a grammar matcher
// reads it (package model/grammar): each token's text, control tokens with
// none, and the end-of-generation tokens. It is built on first use and
// shared by every generation (library and server) that a grammar
// constrains.
func (m *Model) GrammarVocab() (*grammar.Vocab, error) {
	m.vocabOnce.Do(func() {
		pieces := make([]string, m.tok.NumTokens())
		for id := range pieces {
			pieces[id] = m.tok.Piece(int32(id), false)
		}
		m.vocab, m.vocabErr = grammar.NewVocab(pieces, m.tok.EOGs())
		if m.vocabErr != nil {
			m.vocabErr = fmt.Errorf("glmrun: grammar vocabulary: %w", m.vocabErr)
		}
	})
	return m.vocab, m.vocabErr
}

// acquire starts a step that reads the weights: it returns an error
// wrapping ErrClosed if the model is closed, else release must follow.
// Steps do not nest (a waiting Close would deadlock a nested RLock).
func (m *Model) acquire() error {
	m.inUse.RLock()
	if m.closed.Load() {
		m.inUse.RUnlock()
		return errModelClosed
	}
	return nil
}

// release ends a step begun by acquire.
func (m *Model) release() { m.inUse.RUnlock() }

// Load opens the GGUF file at path (split-aware: give the first shard of a
// "-00001-of-000NN.gguf" set) and loads its weights, tokenizer and chat
// template. A file without a chat template gets the built-in GLM-5 one
// (chat.GLM5). Close the Model to unmap the file.
func Load(path string, opts Options) (*Model, error) {
	start := time.Now()
	if opts.TensorParallel < 0 {
		return nil, fmt.Errorf("glmrun: negative tensor parallelism %d", opts.TensorParallel)
	}
	if opts.ContextSize < 0 {
		return nil, fmt.Errorf("glmrun: negative context size %d", opts.ContextSize)
	}
	if opts.Threads < 0 {
		return nil, fmt.Errorf("glmrun: negative thread count %d", opts.Threads)
	}
	cache, err := cacheType(opts.CacheType)
	if err != nil {
		return nil, err
	}
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("glmrun: %w", err)
	}
	m := &Model{path: path, opts: opts, cache: cache, file: f}
	if err := m.load(); err != nil {
		f.Close()
		return nil, err
	}
	m.loadTime = time.Since(start)
	return m, nil
}

// load reads the tokenizer, the chat template and the weights of m.file.
func (m *Model) load() error {
	tok, err := tokenizer.New(m.file)
	if err != nil {
		if errors.Is(err, tokenizer.ErrNoTokenizer) {
			return fmt.Errorf("glmrun: %s has no tokenizer (no %s key), so it cannot turn text into tokens: %w",
				m.path, tokenizer.KeyModel, err)
		}
		return fmt.Errorf("glmrun: %w", err)
	}
	m.tok = tok
	m.tmpl = chat.GLM5()
	if src, err := m.file.String("tokenizer.chat_template"); err == nil {
		t, err := chat.Parse(src)
		if err != nil {
			m.tmplErr = fmt.Errorf("glmrun: %s: tokenizer.chat_template: %w", m.path, err)
		} else {
			m.tmpl = t
		}
	}
	mm, err := model.New(m.file, model.Options{
		Threads:          m.opts.Threads,
		Backend:          m.opts.Backend,
		TensorParallel:   m.opts.TensorParallel,
		CPUMoE:           m.opts.CPUMoE,
		NCPUMoE:          m.opts.NCPUMoE,
		Fast:             !m.opts.Exact,
		BatchInvariant:   m.opts.BatchInvariant,
		NoRepack:         m.opts.NoRepack,
		Collectives:      m.opts.Collectives,
		AllowUnknownKeys: m.opts.AllowUnknownKeys,
		MTP:              m.opts.SpecDraft > 0,
	})
	if err != nil {
		return fmt.Errorf("glmrun: %w", err)
	}
	cfg := mm.Config()
	if err := cfg.CheckContext(m.opts.ContextSize); err != nil {
		mm.Close()
		return fmt.Errorf("glmrun: %s: %w", m.path, err)
	}
	if n, v := cfg.VocabSize, tok.NumTokens(); n < v {
		mm.Close()
		return fmt.Errorf("glmrun: %s: the tokenizer has %d tokens but the model's output has only %d", m.path, v, n)
	}
	m.m = mm
	if m.opts.Progress != nil {
		m.pageIn()
	}
	return nil
}

// pageIn reads one byte of every page of tensor data, reporting progress
// about every 64 MiB.
func (m *Model) pageIn() {
	const page, step = 4096, 64 << 20
	var total int64
	for _, t := range m.file.Tensors {
		total += int64(len(t.Data))
	}
	var done, last int64
	var sum byte
	m.opts.Progress(0, total)
	for _, t := range m.file.Tensors {
		d := t.Data
		for i := 0; i < len(d); i += page {
			sum += d[i]
		}
		done += int64(len(d))
		if done-last >= step {
			m.opts.Progress(done, total)
			last = done
		}
	}
	m.sink = sum
	m.opts.Progress(total, total)
}

// Close releases the model, its Sessions' KV caches and the file's
// mapping. It waits for the steps of generation running in other goroutines
// to end; from then on every method of the model and its Sessions that
// needs the weights returns an error wrapping ErrClosed. Closing again does
// nothing.
func (m *Model) Close() error {
	if m.closed.Swap(true) {
		return nil
	}
	m.inUse.Lock()
	defer m.inUse.Unlock()
	err := m.m.Close()
	if cerr := m.file.Close(); err == nil {
		err = cerr
	}
	return err
}

// Warnings returns what the model was loaded despite (the metadata keys
// Options.AllowUnknownKeys let through).
func (m *Model) Warnings() []string { return m.m.Warnings() }

// Path returns the file the model was loaded from.
func (m *Model) Path() string { return m.path }

// CacheType returns the element type of its Sessions' KV caches
// (Options.CacheType).
func (m *Model) CacheType() tensor.Type { return m.cache }

// RepackedBytes returns the bytes of weights rewritten into the CPU's
// packed layout when the model loaded (Options.NoRepack turns that off):
// memory taken beyond the file's mapped pages.
func (m *Model) RepackedBytes() int64 { return m.m.RepackedBytes() }

// FitContext returns the context size a Session gets by default: the
// model's training context (context_length), lowered when its KV cache (of
// Options.CacheType) does not fit in three quarters of the memory
// available, with a note saying so (empty when it was not lowered).
func (m *Model) FitContext() (n int, note string) {
	return m.m.FitContext(m.cache, m.opts.SpecDraft > 0, 1)
}

// cacheType parses Options.CacheType.
func cacheType(name string) (tensor.Type, error) {
	if name == "" {
		return model.DefaultCacheType, nil
	}
	t, err := attention.ParseCacheType(name)
	if err != nil {
		return 0, fmt.Errorf("glmrun: Options.CacheType: %w", err)
	}
	return t, nil
}

// Config returns the model's hyper-parameters.
func (m *Model) Config() model.Config { return m.m.Config() }

// Tokenizer returns the model's tokenizer.
func (m *Model) Tokenizer() *tokenizer.Tokenizer { return m.tok }

// Template returns the chat template: the file's, or the built-in GLM-5
// format when the file has none (or when its template does not parse: see
// TemplateErr).
func (m *Model) Template() *chat.Template { return m.tmpl }

// TemplateErr returns why the file's chat template (tokenizer.chat_template)
// could not be parsed, or nil when it parsed or the file has none. RenderChat
// and Session.Chat return this error rather than fall back to the built-in
// format, which the file did not ask for.
func (m *Model) TemplateErr() error { return m.tmplErr }

// Engine returns the loaded weights as the engine's model, for packages
// that drive sessions and batched steps directly, like package server. Its
// sessions and steps do not take the Model's lock: the Model must stay open
// (no Close) for as long as the engine model or any of its sessions is
// used, and Close frees them.
func (m *Model) Engine() *model.Model { return m.m }

// LoadTime returns how long Load took.
func (m *Model) LoadTime() time.Duration { return m.loadTime }

// Tokenize returns the token ids of text as a prompt: BOS is added if the
// vocabulary asks for it and special-token text ("<|user|>", "[gMASK]") is
// parsed, as llama.cpp does for prompts.
func (m *Model) Tokenize(text string) []int32 { return m.tok.Encode(text, true, true) }

// Detokenize returns the text of ids, control tokens included.
func (m *Model) Detokenize(ids []int32) (string, error) { return m.tok.Decode(ids, true) }
