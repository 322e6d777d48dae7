package model

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// This file maps tensor names between GGUF files (llama.cpp's names) and
// Hugging Face checkpoints for the MLA architectures glmrun runs
// (docs/FILE-LAYOUTS.md section 2). The mapping is purely about names: it never
// touches data, so the kv_b_proj split and the expert stacking show up only
// as flags on HFName.

// ErrUnknownTensorName is wrapped by the errors of GGUFToHF, HFToGGUF and
// HFName.GGUF for a name that has no counterpart in the given architecture.
var ErrUnknownTensorName = errors.New("unknown tensor name")

// ErrNamesArch is wrapped by the name-mapping errors for an architecture
// whose tensor names this file does not know.
var ErrNamesArch = errors.New("no tensor name mapping for architecture")

// Parts of kv_b_proj stored as separate GGUF tensors (HFName.Part).
const (
	PartKB = "k_b" // attn_k_b: the key half of every head, transposed
	PartVB = "v_b" // attn_v_b: the value half of every head
)

// ExpertPlaceholder stands for the expert index in the HF name of a stacked
// expert tensor, e.g. "model.layers.1.mlp.experts.{e}.gate_proj.weight".
const ExpertPlaceholder = "{e}"

// HFName is the Hugging Face side of a GGUF tensor name.
type HFName struct {
	// Name is the HF tensor name. For a stacked expert tensor it contains
	// ExpertPlaceholder where the expert index goes.
	Name string
	// Part is "" when the GGUF tensor is the whole HF tensor, or PartKB /
	// PartVB when it is one half of self_attn.kv_b_proj (split layout,
	// docs/FILE-LAYOUTS.md section 2.2: attn_k_b = ne{dn, kr, H}, attn_v_b =
	// ne{kr, dv, H}).
	Part string
	// Stacked reports that the GGUF tensor holds one HF tensor per expert,
	// stacked along its outermost dimension (ne[2] = expert index).
	Stacked bool
}

// Expert returns the HF name of expert e's slice of a stacked tensor, or
// Name when h is not stacked.
func (h HFName) Expert(e int) string {
	return strings.Replace(h.Name, ExpertPlaceholder, strconv.Itoa(e), 1)
}

// String returns Name, followed by "[k_b]" or "[v_b]" for a part of
// kv_b_proj.
func (h HFName) String() string {
	if h.Part != "" {
		return h.Name + "[" + h.Part + "]"
	}
	return h.Name
}

// GGUF returns the GGUF name of h: the exact inverse of GGUFToHF, so a part
// of kv_b_proj maps back to attn_k_b or attn_v_b.
func (h HFName) GGUF(arch string) (string, error) {
	name, err := HFToGGUF(arch, h.Name)
	if err != nil {
		return "", err
	}
	if h.Part == "" {
		return name, nil
	}
	var leaf string
	switch h.Part {
	case PartKB:
		leaf = "attn_k_b"
	case PartVB:
		leaf = "attn_v_b"
	default:
		return "", fmt.Errorf("model: %s: tensor %q: unknown part %q: %w", arch, h.Name, h.Part, ErrUnknownTensorName)
	}
	n, rest, ok := splitBlock(name, "blk.")
	if !ok || !strings.HasPrefix(rest, "attn_kv_b.") {
		return "", fmt.Errorf("model: %s: tensor %q: part %q of a tensor that is not kv_b_proj: %w", arch, h.Name, h.Part, ErrUnknownTensorName)
	}
	return "blk." + n + "." + leaf + strings.TrimPrefix(rest, "attn_kv_b"), nil
}

// nameArch is a bit set of the architectures a name exists in.
type nameArch uint8

const (
	archGLMDSA nameArch = 1 << iota
	archDeepseek2

	archMLA = archGLMDSA | archDeepseek2
)

// namesArch returns the bit for an architecture.
func namesArch(arch string) (nameArch, error) {
	switch arch {
	case "glm-dsa":
		return archGLMDSA, nil
	case "deepseek2":
		return archDeepseek2, nil
	}
	return 0, fmt.Errorf("model: %q: %w", arch, ErrNamesArch)
}

// nameRule maps one tensor base name (without .weight/.bias suffix).
type nameRule struct {
	gguf    string // GGUF base name, relative to "blk.N." for block tensors
	hf      string // HF base name, relative to "model.layers.N." for block tensors
	arch    nameArch
	part    string // PartKB / PartVB: GGUF -> HF only
	stacked bool   // hf contains ExpertPlaceholder
}

// globalRules are the tensors outside the blocks.
var globalRules = []nameRule{
	{gguf: "token_embd", hf: "model.embed_tokens", arch: archMLA},
	{gguf: "output_norm", hf: "model.norm", arch: archMLA},
	{gguf: "output", hf: "lm_head", arch: archMLA},
}

// blockRules are the tensors of one block, "blk.N." <-> "model.layers.N.".
var blockRules = []nameRule{
	{gguf: "attn_norm", hf: "input_layernorm", arch: archMLA},
	{gguf: "ffn_norm", hf: "post_attention_layernorm", arch: archMLA},

	// Multi-head latent attention.
	{gguf: "attn_q_a", hf: "self_attn.q_a_proj", arch: archMLA},
	{gguf: "attn_q_a_norm", hf: "self_attn.q_a_layernorm", arch: archMLA},
	{gguf: "attn_q_b", hf: "self_attn.q_b_proj", arch: archMLA},
	{gguf: "attn_q", hf: "self_attn.q_proj", arch: archDeepseek2}, // V2-Lite: no q LoRA
	{gguf: "attn_kv_a_mqa", hf: "self_attn.kv_a_proj_with_mqa", arch: archMLA},
	{gguf: "attn_kv_a_norm", hf: "self_attn.kv_a_layernorm", arch: archMLA},
	{gguf: "attn_kv_b", hf: "self_attn.kv_b_proj", arch: archMLA},
	{gguf: "attn_k_b", hf: "self_attn.kv_b_proj", arch: archMLA, part: PartKB},
	{gguf: "attn_v_b", hf: "self_attn.kv_b_proj", arch: archMLA, part: PartVB},
	{gguf: "attn_output", hf: "self_attn.o_proj", arch: archMLA},

	// DSA lightning indexer (GLM-5).
	{gguf: "indexer.attn_q_b", hf: "self_attn.indexer.wq_b", arch: archGLMDSA},
	{gguf: "indexer.attn_k", hf: "self_attn.indexer.wk", arch: archGLMDSA},
	{gguf: "indexer.k_norm", hf: "self_attn.indexer.k_norm", arch: archGLMDSA},
	{gguf: "indexer.proj", hf: "self_attn.indexer.weights_proj", arch: archGLMDSA},

	// Dense feed-forward.
	{gguf: "ffn_gate", hf: "mlp.gate_proj", arch: archMLA},
	{gguf: "ffn_up", hf: "mlp.up_proj", arch: archMLA},
	{gguf: "ffn_down", hf: "mlp.down_proj", arch: archMLA},

	// Mixture of experts.
	{gguf: "ffn_gate_inp", hf: "mlp.gate", arch: archMLA},
	{gguf: "ffn_gate_exps", hf: "mlp.experts.{e}.gate_proj", arch: archMLA, stacked: true},
	{gguf: "ffn_up_exps", hf: "mlp.experts.{e}.up_proj", arch: archMLA, stacked: true},
	{gguf: "ffn_down_exps", hf: "mlp.experts.{e}.down_proj", arch: archMLA, stacked: true},
	{gguf: "ffn_gate_shexp", hf: "mlp.shared_experts.gate_proj", arch: archMLA},
	{gguf: "ffn_up_shexp", hf: "mlp.shared_experts.up_proj", arch: archMLA},
	{gguf: "ffn_down_shexp", hf: "mlp.shared_experts.down_proj", arch: archMLA},

	// NextN / multi-token-prediction block extras.
	{gguf: "nextn.eh_proj", hf: "eh_proj", arch: archMLA},
	{gguf: "nextn.enorm", hf: "enorm", arch: archMLA},
	{gguf: "nextn.hnorm", hf: "hnorm", arch: archMLA},
	{gguf: "nextn.embed_tokens", hf: "embed_tokens", arch: archMLA},
	{gguf: "nextn.shared_head_head", hf: "shared_head.head", arch: archMLA},
	{gguf: "nextn.shared_head_norm", hf: "shared_head.norm", arch: archMLA},
}

// The expert-score bias has no ".weight"-style suffix on the HF side.
const (
	probsBiasGGUF = "exp_probs_b.bias"
	probsBiasHF   = "mlp.gate.e_score_correction_bias"
)

// suffixes pairs the GGUF and HF name endings of a tensor kind: weights,
// biases, and llama.cpp's optional per-tensor scales.
var suffixes = []struct{ gguf, hf string }{
	{".weight", ".weight"},
	{".bias", ".bias"},
	{".scale", ".weight_scale"},
	{".input_scale", ".input_scale"},
}

// GGUFToHF returns the Hugging Face name of the GGUF tensor name in a model
// of architecture arch ("glm-dsa" or "deepseek2"). attn_k_b and attn_v_b map
// to self_attn.kv_b_proj with Part set; ffn_{gate,up,down}_exps map to the
// per-expert pattern with Stacked set. A name without a counterpart is an
// error wrapping ErrUnknownTensorName.
func GGUFToHF(arch, name string) (HFName, error) {
	a, err := namesArch(arch)
	if err != nil {
		return HFName{}, err
	}
	if n, rest, ok := splitBlock(name, "blk."); ok {
		if rest == probsBiasGGUF {
			return HFName{Name: "model.layers." + n + "." + probsBiasHF}, nil
		}
		for _, s := range suffixes {
			base, ok := strings.CutSuffix(rest, s.gguf)
			if !ok {
				continue
			}
			for _, r := range blockRules {
				if r.gguf == base && r.arch&a != 0 {
					return HFName{Name: "model.layers." + n + "." + r.hf + s.hf, Part: r.part, Stacked: r.stacked}, nil
				}
			}
		}
	} else {
		for _, s := range suffixes {
			base, ok := strings.CutSuffix(name, s.gguf)
			if !ok {
				continue
			}
			for _, r := range globalRules {
				if r.gguf == base && r.arch&a != 0 {
					return HFName{Name: r.hf + s.hf}, nil
				}
			}
		}
	}
	return HFName{}, fmt.Errorf("model: %s: GGUF tensor %q: %w", arch, name, ErrUnknownTensorName)
}

// HFToGGUF returns the GGUF name of the Hugging Face tensor hf in a model of
// architecture arch. self_attn.kv_b_proj maps to the combined attn_kv_b (the
// layout of older files; use HFName.GGUF for attn_k_b / attn_v_b). An expert
// tensor, given with an index ("mlp.experts.7.up_proj.weight") or with
// ExpertPlaceholder, maps to the stacked tensor that holds it. A name without
// a counterpart is an error wrapping ErrUnknownTensorName.
func HFToGGUF(arch, hf string) (string, error) {
	a, err := namesArch(arch)
	if err != nil {
		return "", err
	}
	if n, rest, ok := splitBlock(hf, "model.layers."); ok {
		if rest == probsBiasHF {
			return "blk." + n + "." + probsBiasGGUF, nil
		}
		rest = normalizeExpert(rest)
		for _, s := range suffixes {
			base, ok := strings.CutSuffix(rest, s.hf)
			if !ok {
				continue
			}
			for _, r := range blockRules {
				if r.hf == base && r.part == "" && r.arch&a != 0 {
					return "blk." + n + "." + r.gguf + s.gguf, nil
				}
			}
		}
	} else {
		for _, s := range suffixes {
			base, ok := strings.CutSuffix(hf, s.hf)
			if !ok {
				continue
			}
			for _, r := range globalRules {
				if r.hf == base && r.arch&a != 0 {
					return r.gguf + s.gguf, nil
				}
			}
		}
	}
	return "", fmt.Errorf("model: %s: HF tensor %q: %w", arch, hf, ErrUnknownTensorName)
}

// splitBlock splits "<prefix>N.rest" into N and rest. N must be a decimal
// number without leading zeros, so that the mapping is one to one.
func splitBlock(name, prefix string) (n, rest string, ok bool) {
	s, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return "", "", false
	}
	n, rest, ok = strings.Cut(s, ".")
	if !ok || !isIndex(n) || rest == "" {
		return "", "", false
	}
	return n, rest, true
}

// isIndex reports whether s is a canonical non-negative decimal integer.
func isIndex(s string) bool {
	if s == "" || len(s) > 9 || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// normalizeExpert replaces the expert index in "mlp.experts.E.rest" by
// ExpertPlaceholder; other names are returned unchanged.
func normalizeExpert(rest string) string {
	const p = "mlp.experts."
	s, ok := strings.CutPrefix(rest, p)
	if !ok {
		return rest
	}
	e, tail, ok := strings.Cut(s, ".")
	if !ok || !isIndex(e) {
		return rest
	}
	return p + ExpertPlaceholder + "." + tail
}
