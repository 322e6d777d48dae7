package model

import (
	"fmt"

	"github.com/glmrun/glmrun/attention"
	"github.com/glmrun/glmrun/backend/cpu"
	"github.com/glmrun/glmrun/gguf"
)

// Options configures Load.
type Options struct {
	// Threads is the number of worker goroutines per kernel; 0 means
	// runtime.GOMAXPROCS(0).
	Threads int
}

// Model is a loaded glm-dsa or deepseek2 model. It is immutable and may be
// shared by several Sessions.
type Model struct {
	cfg     Config
	w       *Weights
	file    *gguf.File
	ownFile bool
	cpu     *cpu.CPU
	attnCfg attention.Config
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

// New loads the model held in an open GGUF file. The model reads f's
// mapped tensor data, so f must stay open while the model is used; Close
// on such a model does not close f.
func New(f *gguf.File, opts Options) (*Model, error) {
	cfg, err := readConfig(fileMeta{f})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	w, err := loadWeights(f, &cfg)
	if err != nil {
		return nil, err
	}
	m := &Model{cfg: cfg, w: w, file: f, cpu: cpu.New(opts.Threads)}
	m.attnCfg = m.newAttnConfig()
	return m, nil
}

// newAttnConfig derives the attention constants from the configuration.
func (m *Model) newAttnConfig() attention.Config {
	c := &m.cfg
	attnFactor, tau := c.ropeScales()
	rope := cpu.Rope{Dims: c.DRope, Base: c.RopeBase, FreqScale: 1, AttnFactor: attnFactor}
	switch c.RopeScaling {
	case "linear":
		rope.FreqScale = 1 / c.RopeFactor
	case "yarn":
		rope.FreqScale = 1 / c.RopeFactor
		rope.ExtFactor = 1
		rope.CorrDims = cpu.YaRNCorrDims(c.DRope, c.RopeOrigCtx, c.RopeBase, c.YaRNBetaFast, c.YaRNBetaSlow)
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

// Weights returns the model's tensors (read-only).
func (m *Model) Weights() *Weights { return m.w }

// Close releases the model; it unmaps the file if Load opened it.
func (m *Model) Close() error {
	if m.ownFile && m.file != nil {
		err := m.file.Close()
		m.file = nil
		return err
	}
	return nil
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
func (m fileMeta) Len(key string) (int, bool) {
	v, ok := m.f.Lookup(key)
	if !ok {
		return 0, false
	}
	return v.Len(), true
}
