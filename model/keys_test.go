package model

import (
	"strings"
	"testing"

	"github.com/glmrun/glmrun/gguf"
)

// llamacppKeys are the architecture keys of llama.cpp's GGUF vocabulary
// (gguf-py's constants, build 11669), without the "{arch}." prefix.
var llamacppKeys = []string{
	"activation.situ_beta", "activation.situ_linear_beta", "activation_sparsity_scale", "adapters.count",
	"adapters.lora_rank", "adapters.router_gain", "adapters.token_ids_activate",
	"adapters.token_ids_substitute", "altup.active_idx", "altup.num_inputs", "attention.causal",
	"attention.clamp_kqv", "attention.compress_ratios", "attention.compress_rope_freq_base",
	"attention.decay_lora_rank", "attention.gate_lora_rank", "attention.group_norm_epsilon",
	"attention.group_norm_groups", "attention.head_count", "attention.head_count_kv",
	"attention.iclr_lora_rank", "attention.indexer.block_size", "attention.indexer.head_count",
	"attention.indexer.key_length", "attention.indexer.kpool", "attention.indexer.kpool_select_tail",
	"attention.indexer.local_blocks", "attention.indexer.top_k", "attention.indexer.types",
	"attention.key_length", "attention.key_length_mla", "attention.key_length_mla_swa",
	"attention.key_length_swa", "attention.kv_lora_rank", "attention.kv_lora_rank_swa",
	"attention.layer_norm_epsilon", "attention.layer_norm_rms_epsilon", "attention.max_alibi_bias",
	"attention.output_group_count", "attention.output_lora_rank", "attention.output_scale",
	"attention.q_lora_rank", "attention.recurrent_layers", "attention.relative_buckets_count",
	"attention.rope_pattern", "attention.scale", "attention.shared_kv_layers", "attention.sliding_window",
	"attention.sliding_window_pattern", "attention.temperature_length", "attention.temperature_scale",
	"attention.value_expert_count", "attention.value_expert_used_count", "attention.value_length",
	"attention.value_length_mla", "attention.value_length_mla_swa", "attention.value_length_swa",
	"attention.value_residual_mix_lora_rank", "attention.value_scale", "attn_logit_softcapping",
	"attn_res.block_size", "block_count", "block_size", "classifier.activation", "classifier.output_labels",
	"classifier.pooling_type", "context_length", "conv_group_size", "conv_kernel_size", "convnext.block_count",
	"convnext.embedding_length", "decision.block_count", "decision.head_count", "decision.max_head_tokens",
	"decision.routing_block_count", "decision.type", "decoder_block_count", "decoder_start_token_id",
	"deepstack_mapping", "embedding_length", "embedding_length_out", "embedding_length_per_layer_input",
	"embedding_scale", "expert_chunk_feed_forward_length", "expert_count", "expert_feed_forward_length",
	"expert_gating_func", "expert_group_count", "expert_group_scale", "expert_group_used_count",
	"expert_latent_length", "expert_shared_count", "expert_shared_feed_forward_length", "expert_used_count",
	"expert_weights_norm", "expert_weights_scale", "experts_per_group", "features_length",
	"feed_forward_length", "final_logit_softcapping", "full_attention_interval", "has_confidence_head",
	"hash_layer_count", "hidden_activation", "hrm.h_cycles", "hrm.l_cycles", "hrm.layers_per_stack",
	"hrm.prefix_lm", "hyper_connection.count", "hyper_connection.epsilon", "hyper_connection.low_rank",
	"hyper_connection.magnitude", "hyper_connection.sinkhorn_iterations", "interleave_moe_layer_step",
	"kda.gate_lower_bound", "kda.head_dim", "kda.safe_gate", "leading_dense_block_count", "logit_scale",
	"moe_every_n_layers", "moe_latent_size", "n_deepstack_layers", "nextn_predict_layers", "norm_before_fc",
	"norm_before_residual", "num_loops", "ple.conv_kernel", "ple.eos_token_id", "ple.head_offsets",
	"ple.head_vocab_sizes", "ple.heads_per_ngram", "ple.image_token_id", "ple.layer_multipliers", "ple.layers",
	"ple.ngram_size", "pooling_type", "posnet.block_count", "posnet.embedding_length", "rescale_every_n_layers",
	"residual_scale", "rope.dimension_count", "rope.dimension_count_swa", "rope.dimension_sections",
	"rope.freq_base", "rope.freq_base_swa", "rope.scaling.alpha", "rope.scaling.attn_factor",
	"rope.scaling.factor", "rope.scaling.finetuned", "rope.scaling.original_context_length",
	"rope.scaling.type", "rope.scaling.yarn_attn_factor", "rope.scaling.yarn_beta_fast",
	"rope.scaling.yarn_beta_slow", "rope.scaling.yarn_ext_factor", "rope.scaling.yarn_log_multiplier",
	"rope.scaling.yarn_truncate", "rope.section_order", "router_logit_softcapping", "sample_from_anchor",
	"selector_rank", "selector_top_k", "shortconv.l_cache", "skip_loop_final_norm", "ssm.conv_kernel",
	"ssm.dt_b_c_rms", "ssm.group_count", "ssm.inner_size", "ssm.state_size", "ssm.time_step_rank",
	"swiglu_clamp_exp", "swiglu_clamp_shexp", "swin_norm", "target_hidden_size", "target_layers",
	"tensor_data_layout", "time_decay_extra_dim", "time_mix_extra_dim", "token_shift_count",
	"use_parallel_residual", "vocab_size", "wkv.head_size",
}

// TestEveryKnownKey: glmrun has a rule for every architecture key that
// llama.cpp defines, for both architectures, and reads every key its
// configs depend on.
func TestEveryKnownKey(t *testing.T) {
	for _, arch := range []string{"glm-dsa", "deepseek2"} {
		c := &Config{Arch: arch, RopeScaling: "none"}
		var unknown []string
		for _, k := range llamacppKeys {
			st := classifyKey(fakeMeta{}, arch+"."+k, k, c)
			if st.Use == KeyUnknown {
				unknown = append(unknown, k)
			}
			if st.Use != KeyRead && st.Why == "" {
				t.Errorf("%s %s: %s without a reason", arch, k, st.Use)
			}
		}
		if unknown != nil {
			t.Errorf("%s: no rule for %q", arch, unknown)
		}
	}
	for _, k := range readKeys {
		if !strings.HasPrefix(k, "attention.") && !strings.Contains(strings.Join(llamacppKeys, " "), k) {
			t.Errorf("read key %q is not one of llama.cpp's", k)
		}
	}
}

// TestClassifyKeys: what glmrun makes of keys by architecture and value.
func TestClassifyKeys(t *testing.T) {
	for _, c := range []struct {
		name  string
		arch  string
		key   string
		value any
		yarn  bool
		want  KeyUse
	}{
		{"read", "glm-dsa", "attention.kv_lora_rank", 512, false, KeyRead},
		{"indexer on glm-dsa", "glm-dsa", "attention.indexer.types", []bool{true}, false, KeyRead},
		{"indexer on deepseek2", "deepseek2", "attention.indexer.top_k", 2048, false, KeyUnsupported},
		{"yarn log multiplier, deepseek2", "deepseek2", "rope.scaling.yarn_log_multiplier", 0.1, true, KeyRead},
		{"yarn log multiplier, glm-dsa without yarn", "glm-dsa", "rope.scaling.yarn_log_multiplier", 0.1, false, KeyInfo},
		{"yarn log multiplier, glm-dsa with yarn", "glm-dsa", "rope.scaling.yarn_log_multiplier", 0.1, true, KeyUnsupported},
		{"informational", "glm-dsa", "rope.scaling.finetuned", true, false, KeyInfo},
		{"causal", "glm-dsa", "attention.causal", true, false, KeyInfo},
		{"not causal", "glm-dsa", "attention.causal", false, false, KeyUnsupported},
		{"no sliding window", "deepseek2", "attention.sliding_window", 0, false, KeyInfo},
		{"sliding window", "deepseek2", "attention.sliding_window", 4096, false, KeyUnsupported},
		{"soft-capping off", "glm-dsa", "final_logit_softcapping", 0.0, false, KeyInfo},
		{"soft-capping", "glm-dsa", "final_logit_softcapping", 30.0, false, KeyUnsupported},
		{"logit scale 1", "glm-dsa", "logit_scale", 1.0, false, KeyInfo},
		{"logit scale", "glm-dsa", "logit_scale", 0.5, false, KeyUnsupported},
		{"clamp off per layer", "glm-dsa", "swiglu_clamp_exp", []float64{0, 0}, false, KeyInfo},
		{"clamp per layer", "glm-dsa", "swiglu_clamp_exp", []float64{0, 7}, false, KeyUnsupported},
		{"shared width as implied", "deepseek2", "expert_shared_feed_forward_length", 1024, false, KeyInfo},
		{"other shared width", "deepseek2", "expert_shared_feed_forward_length", 2048, false, KeyUnsupported},
		{"indexer kpool", "glm-dsa", "attention.indexer.kpool", 4, false, KeyUnsupported},
		{"hyper-connections", "glm-dsa", "hyper_connection_count", 4, false, KeyUnsupported},
		{"hyper-connection family", "glm-dsa", "hyper_connection.low_rank", 8, false, KeyUnsupported},
		{"ssm", "glm-dsa", "ssm.state_size", 128, false, KeyUnsupported},
		{"kda", "glm-dsa", "kda.head_dim", 128, false, KeyUnsupported},
		{"other architecture", "deepseek2", "swin_norm", true, false, KeyUnsupported},
		{"unknown", "glm-dsa", "attention.telepathy", 1, false, KeyUnknown},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := &Config{Arch: c.arch, RopeScaling: "none", FFExp: 512, SharedExp: 2}
			if c.yarn {
				cfg.RopeScaling = "yarn"
			}
			key := c.arch + "." + c.key
			m := fakeMeta{key: c.value}
			st := classifyKey(m, key, c.key, cfg)
			if st.Use != c.want || st.Key != key {
				t.Errorf("%s = %v (%s), want %v", key, st.Use, st.Why, c.want)
			}
			if got := classifyKeys(m, cfg); len(got) != 1 || got[0] != st {
				t.Errorf("classifyKeys = %v, want [%v]", got, st)
			}
		})
	}
}

// TestUnsupportedKeyLoad: a file with a key that changes the forward pass
// in a way glmrun does not implement fails to load with the key and the
// file named; AllowUnknownKeys loads it with a warning; another
// architecture's file names the supported ones.
func TestUnsupportedKeyLoad(t *testing.T) {
	src := modelPath(t, "glm5-mini.Q8_0")
	path := rewrite(t, src, func(f *gguf.File, w *gguf.Writer) error {
		w.SetKV("glm-dsa.hyper_connection_count", gguf.Uint32(4))
		w.SetKV("glm-dsa.attention.telepathy", gguf.Uint32(1))
		w.SetKV("glm-dsa.rope.scaling.finetuned", gguf.Bool(true))
		return nil
	})
	_, err := Load(path, Options{})
	if err == nil {
		t.Fatal("loaded a file with hyper-connections")
	}
	for _, want := range []string{path, `"glm-dsa.hyper_connection_count"`, `"glm-dsa.attention.telepathy"`, "--force"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if strings.Contains(err.Error(), "finetuned") {
		t.Errorf("error %q names an informational key", err)
	}
	m, err := Load(path, Options{AllowUnknownKeys: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if w := m.Warnings(); len(w) != 1 || !strings.Contains(w[0], "hyper_connection_count") {
		t.Errorf("warnings %q", w)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	report, err := KeyReport(f)
	if err != nil {
		t.Fatal(err)
	}
	uses := map[string]KeyUse{}
	for _, s := range report {
		uses[s.Key] = s.Use
	}
	if uses["glm-dsa.hyper_connection_count"] != KeyUnsupported || uses["glm-dsa.attention.telepathy"] != KeyUnknown ||
		uses["glm-dsa.rope.scaling.finetuned"] != KeyInfo || uses["glm-dsa.block_count"] != KeyRead {
		t.Errorf("report %v", uses)
	}

	for _, arch := range []string{"glm5next", "deepseek32", "llama", "qwen3moe"} {
		p := rewrite(t, src, func(f *gguf.File, w *gguf.Writer) error {
			w.SetKV("general.architecture", gguf.String(arch))
			return nil
		})
		_, err := Load(p, Options{AllowUnknownKeys: true})
		want := `architecture "` + arch + `" is not supported (supported: glm-dsa, deepseek2`
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", arch, err, want)
		}
	}
}
