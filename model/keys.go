package model

import (
	"fmt"
	"slices"
	"strings"

	"github.com/glmrun/glmrun/gguf"
)

// KeyUse says what glmrun makes of a metadata key under the architecture's
// prefix ("glm-dsa.", "deepseek2.").
type KeyUse int

// What glmrun does with a key.
const (
	// KeyRead: a hyper-parameter glmrun reads and implements.
	KeyRead KeyUse = iota + 1
	// KeyInfo: informational, or at a value that changes nothing glmrun
	// computes.
	KeyInfo
	// KeyUnsupported: changes the forward pass in a way glmrun does not
	// implement; loading would give wrong logits.
	KeyUnsupported
	// KeyUnknown: a key glmrun does not know, so it cannot tell whether
	// it changes the forward pass.
	KeyUnknown
)

func (u KeyUse) String() string {
	switch u {
	case KeyRead:
		return "read"
	case KeyInfo:
		return "informational"
	case KeyUnsupported:
		return "not supported"
	case KeyUnknown:
		return "unknown"
	}
	return fmt.Sprintf("KeyUse(%d)", int(u))
}

// KeyStatus is one metadata key of a file and what glmrun makes of it.
type KeyStatus struct {
	Key string
	Use KeyUse
	Why string // for every use but KeyRead
}

// keyRule classifies a key (without the architecture prefix).
type keyRule struct {
	use KeyUse
	why string
	// only lists the architectures where use applies; elsewhere the key
	// is KeyUnsupported with otherWhy.
	only     []string
	otherWhy string
	// neutral, when set, reports whether the key's value changes nothing
	// (KeyInfo) although the key as such is KeyUnsupported.
	neutral func(m meta, key string, c *Config) bool
}

// readKeys are the keys readConfig reads (docs/MATH.md section 1.1).
var readKeys = []string{
	"embedding_length", "block_count", "nextn_predict_layers", "leading_dense_block_count",
	"context_length", "vocab_size", "feed_forward_length",
	"attention.head_count", "attention.head_count_kv", "attention.q_lora_rank", "attention.kv_lora_rank",
	"attention.key_length", "attention.value_length", "attention.key_length_mla", "attention.value_length_mla",
	"attention.layer_norm_rms_epsilon",
	"expert_count", "expert_used_count", "expert_shared_count", "expert_feed_forward_length",
	"expert_group_count", "expert_group_used_count", "expert_weights_scale", "expert_weights_norm",
	"expert_gating_func",
	"rope.dimension_count", "rope.freq_base", "rope.scaling.type", "rope.scaling.factor",
	"rope.scaling.original_context_length", "rope.scaling.attn_factor",
	"rope.scaling.yarn_beta_fast", "rope.scaling.yarn_beta_slow",
}

// keyRules classifies every key glmrun knows besides readKeys: those of
// llama.cpp's GGUF vocabulary (gguf-py's constants) that some architecture
// writes, and those of the GLM-5 family.
var keyRules = map[string]keyRule{
	"attention.indexer.head_count": dsaOnly, "attention.indexer.key_length": dsaOnly,
	"attention.indexer.top_k": dsaOnly, "attention.indexer.types": dsaOnly,
	"rope.scaling.yarn_log_multiplier": {use: KeyRead, only: []string{"deepseek2"},
		otherWhy: "glm-dsa has no YaRN log multiplier", neutral: noYaRN},

	"rope.scaling.finetuned": {use: KeyInfo, why: "says whether the model was fine-tuned on the scaled context"},
	"tensor_data_layout":     {use: KeyInfo, why: "the layout of the original checkpoint's tensors"},
	"expert_shared_feed_forward_length": {use: KeyUnsupported, why: "a shared-expert width other than expert_feed_forward_length × expert_shared_count",
		neutral: func(m meta, key string, c *Config) bool {
			v, err := m.Float(key)
			return err == nil && int(v) == c.FFExp*c.SharedExp
		}},

	// Keys whose usual value changes nothing.
	"attention.causal": {use: KeyUnsupported, why: "non-causal attention", neutral: func(m meta, key string, _ *Config) bool {
		b, err := m.Bool(key)
		return err == nil && b
	}},
	"attention.sliding_window":          zeroIsNeutral("sliding-window attention"),
	"attention.scale":                   zeroIsNeutral("an attention scale other than the MLA/YaRN one"),
	"attn_logit_softcapping":            zeroIsNeutral("attention logit soft-capping"),
	"final_logit_softcapping":           zeroIsNeutral("output logit soft-capping"),
	"router_logit_softcapping":          zeroIsNeutral("router logit soft-capping"),
	"swiglu_clamp_exp":                  zeroIsNeutral("clamped SwiGLU in the experts"),
	"swiglu_clamp_shexp":                zeroIsNeutral("clamped SwiGLU in the shared experts"),
	"logit_scale":                       oneIsNeutral("scaled output logits"),
	"embedding_scale":                   oneIsNeutral("scaled token embeddings"),
	"residual_scale":                    oneIsNeutral("a scaled residual stream"),
	"attention.output_scale":            oneIsNeutral("a scaled attention output"),
	"attention.value_scale":             oneIsNeutral("scaled attention values"),
	"rope.scaling.yarn_attn_factor":     oneIsNeutral("a YaRN attention factor"),
	"expert_group_scale":                oneIsNeutral("scaled expert groups"),
	"attention.temperature_scale":       zeroIsNeutral("attention temperature scaling"),
	"attention.temperature_length":      zeroIsNeutral("attention temperature scaling"),
	"rope.scaling.yarn_ext_factor":      {use: KeyUnsupported, why: "a YaRN extrapolation mix other than the one derived from the factor"},
	"rope.scaling.yarn_truncate":        {use: KeyUnsupported, why: "truncated YaRN correction dims"},
	"rope.scaling.alpha":                {use: KeyUnsupported, why: "NTK-alpha RoPE scaling"},
	"rope.freq_base_swa":                {use: KeyUnsupported, why: "sliding-window RoPE"},
	"rope.dimension_sections":           {use: KeyUnsupported, why: "multimodal RoPE sections"},
	"rope.dimension_count_swa":          {use: KeyUnsupported, why: "sliding-window RoPE"},
	"rope.section_order":                {use: KeyUnsupported, why: "multimodal RoPE sections"},
	"attention.layer_norm_epsilon":      {use: KeyUnsupported, why: "LayerNorm instead of RMSNorm"},
	"attention.clamp_kqv":               {use: KeyUnsupported, why: "clamped q/k/v"},
	"attention.max_alibi_bias":          {use: KeyUnsupported, why: "ALiBi"},
	"attention.indexer.kpool":           {use: KeyUnsupported, why: "pooled indexer keys"},
	"attention.compress_ratios":         {use: KeyUnsupported, why: "compressed attention"},
	"attention.compress_rope_freq_base": {use: KeyUnsupported, why: "compressed attention"},
	"attention.kv_lora_rank_swa":        {use: KeyUnsupported, why: "sliding-window MLA"},
	"attention.key_length_mla_swa":      {use: KeyUnsupported, why: "sliding-window MLA"},
	"attention.value_length_mla_swa":    {use: KeyUnsupported, why: "sliding-window MLA"},
	"attention.key_length_swa":          {use: KeyUnsupported, why: "sliding-window attention"},
	"attention.value_length_swa":        {use: KeyUnsupported, why: "sliding-window attention"},
	"attention.sliding_window_pattern":  {use: KeyUnsupported, why: "sliding-window attention"},
	"attention.shared_kv_layers":        {use: KeyUnsupported, why: "KV caches shared between layers"},
	"attention.recurrent_layers":        {use: KeyUnsupported, why: "recurrent layers"},
	"attention.rope_pattern":            {use: KeyUnsupported, why: "layers without RoPE"},
	"full_attention_interval":           {use: KeyUnsupported, why: "hybrid attention layers"},
	"interleave_moe_layer_step":         {use: KeyUnsupported, why: "interleaved dense and MoE layers"},
	"moe_every_n_layers":                {use: KeyUnsupported, why: "interleaved dense and MoE layers"},
	"expert_chunk_feed_forward_length":  {use: KeyUnsupported, why: "chunked experts"},
	"experts_per_group":                 {use: KeyUnsupported, why: "grouped experts"},
	"moe_latent_size":                   {use: KeyUnsupported, why: "latent MoE"},
	"expert_latent_length":              {use: KeyUnsupported, why: "latent MoE"},
	"use_parallel_residual":             {use: KeyUnsupported, why: "parallel attention and FFN"},
	"hyper_connection_count":            {use: KeyUnsupported, why: "hyper-connections"},
	"pooling_type":                      {use: KeyUnsupported, why: "an embedding model's pooling"},
	"decoder_start_token_id":            {use: KeyUnsupported, why: "an encoder-decoder model"},
	"embedding_length_out":              {use: KeyUnsupported, why: "a projected output"},
	"num_loops":                         {use: KeyUnsupported, why: "looped layers"},
}

// otherArchKeys are keys of llama.cpp's vocabulary that only other
// architectures write; each changes their forward pass.
var otherArchKeys = []string{
	"activation.situ_beta", "activation.situ_linear_beta", "activation_sparsity_scale",
	"attention.decay_lora_rank", "attention.gate_lora_rank", "attention.group_norm_epsilon",
	"attention.group_norm_groups", "attention.iclr_lora_rank", "attention.output_group_count",
	"attention.output_lora_rank", "attention.relative_buckets_count", "attention.value_expert_count",
	"attention.value_expert_used_count", "attention.value_residual_mix_lora_rank",
	"attention.indexer.block_size", "attention.indexer.kpool_select_tail", "attention.indexer.local_blocks",
	"block_size", "conv_group_size", "conv_kernel_size", "decoder_block_count", "deepstack_mapping",
	"embedding_length_per_layer_input", "features_length", "has_confidence_head", "hash_layer_count",
	"hidden_activation", "n_deepstack_layers", "norm_before_fc", "norm_before_residual",
	"rescale_every_n_layers", "sample_from_anchor", "selector_rank", "selector_top_k",
	"skip_loop_final_norm", "swin_norm", "target_hidden_size", "target_layers",
	"time_decay_extra_dim", "time_mix_extra_dim", "token_shift_count",
}

// unsupportedPrefixes are families of keys of other architectures, every
// one of which changes the forward pass.
var unsupportedPrefixes = map[string]string{
	"ssm.": "state-space (Mamba/KDA) layers", "wkv.": "RWKV time mixing", "kda.": "KDA linear attention",
	"hyper_connection.": "hyper-connections", "altup.": "AltUp", "ple.": "per-layer embeddings",
	"adapters.": "adapters", "hrm.": "HRM recurrence", "decision.": "decision layers",
	"convnext.": "ConvNeXt blocks", "posnet.": "PosNet blocks", "classifier.": "a classifier head",
	"shortconv.": "short convolutions", "attn_res.": "attention residual blocks",
}

var dsaOnly = keyRule{use: KeyRead, only: []string{"glm-dsa"},
	otherWhy: "the DSA indexer is glm-dsa's; a deepseek2 file with one is DeepSeek-V3.2 (deepseek32), which glmrun does not run"}

// zeroIsNeutral and oneIsNeutral make rules for a feature that a value
// of 0 (1) turns off.
func zeroIsNeutral(feature string) keyRule { return valueRule(feature, 0) }
func oneIsNeutral(feature string) keyRule  { return valueRule(feature, 1) }

func valueRule(feature string, off float64) keyRule {
	return keyRule{use: KeyUnsupported, why: feature, neutral: func(m meta, key string, _ *Config) bool {
		v, err := m.Float(key)
		if err == nil {
			return v == off
		}
		vs, err := m.Floats(key) // per-layer arrays
		return err == nil && !slices.ContainsFunc(vs, func(x float64) bool { return x != off })
	}}
}

// noYaRN reports that the file has no YaRN scaling, so YaRN parameters
// change nothing.
func noYaRN(_ meta, _ string, c *Config) bool { return c.RopeScaling != "yarn" }

// classifyKeys returns what glmrun makes of each key of m under c.Arch's
// prefix, in m's key order.
func classifyKeys(m meta, c *Config) []KeyStatus {
	prefix := c.Arch + "."
	var out []KeyStatus
	for _, key := range m.Keys() {
		k, ok := strings.CutPrefix(key, prefix)
		if !ok {
			continue
		}
		out = append(out, classifyKey(m, key, k, c))
	}
	return out
}

func classifyKey(m meta, key, k string, c *Config) KeyStatus {
	if slices.Contains(readKeys, k) {
		return KeyStatus{Key: key, Use: KeyRead}
	}
	rule, ok := keyRules[k]
	if !ok && slices.Contains(otherArchKeys, k) {
		return KeyStatus{Key: key, Use: KeyUnsupported, Why: "a feature of another architecture"}
	}
	if !ok {
		for p, why := range unsupportedPrefixes {
			if strings.HasPrefix(k, p) {
				return KeyStatus{Key: key, Use: KeyUnsupported, Why: why}
			}
		}
		return KeyStatus{Key: key, Use: KeyUnknown, Why: "not a key glmrun knows, so it cannot tell whether it changes the forward pass"}
	}
	use, why := rule.use, rule.why
	if rule.only != nil && !slices.Contains(rule.only, c.Arch) {
		use, why = KeyUnsupported, rule.otherWhy
	}
	if use == KeyUnsupported && rule.neutral != nil && rule.neutral(m, key, c) {
		return KeyStatus{Key: key, Use: KeyInfo, Why: "at a value that changes nothing: " + why + " is off"}
	}
	return KeyStatus{Key: key, Use: use, Why: why}
}

// unsupportedKeysError returns the error for the keys of statuses that
// glmrun cannot honour, or nil.
func unsupportedKeysError(path string, statuses []KeyStatus) error {
	var lines []string
	for _, s := range statuses {
		switch s.Use {
		case KeyUnsupported:
			lines = append(lines, fmt.Sprintf("key %q changes the forward pass (%s), which glmrun does not implement", s.Key, s.Why))
		case KeyUnknown:
			lines = append(lines, fmt.Sprintf("key %q is unknown to glmrun, which cannot tell whether it changes the forward pass", s.Key))
		}
	}
	if lines == nil {
		return nil
	}
	return fmt.Errorf("model: %s: %s; the logits would be wrong (load anyway with --force, Options.AllowUnknownKeys)",
		path, strings.Join(lines, "; "))
}

// KeyReport returns what glmrun makes of every key of f under its
// architecture's prefix, in file order.
func KeyReport(f *gguf.File) ([]KeyStatus, error) {
	m := fileMeta{f}
	c, err := readConfig(m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	return classifyKeys(m, &c), nil
}
