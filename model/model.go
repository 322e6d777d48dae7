package model

import (
	"fmt"
	"strings"

	"github.com/glmrun/glmrun/attention"
	"github.com/glmrun/glmrun/backend"
	"github.com/glmrun/glmrun/gguf"
)

// Options configures Load.
type Options struct {
	// Threads is the number of worker goroutines per device on the CPU
	// backend; 0 means the backend's default (cpu.DefaultThreads: the
	// physical cores).
	Threads int
	// TensorParallel is the number of devices the model is split over
	// (see Plan); 0 and 1 mean one device. On the CPU backend the devices
	// are virtual, each with its own workers and memory budget.
	TensorParallel int
	// Backend names a registered backend (see backend.Open); "" means
	// "cpu". The program must import the backend's package, e.g.
	// _ "github.com/glmrun/glmrun/backend/cpu".
	Backend string
	// DeviceMemory is each device's memory budget in bytes; 0 means the
	// backend's default (none on the CPU). Load fails with an error
	// naming the device when the weights do not fit.
	DeviceMemory int64
	// Fast selects the backend's fast matrix products: on the CPU,
	// activations quantized to each weight type's VecDotType exactly as
	// ggml does and integer dot products on the quantized weights (the
	// numbers of llama.cpp's quantized path, within float rounding), and
	// attention in the absorbed form in prefill too. The zero value keeps
	// float32 activations (the exact path: the deq-F32 references).
	Fast bool
	// BatchInvariant makes the fast products give each token the result
	// it gets alone, bit for bit (backend.Config.BatchInvariant): prefill
	// then equals decoding token by token, and DecodeBatch decoding the
	// sessions one by one. By default those agree within float rounding,
	// and prompts and batched steps of sixteen or more tokens run faster.
	BatchInvariant bool
	// NoRepack keeps the weights in the file's layout on the CPU's fast
	// path (backend.Config.NoRepack): no copy in memory, slower prompts.
	NoRepack bool
	// Collectives is how the backend's devices sum and share results
	// (backend.Config.Collectives): "" for the backend's default.
	Collectives string
	// AllowUnknownKeys loads a file whose metadata has keys that change the
	// forward pass in ways glmrun does not implement, or keys it does not
	// know, which are otherwise a load error naming them; they are then
	// listed in Warnings.
	AllowUnknownKeys bool
	// MTP loads the model's multi-token-prediction (NextN) block onto the
	// devices, so that sessions with SessionOptions.MTP can draft tokens
	// with it (speculative decoding). Loading a model without one is then
	// an error.
	MTP bool
	// CPUMoE runs the routed experts of every MoE block (the router, the
	// top-k and the experts) on a CPU device of their own, and everything
	// else (attention, norms, dense and shared-expert FFNs, the output head)
	// on the Backend's devices: llama.cpp's --cpu-moe, the way a model whose
	// experts do not fit a GPU runs on one. Each such block's normed hidden
	// state crosses to the CPU and its routed sum back, once each way. On
	// the cpu backend it changes where the products run, not their results.
	CPUMoE bool
	// NCPUMoE does the same for the MoE blocks among the first NCPUMoE
	// blocks only (llama.cpp's --n-cpu-moe N; the MTP block is block
	// Config.Layers). CPUMoE covers every block whatever NCPUMoE is.
	NCPUMoE int
}

// Model is a loaded glm-dsa or deepseek2 model. It is immutable and may be
// shared by several Sessions.
type Model struct {
	cfg     Config
	w       *Weights
	file    *gguf.File
	ownFile bool
	attnCfg attention.Config
	plan    Plan
	devs    []backend.Device
	coll    backend.Collective
	shards  []*shard
	mtp     bool // the MTP block is loaded (Options.MTP)
	// experts is the CPU device of Options.CPUMoE / NCPUMoE (nil without),
	// and cpuMoE[l] block l's router and routed experts on it (nil for the
	// blocks whose experts are on the devices of the plan).
	experts backend.Device
	cpuMoE  []*moeShard
	nCPUMoE int // blocks from 0 whose routed experts run on experts
	// warnings are the metadata keys AllowUnknownKeys let through.
	warnings []string
}

// Load opens the GGUF file at path and loads the model in it. Close the
// model to unmap the file.
func Load(path string, opts Options) (*Model, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	m, err := New(f, opts)
	if err != nil {
		f.Close()
		return nil, err
	}
	m.ownFile = true
	return m, nil
}

// New loads the model held in an open GGUF file onto the devices opts
// asks for. The model reads f's mapped tensor data, so f must stay open
// while the model is used; Close on such a model does not close f.
func New(f *gguf.File, opts Options) (*Model, error) {
	cfg, err := readConfig(fileMeta{f})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	var warnings []string
	if err := unsupportedKeysError(f.Path, classifyKeys(fileMeta{f}, &cfg)); err != nil {
		if !opts.AllowUnknownKeys {
			return nil, err
		}
		warnings = append(warnings, strings.TrimPrefix(err.Error(), "model: ")+" (loaded anyway)")
	}
	if opts.TensorParallel < 0 || opts.Threads < 0 || opts.DeviceMemory < 0 || opts.NCPUMoE < 0 {
		return nil, fmt.Errorf("model: negative option: tensor parallelism %d, threads %d, device memory %d, CPU MoE blocks %d",
			opts.TensorParallel, opts.Threads, opts.DeviceMemory, opts.NCPUMoE)
	}
	if opts.MTP && cfg.NextN == 0 {
		return nil, fmt.Errorf("model: %s: MTP asked for, but the model has no MTP block (%s.nextn_predict_layers is 0)", f.Path, cfg.Arch)
	}
	n := max(opts.TensorParallel, 1)
	plan, err := NewPlan(&cfg, n)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	w, err := loadWeights(f, &cfg)
	if err != nil {
		return nil, err
	}
	name := opts.Backend
	if name == "" {
		name = "cpu"
	}
	devs, coll, err := backend.Open(name, backend.Config{Devices: n, Threads: opts.Threads, Memory: opts.DeviceMemory, Fast: opts.Fast, BatchInvariant: opts.BatchInvariant, NoRepack: opts.NoRepack,
		Collectives: opts.Collectives})
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	m := &Model{cfg: cfg, w: w, file: f, plan: plan, devs: devs, coll: coll, warnings: warnings, mtp: opts.MTP}
	m.attnCfg = m.newAttnConfig()
	if m.nCPUMoE = min(opts.NCPUMoE, m.blocks()); opts.CPUMoE {
		m.nCPUMoE = m.blocks()
	}
	if m.nCPUMoE > 0 {
		experts, _, err := backend.Open("cpu", backend.Config{Devices: 1, Threads: opts.Threads, Fast: opts.Fast,
			BatchInvariant: opts.BatchInvariant, NoRepack: opts.NoRepack})
		if err != nil {
			m.closeDevices()
			return nil, fmt.Errorf("model: the CPU device for the routed experts (CPU MoE): %w", err)
		}
		m.experts = experts[0]
	}
	if err := m.upload(); err != nil {
		m.closeDevices()
		return nil, fmt.Errorf("model: %s: %w", f.Path, err)
	}
	return m, nil
}

// newAttnConfig derives the attention constants from the configuration.
func (m *Model) newAttnConfig() attention.Config {
	c := &m.cfg
	attnFactor, tau := c.ropeScales()
	rope := backend.Rope{Dims: c.DRope, Base: c.RopeBase, FreqScale: 1, AttnFactor: attnFactor}
	switch c.RopeScaling {
	case "linear":
		rope.FreqScale = 1 / c.RopeFactor
	case "yarn":
		rope.FreqScale = 1 / c.RopeFactor
		rope.ExtFactor = 1
		rope.CorrDims = backend.YaRNCorrDims(c.DRope, c.RopeOrigCtx, c.RopeBase, c.YaRNBetaFast, c.YaRNBetaSlow)
	}
	return attention.Config{
		Embd: c.Embd, Heads: c.Heads, QRank: c.QLoraRank, KVRank: c.KVLoraRank,
		DNope: c.DNope, DRope: c.DRope, DV: c.DV,
		RMSEps: c.RMSEps, Tau: tau, Rope: rope,
		IndexHeads: c.IndexerHeads, IndexDim: c.IndexerDim, IndexTopK: c.IndexerTopK,
		IndexEps:  c.IndexerNormEps,
		IndexRope: rope, // glm-dsa indexer: NORM rope with the same frequencies
	}
}

// Config returns the model's hyper-parameters.
func (m *Model) Config() Config { return m.cfg }

// RepackedBytes returns the bytes of weights the devices hold in a layout
// of their own, copied from the file when they loaded (the CPU's repacked
// weights, backend.Config.NoRepack): memory the model takes beyond the
// file's mapped pages.
func (m *Model) RepackedBytes() int64 {
	var n int64
	for _, d := range m.allDevices() {
		if r, ok := d.(interface{ RepackedBytes() int64 }); ok {
			n += r.RepackedBytes()
		}
	}
	return n
}

// Weights returns the model's tensors (read-only).
func (m *Model) Weights() *Weights { return m.w }

// Warnings returns what the model was loaded despite: metadata keys that
// Options.AllowUnknownKeys let through.
func (m *Model) Warnings() []string { return m.warnings }

// Plan returns how the model is split over its devices.
func (m *Model) Plan() Plan { return m.plan }

// Devices returns the devices the model runs on (device d holds shard d).
func (m *Model) Devices() []backend.Device { return m.devs }

// allDevices returns the plan's devices and the routed experts' CPU device
// when there is one.
func (m *Model) allDevices() []backend.Device {
	if m.experts == nil {
		return m.devs
	}
	return append(m.devs[:len(m.devs):len(m.devs)], m.experts)
}

// CPUMoEBlocks returns how many blocks, from block 0, have their routed
// experts on the CPU (Options.CPUMoE, NCPUMoE); blocks with a dense FFN
// among them have none.
func (m *Model) CPUMoEBlocks() int { return m.nCPUMoE }

// closeDevices closes the model's devices.
func (m *Model) closeDevices() error {
	var first error
	for _, d := range m.allDevices() {
		if err := d.Close(); err != nil && first == nil {
			first = err
		}
	}
	m.devs, m.experts = nil, nil
	return first
}

// Close releases the model's devices; it unmaps the file if Load opened
// it.
func (m *Model) Close() error {
	devErr := m.closeDevices()
	if m.ownFile && m.file != nil {
		err := m.file.Close()
		m.file = nil
		if err != nil {
			return err
		}
	}
	return devErr
}

// fileMeta adapts *gguf.File to the config reader.
type fileMeta struct{ f *gguf.File }

func (m fileMeta) Has(key string) bool {
	_, ok := m.f.Lookup(key)
	return ok
}
func (m fileMeta) Uint(key string) (uint64, error)   { return m.f.Uint(key) }
func (m fileMeta) Float(key string) (float64, error) { return m.f.Float(key) }
func (m fileMeta) String(key string) (string, error) { return m.f.String(key) }
func (m fileMeta) Bool(key string) (bool, error)     { return m.f.Bool(key) }
func (m fileMeta) Bools(key string) ([]bool, error) {
	v, ok := m.f.Lookup(key)
	if !ok {
		return nil, fmt.Errorf("gguf: key %q: missing", key)
	}
	if v.Type() != gguf.TypeArray || v.ElemType() != gguf.TypeBool {
		return nil, fmt.Errorf("gguf: key %q: is %s, want an array of bool", key, v.Type())
	}
	out := make([]bool, v.Len())
	for i := range out {
		b, err := v.Index(i).AsBool()
		if err != nil {
			return nil, fmt.Errorf("gguf: key %q[%d]: %w", key, i, err)
		}
		out[i] = b
	}
	return out, nil
}

func (m fileMeta) Floats(key string) ([]float64, error) { return m.f.Floats(key) }

func (m fileMeta) Keys() []string {
	keys := make([]string, len(m.f.KVs))
	for i, kv := range m.f.KVs {
		keys[i] = kv.Key
	}
	return keys
}

func (m fileMeta) Len(key string) (int, bool) {
	v, ok := m.f.Lookup(key)
	if !ok {
		return 0, false
	}
	return v.Len(), true
}
