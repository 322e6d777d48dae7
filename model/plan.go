package model

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/glmrun/glmrun/attention"
	"github.com/glmrun/glmrun/backend"
	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/tensor"
)

// Plan is how a model is split over Devices devices (tensor parallelism).
//
//   - Attention: the heads are split, device d holding heads
//     [d·Heads, (d+1)·Heads): rows of attn_q_b (attn_q), attn_k_b and
//     attn_v_b, and the matching columns of attn_output, whose products
//     are partial sums added up by an all-reduce. The latent projections
//     (attn_q_a, attn_kv_a_mqa and their norms) and the latent KV cache are
//     replicated: every head reads the whole latent, and at kv_lora_rank
//   - rope dims (576 floats per token and layer on GLM-5) the cache is
//     small next to the weights.
//   - DSA indexer: replicated. Its weights are small (GLM-5: 32 heads x 128
//     over the q latent, ~20 MB per layer at Q8_0 of ~6 GB per layer) and
//     its top-k needs the sum over all indexer heads of every key's score,
//     so splitting its heads would add an all-reduce of [T, keys] scores
//     per layer for little memory; every device computes the same
//     selection.
//   - Dense FFN and the shared expert: the intermediate dimension is
//     split: rows of ffn_gate/ffn_up, columns of ffn_down, then an
//     all-reduce (one per layer, together with the routed experts).
//   - Routed experts: expert parallel, device d holding experts
//     [d·Experts, (d+1)·Experts) whole; the router (ffn_gate_inp,
//     exp_probs_b) is replicated, so every device routes every token and
//     runs the tokens routed to its experts.
//   - token_embd, output_norm, output and NextN-only tensors live on
//     device 0, which embeds the tokens (then broadcasts) and computes the
//     logits.
//
// A column shard whose ends do not fall on quantization block
// boundaries (attn_output of a tiny model split 8 ways in Q4_K) is kept as
// F32; see backend.Matrix.SliceCols.
type Plan struct {
	Devices  int
	Heads    int // attention heads per device
	FF       int // dense FFN intermediate size per device
	SharedFF int // shared-expert intermediate size per device
	Experts  int // routed experts per device
}

// NewPlan splits c over n devices. It fails when n does not divide the
// heads, the routed experts or the dense and shared FFN sizes.
func NewPlan(c *Config, n int) (Plan, error) {
	if n < 1 {
		return Plan{}, fmt.Errorf("model: tensor parallelism %d: want at least 1 device", n)
	}
	p := Plan{Devices: n}
	var err error
	div := func(what string, v int) int {
		if v%n != 0 && err == nil {
			err = fmt.Errorf("model: %d devices do not divide the %d %s; use a tensor parallelism that divides it", n, v, what)
		}
		return v / n
	}
	p.Heads = div("attention heads (attention.head_count)", c.Heads)
	if c.DenseLayers > 0 {
		p.FF = div("dense FFN columns (feed_forward_length)", c.FF)
	}
	if c.DenseLayers < c.BlockCount {
		p.Experts = div("routed experts (expert_count)", c.Experts)
		if c.SharedExp > 0 {
			p.SharedFF = div("shared-expert columns (expert_feed_forward_length x expert_shared_count)", c.FFExp*c.SharedExp)
		}
	}
	if err != nil {
		return Plan{}, err
	}
	return p, nil
}

// Placement says where a tensor lives under a Plan.
type Placement int

const (
	// Replicated tensors are whole on every device.
	Replicated Placement = iota
	// SplitRows tensors are split evenly by rows (heads, FFN columns of
	// gate/up, experts).
	SplitRows
	// SplitCols tensors are split evenly by columns (attn_output,
	// ffn_down, ffn_down_shexp).
	SplitCols
	// First tensors live on device 0 only.
	First
)

func (p Placement) String() string {
	switch p {
	case Replicated:
		return "replicated"
	case SplitRows:
		return "split rows"
	case SplitCols:
		return "split columns"
	case First:
		return "device 0"
	}
	return "placement(" + strconv.Itoa(int(p)) + ")"
}

// Place returns where the tensor name of a model with config c lives.
func Place(c *Config, name string) Placement {
	layer, ok := layerOf(name)
	if !ok {
		return First // token_embd, output_norm, output
	}
	base := strings.TrimPrefix(name, "blk."+strconv.Itoa(layer)+".")
	switch {
	case strings.HasPrefix(base, "nextn."):
		return First
	case strings.HasSuffix(base, ".scale"):
		return Replicated // per-tensor or per-expert scalars
	}
	switch strings.TrimSuffix(base, ".weight") {
	case "attn_q", "attn_q_b", "attn_k_b", "attn_v_b", "attn_kv_b",
		"ffn_gate", "ffn_up", "ffn_gate_shexp", "ffn_up_shexp",
		"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps", "ffn_gate_up_exps":
		return SplitRows
	case "attn_output", "ffn_down", "ffn_down_shexp":
		return SplitCols
	}
	return Replicated
}

// TensorDesc describes a tensor from its header alone.
type TensorDesc struct {
	Name string
	Type tensor.Type
	Dims []int64 // ggml order: Dims[0] is the row length
}

// DeviceMemory is what one device holds under a Plan.
type DeviceMemory struct {
	Replicated int64 // bytes of replicated tensors
	Sharded    int64 // bytes of this device's shards
	First      int64 // bytes of device-0 tensors (0 on the others)
	// Expanded counts the bytes of column shards kept as F32 (included
	// in Sharded) because their ends are not on block boundaries.
	Expanded int64
	// KVPerToken is the latent KV cache (and indexer keys) per position
	// in bytes, in the cache type Memory was given, replicated on every
	// device.
	KVPerToken int64
}

// Weights returns the device's weight bytes.
func (m DeviceMemory) Weights() int64 { return m.Replicated + m.Sharded + m.First }

// Memory is the per-device memory of a model under a Plan.
type Memory struct {
	Plan    Plan
	Total   int64 // bytes of all tensors in the file
	Devices []DeviceMemory
}

// Memory computes what each device holds for the tensors of a model with
// config c (the GGUF header is enough: no tensor data is read). Tensors
// the plan splits must split evenly. It counts every tensor of the file as
// stored; Load uploads slightly different bytes in three cases: NextN
// blocks are not uploaded unless Options.MTP asks for the first, a legacy
// combined attn_kv_b is uploaded as F32 attn_k_b/attn_v_b, and ".scale"
// tensors are folded into their matrices. The KV cache is counted in rows
// of type cache; rows that are not whole blocks of it are an error.
func (p Plan) Memory(c *Config, tensors []TensorDesc, cache tensor.Type) (*Memory, error) {
	n := p.Devices
	m := &Memory{Plan: p, Devices: make([]DeviceMemory, n)}
	cacheRow := func(values int64, what string) (int64, error) {
		b, err := cache.RowSize(values)
		if err != nil {
			return 0, fmt.Errorf("model: a %s KV cache: %s: %w", attention.CacheTypeName(cache), what, err)
		}
		return b, nil
	}
	latent, err := cacheRow(int64(c.KVLoraRank+c.DRope), "latent rows")
	if err != nil {
		return nil, err
	}
	kv := int64(c.Layers) * latent
	for _, t := range tensors {
		if len(t.Dims) == 0 {
			return nil, fmt.Errorf("model: tensor %q has no dims", t.Name)
		}
		rows := int64(1)
		for _, d := range t.Dims[1:] {
			rows *= d
		}
		rb, err := t.Type.RowSize(t.Dims[0])
		if err != nil {
			return nil, fmt.Errorf("model: tensor %q: %w", t.Name, err)
		}
		size := rb * rows
		m.Total += size
		if strings.HasSuffix(t.Name, ".indexer.attn_k.weight") && len(t.Dims) == 2 {
			if l, ok := layerOf(t.Name); ok && l < c.Layers {
				key, err := cacheRow(t.Dims[1], "indexer keys of "+t.Name)
				if err != nil {
					return nil, err
				}
				kv += key
			}
		}
		switch pl := Place(c, t.Name); pl {
		case Replicated:
			for d := range m.Devices {
				m.Devices[d].Replicated += size
			}
		case First:
			m.Devices[0].First += size
		case SplitRows:
			if rows%int64(n) != 0 {
				return nil, fmt.Errorf("model: tensor %q: %d rows do not split over %d devices", t.Name, rows, n)
			}
			for d := range m.Devices {
				m.Devices[d].Sharded += size / int64(n)
			}
		case SplitCols:
			cols := t.Dims[0]
			if cols%int64(n) != 0 {
				return nil, fmt.Errorf("model: tensor %q: %d columns do not split over %d devices", t.Name, cols, n)
			}
			w := cols / int64(n)
			for d := range m.Devices {
				if n == 1 || backend.ColsAligned(t.Type, int(int64(d)*w), int(w)) {
					srb, err := t.Type.RowSize(w)
					if err != nil {
						return nil, fmt.Errorf("model: tensor %q: %w", t.Name, err)
					}
					m.Devices[d].Sharded += srb * rows
				} else {
					m.Devices[d].Sharded += 4 * w * rows
					m.Devices[d].Expanded += 4 * w * rows
				}
			}
		}
	}
	for d := range m.Devices {
		m.Devices[d].KVPerToken = kv
	}
	return m, nil
}

// layerOf returns N of a "blk.N.…" name.
func layerOf(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return 0, false
	}
	i := strings.IndexByte(rest, '.')
	if i <= 0 {
		return 0, false
	}
	l, err := strconv.Atoi(rest[:i])
	return l, err == nil
}

// ReadConfig reads the hyper-parameters of the model in f from its
// metadata alone (no tensor data), as Load does.
func ReadConfig(f *gguf.File) (Config, error) {
	c, err := readConfig(fileMeta{f})
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", f.Path, err)
	}
	return c, nil
}

// FileTensors describes the tensors of f for Plan.Memory.
func FileTensors(f *gguf.File) []TensorDesc {
	ts := make([]TensorDesc, len(f.Tensors))
	for i, t := range f.Tensors {
		ts[i] = TensorDesc{Name: t.Name, Type: t.Type, Dims: t.Dims}
	}
	return ts
}
