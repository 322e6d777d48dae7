package convert

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/glmrun/glmrun/safetensors"
)

// synthCheckpoint writes a GLM-5-shaped (glm-dsa) bf16 checkpoint with
// pseudo-random weights and `layers` blocks (the first dense) into dir,
// for benchmarks. Its tokenizer is glm5-hfs's, padded to the vocabulary.
// Each MoE block is about 0.85 GB.
func synthCheckpoint(tb testing.TB, dir string, layers int) {
	tb.Helper()
	const (
		E, V, H, qr, kr, dn, dr, dv = 2048, 32768, 16, 768, 512, 128, 64, 128
		ff, fe, X, IH, ID           = 8192, 1024, 64, 16, 128
	)
	var ts []*safetensors.Tensor
	seed := uint32(1)
	// Tensors of one size share their data, so that the checkpoint is not
	// held in memory while it is written.
	bySize := map[int64][]byte{}
	bf16 := func(name string, shape ...int64) {
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		data, ok := bySize[n]
		if !ok {
			data = make([]byte, 2*n)
			for i := int64(0); i < n; i++ {
				seed = seed*1664525 + 1013904223
				// Values of either sign in [2^-8, 2^-6): no NaN, no infinity.
				binary.LittleEndian.PutUint16(data[2*i:], uint16(seed>>16)&0x807f|0x3b80)
			}
			bySize[n] = data
		}
		ts = append(ts, &safetensors.Tensor{Name: name, DType: safetensors.BF16, Shape: shape, Data: data})
	}
	bf16("model.embed_tokens.weight", V, E)
	bf16("lm_head.weight", V, E)
	bf16("model.norm.weight", E)
	for l := range layers {
		p := "model.layers." + strconv.Itoa(l) + "."
		bf16(p+"input_layernorm.weight", E)
		bf16(p+"post_attention_layernorm.weight", E)
		bf16(p+"self_attn.q_a_proj.weight", qr, E)
		bf16(p+"self_attn.q_a_layernorm.weight", qr)
		bf16(p+"self_attn.q_b_proj.weight", H*(dn+dr), qr)
		bf16(p+"self_attn.kv_a_proj_with_mqa.weight", kr+dr, E)
		bf16(p+"self_attn.kv_a_layernorm.weight", kr)
		bf16(p+"self_attn.kv_b_proj.weight", H*(dn+dv), kr)
		bf16(p+"self_attn.o_proj.weight", E, H*dv)
		bf16(p+"self_attn.indexer.wq_b.weight", IH*ID, qr)
		bf16(p+"self_attn.indexer.wk.weight", ID, E)
		bf16(p+"self_attn.indexer.k_norm.weight", ID)
		bf16(p+"self_attn.indexer.k_norm.bias", ID)
		bf16(p+"self_attn.indexer.weights_proj.weight", IH, E)
		if l == 0 {
			bf16(p+"mlp.gate_proj.weight", ff, E)
			bf16(p+"mlp.up_proj.weight", ff, E)
			bf16(p+"mlp.down_proj.weight", E, ff)
			continue
		}
		bf16(p+"mlp.gate.weight", X, E)
		bf16(p+"mlp.gate.e_score_correction_bias", X)
		for e := range X {
			q := p + "mlp.experts." + strconv.Itoa(e) + "."
			bf16(q+"gate_proj.weight", fe, E)
			bf16(q+"up_proj.weight", fe, E)
			bf16(q+"down_proj.weight", E, fe)
		}
		bf16(p+"mlp.shared_experts.gate_proj.weight", fe, E)
		bf16(p+"mlp.shared_experts.up_proj.weight", fe, E)
		bf16(p+"mlp.shared_experts.down_proj.weight", E, fe)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		tb.Fatal(err)
	}
	if err := safetensors.Write(f, map[string]string{"format": "pt"}, ts); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(hfDir, "glm5-hfs", name))
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	config := fmt.Sprintf(`{"architectures": ["GlmMoeDsaForCausalLM"], "hidden_size": %d, "vocab_size": %d,
		"num_hidden_layers": %d, "num_attention_heads": %d, "num_key_value_heads": %d, "q_lora_rank": %d,
		"kv_lora_rank": %d, "qk_nope_head_dim": %d, "qk_rope_head_dim": %d, "v_head_dim": %d,
		"intermediate_size": %d, "moe_intermediate_size": %d, "n_routed_experts": %d, "n_shared_experts": 1,
		"num_experts_per_tok": 8, "first_k_dense_replace": 1, "index_n_heads": %d, "index_head_dim": %d,
		"index_topk": 2048, "scoring_func": "sigmoid", "max_position_embeddings": 202752,
		"rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"}}`,
		E, V, layers, H, H, qr, kr, dn, dr, dv, ff, fe, X, IH, ID)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(config), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkConvert converts a synthetic GLM-5-shaped bf16 checkpoint
// (2 blocks, 1.5 GB; GLMRUN_CONVERT_BENCH_LAYERS sets the blocks) to each
// output type and reports the rate of tensor data written. Set
// GLMRUN_CONVERT_BENCH_DIR to keep the checkpoint there between runs (and
// to measure `glmrun convert` on it).
func BenchmarkConvert(b *testing.B) {
	layers := 2
	if s := os.Getenv("GLMRUN_CONVERT_BENCH_LAYERS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("GLMRUN_CONVERT_BENCH_LAYERS %q", s)
		}
		layers = n
	}
	dir := os.Getenv("GLMRUN_CONVERT_BENCH_DIR")
	if dir == "" {
		dir = filepath.Join(b.TempDir(), "synth")
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		synthCheckpoint(b, dir, layers)
	}
	for _, outType := range []string{OutBF16, OutF16, OutQ8_0} {
		b.Run(outType, func(b *testing.B) {
			out := filepath.Join(b.TempDir(), "out.gguf")
			var r *Result
			for b.Loop() {
				var err error
				if r, err = Convert(dir, out, Options{OutType: outType}); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(r.DataBytes)
		})
	}
}
