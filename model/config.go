package model

import (
	"fmt"
	"math"
)

// Gating functions of the MoE router (GGUF expert_gating_func).
const (
	GatingSoftmax      = 1
	GatingSigmoid      = 2
	GatingSqrtSoftplus = 4
)

// Config holds every hyper-parameter of the forward pass, read from GGUF
// metadata (docs/MATH.md section 1) with llama.cpp's loader defaults.
type Config struct {
	Arch string // "glm-dsa" or "deepseek2"

	Embd         int  // embedding_length (E)
	BlockCount   int  // block_count: trunk + NextN blocks
	Layers       int  // trunk layers = BlockCount − NextN
	NextN        int  // nextn_predict_layers (MTP blocks; the first drafts tokens with Options.MTP)
	DenseLayers  int  // leading_dense_block_count
	Heads        int  // attention.head_count (H)
	HeadsKV      int  // attention.head_count_kv (1 for absorbed MLA)
	QLoraRank    int  // attention.q_lora_rank; 0 for "lite" models (attn_q)
	KVLoraRank   int  // attention.kv_lora_rank (kr)
	DNope        int  // per-head no-rope query/key dims (dn)
	DRope        int  // rope.dimension_count (dr)
	DV           int  // per-head value dims (dv)
	AbsorbedMLA  bool // the *_mla keys are present (split attn_k_b / attn_v_b)
	FF           int  // feed_forward_length (dense layers)
	FFExp        int  // expert_feed_forward_length
	Experts      int  // expert_count
	ExpertsUsed  int  // expert_used_count
	SharedExp    int  // expert_shared_count
	ExpGroups    int  // expert_group_count (1 = no group-limited routing)
	ExpGroupsUse int  // expert_group_used_count
	// ExpWeightsScale multiplies the routed-expert weights; 0 or 1 means
	// no scaling, as in llama.cpp.
	ExpWeightsScale float32
	ExpWeightsNorm  bool // expert_weights_norm
	Gating          int  // expert_gating_func: GatingSoftmax, GatingSigmoid, GatingSqrtSoftplus

	RMSEps float32 // attention.layer_norm_rms_epsilon
	// IndexerNormEps is the indexer LayerNorm epsilon: 0 for glm-dsa
	// (llama.cpp never reads one).
	IndexerNormEps float32

	RopeBase       float32 // rope.freq_base
	RopeScaling    string  // rope.scaling.type: "none", "linear" or "yarn"
	RopeFactor     float32 // rope.scaling.factor (1 without scaling)
	RopeOrigCtx    int     // rope.scaling.original_context_length
	YaRNLogMul     float32 // L = yarn_log_multiplier/0.1 (deepseek2; 0 on glm-dsa)
	YaRNBetaFast   float32 // 32 unless set
	YaRNBetaSlow   float32 // 1 unless set
	RopeAttnFactor float32 // rope.scaling.attn_factor (1 unless set)
	ContextLength  int     // context_length (training context)
	VocabSize      int     // vocab_size, or the token list length

	// DSA lightning indexer (glm-dsa only; zero otherwise).
	IndexerHeads int // attention.indexer.head_count
	IndexerDim   int // attention.indexer.key_length
	IndexerTopK  int // attention.indexer.top_k
	// IndexerFull is attention.indexer.types, one entry per trunk layer:
	// true for a layer with its own indexer, false for a GLM-5.2 "shared"
	// layer, which has no indexer tensors and attends to the keys the last
	// full layer before it chose. NextN blocks are full. nil: every layer
	// is full (GLM-5).
	IndexerFull []bool
}

// IndexerShared reports whether layer l reuses the previous full layer's
// DSA selection instead of running an indexer of its own.
func (c *Config) IndexerShared(l int) bool {
	return l < len(c.IndexerFull) && !c.IndexerFull[l]
}

// meta is the part of *gguf.File the config reader needs; a small
// interface so that tests can feed hand-made metadata.
type meta interface {
	Has(key string) bool
	Uint(key string) (uint64, error)
	Float(key string) (float64, error)
	String(key string) (string, error)
	Bool(key string) (bool, error)
	Bools(key string) ([]bool, error)
	Floats(key string) ([]float64, error)
	Len(key string) (int, bool) // number of elements of an array KV
	Keys() []string             // every key, in file order
}

// maxDim bounds every size read from metadata, so that a corrupt header
// cannot ask for a huge allocation.
const maxDim = 1 << 24

// configReader reads keys under one arch prefix and keeps the first error.
type configReader struct {
	m    meta
	arch string
	err  error
}

func (r *configReader) key(k string) string { return r.arch + "." + k }

func (r *configReader) fail(key, format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("model: key %q: %s", key, fmt.Sprintf(format, args...))
	}
}

// intKey reads a required integer in [lo, maxDim].
func (r *configReader) intKey(k string, lo int) int {
	key := r.key(k)
	if !r.m.Has(key) {
		r.fail(key, "missing")
		return 0
	}
	return r.intOpt(k, lo, 0)
}

// intOpt reads an optional integer in [lo, maxDim], def when absent.
func (r *configReader) intOpt(k string, lo, def int) int {
	key := r.key(k)
	if !r.m.Has(key) {
		return def
	}
	v, err := r.m.Uint(key)
	if err != nil {
		if r.err == nil {
			r.err = fmt.Errorf("model: %w", err)
		}
		return 0
	}
	if v < uint64(lo) || v > maxDim {
		r.fail(key, "value %d out of range [%d, %d]", v, lo, maxDim)
		return 0
	}
	return int(v)
}

// floatOpt reads an optional finite float, def when absent.
func (r *configReader) floatOpt(k string, def float32) float32 {
	key := r.key(k)
	if !r.m.Has(key) {
		return def
	}
	v, err := r.m.Float(key)
	if err != nil {
		if r.err == nil {
			r.err = fmt.Errorf("model: %w", err)
		}
		return 0
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		r.fail(key, "value %v is not finite", v)
	}
	return float32(v)
}

func (r *configReader) floatKey(k string) float32 {
	if key := r.key(k); !r.m.Has(key) {
		r.fail(key, "missing")
		return 0
	}
	return r.floatOpt(k, 0)
}

func (r *configReader) boolOpt(k string, def bool) bool {
	key := r.key(k)
	if !r.m.Has(key) {
		return def
	}
	v, err := r.m.Bool(key)
	if err != nil && r.err == nil {
		r.err = fmt.Errorf("model: %w", err)
	}
	return v
}

// readConfig builds a Config from metadata, applying llama.cpp's loader
// rules for glm-dsa and deepseek2 (docs/MATH.md section 1.2).
func readConfig(m meta) (Config, error) {
	arch, err := m.String("general.architecture")
	if err != nil {
		return Config{}, fmt.Errorf("model: %w", err)
	}
	if arch != "glm-dsa" && arch != "deepseek2" {
		return Config{}, fmt.Errorf("model: architecture %q is not supported (supported: glm-dsa, deepseek2; key general.architecture)", arch)
	}
	r := &configReader{m: m, arch: arch}
	c := Config{Arch: arch}
	dsa := arch == "glm-dsa"

	c.Embd = r.intKey("embedding_length", 1)
	c.BlockCount = r.intKey("block_count", 1)
	c.NextN = r.intOpt("nextn_predict_layers", 0, 0)
	c.DenseLayers = r.intOpt("leading_dense_block_count", 0, 0)
	c.Heads = r.intKey("attention.head_count", 1)
	c.HeadsKV = r.intOpt("attention.head_count_kv", 1, c.Heads)
	c.KVLoraRank = r.intKey("attention.kv_lora_rank", 1)
	c.DRope = r.intKey("rope.dimension_count", 2)
	c.FF = r.intOpt("feed_forward_length", 1, 0)
	c.FFExp = r.intKey("expert_feed_forward_length", 1)
	c.Experts = r.intOpt("expert_count", 0, 0)
	c.ExpertsUsed = r.intOpt("expert_used_count", 0, 0)
	c.SharedExp = r.intKey("expert_shared_count", 0)
	c.ExpGroups = r.intOpt("expert_group_count", 1, 1)
	c.ExpGroupsUse = r.intOpt("expert_group_used_count", 1, 1)
	c.ExpWeightsScale = r.floatOpt("expert_weights_scale", 0)
	c.ExpWeightsNorm = r.boolOpt("expert_weights_norm", false)
	c.RMSEps = r.floatKey("attention.layer_norm_rms_epsilon")
	c.RopeBase = r.floatOpt("rope.freq_base", 10000)
	c.ContextLength = r.intKey("context_length", 1)
	c.VocabSize = r.intOpt("vocab_size", 1, 0)
	if c.VocabSize == 0 {
		if n, ok := m.Len("tokenizer.ggml.tokens"); ok {
			c.VocabSize = n
		}
	}
	if r.err != nil {
		return Config{}, r.err
	}
	if c.NextN >= c.BlockCount {
		r.fail(r.key("nextn_predict_layers"), "%d NextN blocks leave no trunk layer of %d blocks", c.NextN, c.BlockCount)
	}
	c.Layers = c.BlockCount - c.NextN

	// "Lite" deepseek2 models have no q_lora_rank and use attn_q.
	lite := !dsa && (c.Layers == 26 || c.Layers == 27 || (c.Layers == 48 && c.VocabSize == 128256))
	if lite {
		c.QLoraRank = r.intOpt("attention.q_lora_rank", 0, 0)
	} else {
		c.QLoraRank = r.intKey("attention.q_lora_rank", 1)
	}

	if r.err == nil && c.DRope%2 != 0 {
		r.fail(r.key("rope.dimension_count"), "%d is odd", c.DRope)
	}

	// Head dims: absorbed MLA iff both *_mla keys exist (glm-dsa requires them).
	c.AbsorbedMLA = m.Has(r.key("attention.key_length_mla")) && m.Has(r.key("attention.value_length_mla"))
	if c.AbsorbedMLA {
		kMLA := r.intKey("attention.key_length_mla", 1)
		c.DV = r.intKey("attention.value_length_mla", 1)
		c.DNope = kMLA - c.DRope
		if r.err == nil && c.DNope <= 0 {
			r.fail(r.key("attention.key_length_mla"), "%d is not larger than rope.dimension_count %d", kMLA, c.DRope)
		}
		if kl := r.intOpt("attention.key_length", 1, c.KVLoraRank+c.DRope); kl != c.KVLoraRank+c.DRope && r.err == nil {
			r.fail(r.key("attention.key_length"), "%d, want kv_lora_rank + rope dims = %d", kl, c.KVLoraRank+c.DRope)
		}
		if vl := r.intOpt("attention.value_length", 1, c.KVLoraRank); vl != c.KVLoraRank && r.err == nil {
			r.fail(r.key("attention.value_length"), "%d, want kv_lora_rank = %d", vl, c.KVLoraRank)
		}
	} else {
		if dsa {
			r.fail(r.key("attention.key_length_mla"), "missing (glm-dsa requires MLA)")
		}
		kl := r.intKey("attention.key_length", 1)
		c.DV = r.intKey("attention.value_length", 1)
		c.DNope = kl - c.DRope
		if r.err == nil && c.DNope <= 0 {
			r.fail(r.key("attention.key_length"), "%d is not larger than rope.dimension_count %d", kl, c.DRope)
		}
	}

	// Layers and MoE.
	if c.DenseLayers > c.Layers {
		r.fail(r.key("leading_dense_block_count"), "%d exceeds the %d trunk layers", c.DenseLayers, c.Layers)
	}
	if c.DenseLayers > 0 && c.FF == 0 {
		r.fail(r.key("feed_forward_length"), "missing (needed by %d dense layers)", c.DenseLayers)
	}
	if c.DenseLayers < c.BlockCount { // some block is MoE (the NextN block is)
		if c.Experts == 0 {
			r.fail(r.key("expert_count"), "missing or 0 with %d MoE blocks", c.BlockCount-c.DenseLayers)
		}
		if c.ExpertsUsed == 0 || c.ExpertsUsed > c.Experts {
			r.fail(r.key("expert_used_count"), "%d, want 1 … expert_count (%d)", c.ExpertsUsed, c.Experts)
		}
		if c.Experts%c.ExpGroups != 0 {
			r.fail(r.key("expert_group_count"), "%d does not divide expert_count %d", c.ExpGroups, c.Experts)
		}
		if c.ExpGroupsUse > c.ExpGroups {
			r.fail(r.key("expert_group_used_count"), "%d exceeds expert_group_count %d", c.ExpGroupsUse, c.ExpGroups)
		}
		if c.ExpGroups > 1 && c.ExpertsUsed > c.ExpGroupsUse*(c.Experts/c.ExpGroups) {
			r.fail(r.key("expert_used_count"), "%d exceeds the experts of %d groups", c.ExpertsUsed, c.ExpGroupsUse)
		}
	}
	gkey := r.key("expert_gating_func")
	switch {
	case m.Has(gkey):
		c.Gating = r.intOpt("expert_gating_func", 0, 0)
		if r.err == nil && c.Gating != GatingSoftmax && c.Gating != GatingSigmoid && c.Gating != GatingSqrtSoftplus {
			r.fail(gkey, "gating function %d is not supported (1 softmax, 2 sigmoid, 4 sqrt-softplus)", c.Gating)
		}
	case dsa:
		c.Gating = GatingSigmoid
	case (c.Layers == 47 || c.Layers == 48) && c.VocabSize == 154880: // GLM-4.7-Flash
		c.Gating = GatingSigmoid
	default:
		c.Gating = GatingSoftmax
	}

	// RoPE scaling (docs/MATH.md sections 3.5 and 5.3).
	c.RopeScaling = "none"
	if k := r.key("rope.scaling.type"); m.Has(k) {
		s, err := m.String(k)
		if err != nil && r.err == nil {
			r.err = fmt.Errorf("model: %w", err)
		}
		switch s {
		case "none", "linear", "yarn":
			c.RopeScaling = s
		default:
			r.fail(k, "rope scaling %q is not supported", s)
		}
	}
	c.RopeFactor = 1
	if c.RopeScaling != "none" {
		c.RopeFactor = r.floatOpt("rope.scaling.factor", 1)
		if c.RopeFactor <= 0 {
			r.fail(r.key("rope.scaling.factor"), "%v is not positive", c.RopeFactor)
		}
	}
	c.RopeOrigCtx = r.intOpt("rope.scaling.original_context_length", 1, c.ContextLength)
	if !dsa {
		c.YaRNLogMul = r.floatOpt("rope.scaling.yarn_log_multiplier", 0) / 0.1
	}
	c.YaRNBetaFast = r.floatOpt("rope.scaling.yarn_beta_fast", 32)
	c.YaRNBetaSlow = r.floatOpt("rope.scaling.yarn_beta_slow", 1)
	c.RopeAttnFactor = r.floatOpt("rope.scaling.attn_factor", 1)
	if c.RopeAttnFactor == 0 {
		c.RopeAttnFactor = 1
	}

	if dsa {
		c.IndexerHeads = r.intKey("attention.indexer.head_count", 1)
		c.IndexerDim = r.intKey("attention.indexer.key_length", 1)
		c.IndexerTopK = r.intKey("attention.indexer.top_k", 1)
		if r.err == nil && c.IndexerDim < c.DRope {
			r.fail(r.key("attention.indexer.key_length"), "%d is less than rope.dimension_count %d", c.IndexerDim, c.DRope)
		}
		if r.err == nil && c.QLoraRank == 0 {
			r.fail(r.key("attention.q_lora_rank"), "missing (the DSA indexer needs the q latent)")
		}
		c.IndexerFull = r.indexerTypes(c.Layers)
	}
	if r.err != nil {
		return Config{}, r.err
	}
	return c, nil
}

// indexerTypes reads attention.indexer.types: one bool per trunk layer
// (llama.cpp's loader and converter: the config's indexer_types lists the
// num_hidden_layers trunk layers; NextN blocks are full), the first true (a
// shared layer needs a full one before it).
func (r *configReader) indexerTypes(layers int) []bool {
	key := r.key("attention.indexer.types")
	if r.err != nil || !r.m.Has(key) {
		return nil
	}
	types, err := r.m.Bools(key)
	switch {
	case err != nil:
		r.err = fmt.Errorf("model: %w", err)
	case len(types) != layers:
		r.fail(key, "%d entries, want one per trunk layer (block_count − nextn_predict_layers = %d)", len(types), layers)
	case !types[0]:
		r.fail(key, "layer 0 is shared: a shared layer reuses the selection of a full layer before it, and there is none")
	default:
		return types
	}
	return nil
}

// yarnG is g(f, m) = 1 + 0.1·m·ln f for f > 1, else 1 (docs/MATH.md
// section 3.5).
func yarnG(f, m float32) float32 {
	if f <= 1 {
		return 1
	}
	return 1 + 0.1*m*float32(math.Log(float64(f)))
}

// ropeScales returns the magnitude handed to the rope kernel (attn_factor)
// and the softmax scale τ = mscale²/sqrt(dn+dr) (docs/MATH.md section 3.5).
func (c *Config) ropeScales() (attnFactor, tau float32) {
	f := float32(1)
	if c.RopeScaling == "yarn" {
		f = c.RopeFactor
	}
	L := c.YaRNLogMul
	var a0 float32
	if L != 0 {
		a0 = 1 // g(f, L)/g(f, L): m = L on deepseek2
	} else {
		a0 = yarnG(f, 1)
	}
	a0 *= c.RopeAttnFactor
	attnFactor = a0 / yarnG(f, 1)
	mscale := a0 * yarnG(f, L)
	tau = mscale * mscale / float32(math.Sqrt(float64(c.DNope+c.DRope)))
	return attnFactor, tau
}
