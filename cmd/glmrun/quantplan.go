package main

// The per-tensor type choices of "glmrun quantize": llama-quantize's rules
// (llama.cpp src/llama-quant.cpp, no importance matrix, no overrides) for
// the file types glmrun writes and the architectures it runs, so that a
// file quantized here has the tensor types of one quantized by llama.cpp.
// docs/FILE-LAYOUTS.md describes them in prose.

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/glmrun/glmrun/tensor"
)

// quantFType is a llama.cpp file type (llama_ftype) that glmrun quantize
// writes.
type quantFType struct {
	name string      // as llama-quantize spells it: "Q4_K_M"
	id   uint32      // general.file_type
	base tensor.Type // the type of a tensor no rule singles out
	// mixed is true for the _M mixes, which give attn_v-like tensors and
	// ffn_down Q6_K in the layers quantUseMoreBits picks.
	mixed bool
}

// quantFTypes lists the file types in the order the usage text gives them.
var quantFTypes = []quantFType{
	{name: "Q8_0", id: 7, base: tensor.Q8_0},
	{name: "Q6_K", id: 18, base: tensor.Q6_K},
	{name: "Q5_K_M", id: 17, base: tensor.Q5_K, mixed: true},
	{name: "Q4_K_M", id: 15, base: tensor.Q4_K, mixed: true},
}

// parseQuantFType returns the file type called name (any case).
func parseQuantFType(name string) (quantFType, bool) {
	for _, ft := range quantFTypes {
		if strings.EqualFold(ft.name, name) {
			return ft, true
		}
	}
	return quantFType{}, false
}

// quantArchs are the architectures whose rules planQuant knows (it has no
// Falcon or 70B-llama special cases, and these are what glmrun runs).
var quantArchs = []string{"glm-dsa", "deepseek2"}

// quantModel is what the rules read from a model's metadata.
type quantModel struct {
	arch    string
	layers  int // {arch}.block_count: every block, NextN/MTP ones included
	experts int // {arch}.expert_count (0 if absent)
}

// quantTensor is one input tensor.
type quantTensor struct {
	Name string
	Type tensor.Type
	Dims []int64
}

// quantChoice is the plan for one tensor: its input and the type it is
// written as (its input type when it is copied).
type quantChoice struct {
	quantTensor
	To tensor.Type
	// Wanted is the type the rules chose before the row width forced a
	// fallback; it equals To when there was none.
	Wanted tensor.Type
}

// Fallback reports whether the tensor's row width made its type fall back.
func (c *quantChoice) Fallback() bool { return c.To != c.Wanted }

// Convert reports whether the tensor's data changes (else it is copied).
func (c *quantChoice) Convert() bool { return c.To != c.Type }

// quantTensorLayer returns the block number of a tensor name "blk.N....",
// read as C's sscanf(name, "blk.%d.") reads it (llama.cpp sorts tensors
// and finds an expert tensor's layer that way): optional spaces and sign,
// then digits; what follows them is not checked.
func quantTensorLayer(name string) (int, bool) {
	s, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return 0, false
	}
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg, s = s[0] == '-', s[1:]
	}
	n, digits := 0, 0
	for ; digits < len(s) && s[digits] >= '0' && s[digits] <= '9'; digits++ {
		n = min(n*10+int(s[digits]-'0'), 1<<31) // beyond any layer count
	}
	if digits == 0 {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

// quantLlamaOrder sorts tensors as llama.cpp's model loader keeps them,
// which is the order llama-quantize writes them and applies its counters
// in: by block number (tensors outside blocks first), then by name,
// bytewise.
func quantLlamaOrder(ts []quantTensor) []quantTensor {
	layer := func(name string) int {
		if l, ok := quantTensorLayer(name); ok {
			return l
		}
		return -1
	}
	out := slices.Clone(ts)
	slices.SortStableFunc(out, func(a, b quantTensor) int {
		return cmp.Or(cmp.Compare(layer(a.Name), layer(b.Name)), strings.Compare(a.Name, b.Name))
	})
	return out
}

// quantCategory is llama.cpp's coarse tensor category.
type quantCategory int

const (
	catOther quantCategory = iota
	catTokenEmbd
	catOutput
	catAttnV // attn_v, attn_qkv and attn_kv_b: the "attention value" tensors
	catAttnK
	catAttnQ
	catAttnOutput
	catFFNUp
	catFFNGate
	catFFNDown
)

// quantCategoryOf classifies a tensor by name as llama.cpp does, by substring,
// first match winning. Note that the MLA tensors attn_k_b and attn_v_b
// match none of the attention patterns (they are "other"), while the
// indexer's indexer.attn_k.weight matches attn_k.
func quantCategoryOf(name string) quantCategory {
	switch {
	case name == "output.weight":
		return catOutput
	case name == "token_embd.weight" || name == "per_layer_token_embd.weight":
		return catTokenEmbd
	case strings.Contains(name, "attn_qkv.weight"), strings.Contains(name, "attn_kv_b.weight"),
		strings.Contains(name, "attn_v.weight"):
		return catAttnV
	case strings.Contains(name, "attn_k.weight"):
		return catAttnK
	case strings.Contains(name, "attn_q.weight"):
		return catAttnQ
	case strings.Contains(name, "attn_output.weight"):
		return catAttnOutput
	case strings.Contains(name, "ffn_up"):
		return catFFNUp
	case strings.Contains(name, "ffn_gate"):
		return catFFNGate
	case strings.Contains(name, "ffn_down"):
		return catFFNDown
	}
	return catOther
}

// quantKeepSubstrings are the name fragments of tensors llama-quantize never
// quantizes whatever their shape: norms, the MoE router and its tables,
// and small special-purpose tensors of other architectures (kept so that
// the list is the whole rule, not just the part GLM models exercise).
var quantKeepSubstrings = []string{
	"_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
	"per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight",
	"indexer.k_proj.weight", "indexer.q_proj.weight",
	"time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight",
	"time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight", "time_mix_a0.weight",
	"time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight", "time_mix_g2.weight",
	"time_mix_decay_w1.weight", "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight",
	"attn_rel_b.weight", ".position_embd", "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos",
	".patch_embd", ".patch_merger", "a.rvq.codebook", "mm.a.code_embd",
}

// quantizable reports whether llama-quantize may change a tensor's type:
// a matrix or stack of matrices (ggml counts dimensions up to the last one
// above 1) whose name ends in "weight" and is on no keep list.
func quantizable(t quantTensor) bool {
	dims := len(t.Dims)
	for dims > 1 && t.Dims[dims-1] == 1 {
		dims--
	}
	if dims < 2 || !strings.HasSuffix(t.Name, "weight") {
		return false
	}
	if t.Name == "position_embd.weight" || t.Name == "token_types.weight" {
		return false
	}
	for _, s := range quantKeepSubstrings {
		if strings.Contains(t.Name, s) {
			return false
		}
	}
	return true
}

// quantUseMoreBits picks the layers that llama.cpp's _M mixes give more
// bits: the first and last eighth, and every third layer between.
func quantUseMoreBits(layer, layers int) bool {
	return layer < layers/8 || layer >= 7*layers/8 || (layer-layers/8)%3 == 2
}

// quantRowFallback is llama.cpp's answer to a row width that is not a whole
// number of the chosen type's blocks: the 32-element type of about the
// same size, or F16 when even 32 does not divide the width.
func quantRowFallback(t quantTensor, want tensor.Type) (tensor.Type, error) {
	ncols := t.Dims[0]
	if ncols%int64(want.BlockSize()) == 0 {
		return want, nil
	}
	var to tensor.Type
	switch want {
	case tensor.Q4_K:
		to = tensor.Q5_0
	case tensor.Q5_K:
		to = tensor.Q5_1
	case tensor.Q6_K:
		to = tensor.Q8_0
	default:
		return 0, fmt.Errorf("tensor %s: rows of %d elements do not fit %s blocks of %d, and %s has no fallback type",
			t.Name, ncols, want, want.BlockSize(), want)
	}
	if ncols%int64(to.BlockSize()) != 0 {
		to = tensor.F16
	}
	return to, nil
}

// planQuant returns, in the order they are written, the type each tensor
// of a model gets in file type ft: llama-quantize's choice. The layer
// counters of llama.cpp's rules run over the tensors in that order.
func planQuant(ft quantFType, m quantModel, in []quantTensor) ([]quantChoice, error) {
	ts := quantLlamaOrder(in)
	tied := true // no output.weight: the output reuses token_embd
	nAttnV := 0
	for _, t := range ts {
		switch quantCategoryOf(t.Name) {
		case catOutput:
			tied = false
		case catAttnV:
			nAttnV++
		}
	}
	// The FFN rules look up a tensor's layer by counting the tensors of its
	// kind seen so far, except in MoE models, where llama.cpp reads the
	// layer from the name because expert tensors need not come in order.
	var iAttnV, iDown, iGate, iUp int
	layerOf := func(t quantTensor, counter int) (int, error) {
		if m.experts <= 1 {
			return counter, nil
		}
		l, ok := quantTensorLayer(t.Name)
		if !ok {
			return 0, fmt.Errorf("tensor %s: no layer number in its name (blk.N.)", t.Name)
		}
		if l < 0 || l >= m.layers {
			return 0, fmt.Errorf("tensor %s: layer %d, outside the model's %d blocks", t.Name, l, m.layers)
		}
		return l, nil
	}
	out := make([]quantChoice, 0, len(ts))
	for _, t := range ts {
		if !quantizable(t) {
			out = append(out, quantChoice{quantTensor: t, To: t.Type, Wanted: t.Type})
			continue
		}
		typ := ft.base
		cat := quantCategoryOf(t.Name)
		switch {
		case cat == catOutput || (tied && cat == catTokenEmbd):
			// The output matrix gets Q6_K unless the file is Q8_0, or
			// Q8_0 when its rows do not fit the base type's blocks.
			if t.Dims[0]%int64(ft.base.BlockSize()) != 0 {
				typ = tensor.Q8_0
			} else if typ != tensor.Q8_0 {
				typ = tensor.Q6_K
			}
		case cat == catTokenEmbd:
			// No rule for these file types.
		case cat == catAttnV:
			if ft.mixed && quantUseMoreBits(iAttnV, nAttnV) {
				typ = tensor.Q6_K
			}
			if m.experts == 8 {
				typ = tensor.Q8_0 // Mixtral: cheap there, and it pays
			}
			iAttnV++
		case cat == catAttnK:
			if m.experts == 8 {
				typ = tensor.Q8_0
			}
		case cat == catFFNDown:
			l, err := layerOf(t, iDown)
			if err != nil {
				return nil, err
			}
			if ft.mixed && quantUseMoreBits(l, m.layers) {
				typ = tensor.Q6_K
			}
			iDown++
		case cat == catAttnOutput:
			if m.experts == 8 && ft.name == "Q4_K_M" {
				typ = tensor.Q5_K
			}
		case cat == catFFNGate, cat == catFFNUp:
			// No type change for these file types, but llama.cpp still
			// resolves the layer, and fails where it cannot.
			counter := &iGate
			if cat == catFFNUp {
				counter = &iUp
			}
			if _, err := layerOf(t, *counter); err != nil {
				return nil, err
			}
			*counter++
		}
		to, err := quantRowFallback(t, typ)
		if err != nil {
			return nil, err
		}
		out = append(out, quantChoice{quantTensor: t, To: to, Wanted: typ})
	}
	return out, nil
}
