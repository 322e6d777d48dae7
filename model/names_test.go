package model

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/internal/testmodels"
)

func TestGGUFToHF(t *testing.T) {
	tests := []struct {
		arch, gguf string
		want       HFName
	}{
		{"glm-dsa", "token_embd.weight", HFName{Name: "model.embed_tokens.weight"}},
		{"glm-dsa", "output_norm.weight", HFName{Name: "model.norm.weight"}},
		{"deepseek2", "output.weight", HFName{Name: "lm_head.weight"}},
		{"glm-dsa", "blk.0.attn_norm.weight", HFName{Name: "model.layers.0.input_layernorm.weight"}},
		{"glm-dsa", "blk.12.ffn_norm.weight", HFName{Name: "model.layers.12.post_attention_layernorm.weight"}},
		{"glm-dsa", "blk.0.attn_q_a.weight", HFName{Name: "model.layers.0.self_attn.q_a_proj.weight"}},
		{"glm-dsa", "blk.0.attn_q_a_norm.weight", HFName{Name: "model.layers.0.self_attn.q_a_layernorm.weight"}},
		{"glm-dsa", "blk.0.attn_q_b.weight", HFName{Name: "model.layers.0.self_attn.q_b_proj.weight"}},
		{"deepseek2", "blk.3.attn_q.weight", HFName{Name: "model.layers.3.self_attn.q_proj.weight"}},
		{"deepseek2", "blk.0.attn_kv_a_mqa.weight", HFName{Name: "model.layers.0.self_attn.kv_a_proj_with_mqa.weight"}},
		{"deepseek2", "blk.0.attn_kv_a_norm.weight", HFName{Name: "model.layers.0.self_attn.kv_a_layernorm.weight"}},
		{"deepseek2", "blk.0.attn_kv_b.weight", HFName{Name: "model.layers.0.self_attn.kv_b_proj.weight"}},
		{"glm-dsa", "blk.5.attn_k_b.weight", HFName{Name: "model.layers.5.self_attn.kv_b_proj.weight", Part: PartKB}},
		{"glm-dsa", "blk.5.attn_v_b.weight", HFName{Name: "model.layers.5.self_attn.kv_b_proj.weight", Part: PartVB}},
		{"glm-dsa", "blk.0.attn_output.weight", HFName{Name: "model.layers.0.self_attn.o_proj.weight"}},
		{"glm-dsa", "blk.0.indexer.attn_q_b.weight", HFName{Name: "model.layers.0.self_attn.indexer.wq_b.weight"}},
		{"glm-dsa", "blk.0.indexer.attn_k.weight", HFName{Name: "model.layers.0.self_attn.indexer.wk.weight"}},
		{"glm-dsa", "blk.0.indexer.k_norm.weight", HFName{Name: "model.layers.0.self_attn.indexer.k_norm.weight"}},
		{"glm-dsa", "blk.0.indexer.k_norm.bias", HFName{Name: "model.layers.0.self_attn.indexer.k_norm.bias"}},
		{"glm-dsa", "blk.0.indexer.proj.weight", HFName{Name: "model.layers.0.self_attn.indexer.weights_proj.weight"}},
		{"glm-dsa", "blk.0.ffn_gate.weight", HFName{Name: "model.layers.0.mlp.gate_proj.weight"}},
		{"glm-dsa", "blk.0.ffn_up.weight", HFName{Name: "model.layers.0.mlp.up_proj.weight"}},
		{"glm-dsa", "blk.0.ffn_down.weight", HFName{Name: "model.layers.0.mlp.down_proj.weight"}},
		{"glm-dsa", "blk.1.ffn_gate_inp.weight", HFName{Name: "model.layers.1.mlp.gate.weight"}},
		{"glm-dsa", "blk.1.exp_probs_b.bias", HFName{Name: "model.layers.1.mlp.gate.e_score_correction_bias"}},
		{"deepseek2", "blk.1.ffn_gate_exps.weight", HFName{Name: "model.layers.1.mlp.experts.{e}.gate_proj.weight", Stacked: true}},
		{"deepseek2", "blk.1.ffn_up_exps.weight", HFName{Name: "model.layers.1.mlp.experts.{e}.up_proj.weight", Stacked: true}},
		{"deepseek2", "blk.1.ffn_down_exps.weight", HFName{Name: "model.layers.1.mlp.experts.{e}.down_proj.weight", Stacked: true}},
		{"glm-dsa", "blk.1.ffn_gate_shexp.weight", HFName{Name: "model.layers.1.mlp.shared_experts.gate_proj.weight"}},
		{"glm-dsa", "blk.1.ffn_up_shexp.weight", HFName{Name: "model.layers.1.mlp.shared_experts.up_proj.weight"}},
		{"glm-dsa", "blk.1.ffn_down_shexp.weight", HFName{Name: "model.layers.1.mlp.shared_experts.down_proj.weight"}},
		{"glm-dsa", "blk.78.nextn.eh_proj.weight", HFName{Name: "model.layers.78.eh_proj.weight"}},
		{"glm-dsa", "blk.78.nextn.enorm.weight", HFName{Name: "model.layers.78.enorm.weight"}},
		{"glm-dsa", "blk.78.nextn.hnorm.weight", HFName{Name: "model.layers.78.hnorm.weight"}},
		{"glm-dsa", "blk.78.nextn.embed_tokens.weight", HFName{Name: "model.layers.78.embed_tokens.weight"}},
		{"glm-dsa", "blk.78.nextn.shared_head_head.weight", HFName{Name: "model.layers.78.shared_head.head.weight"}},
		{"glm-dsa", "blk.78.nextn.shared_head_norm.weight", HFName{Name: "model.layers.78.shared_head.norm.weight"}},
		{"deepseek2", "blk.61.nextn.eh_proj.weight", HFName{Name: "model.layers.61.eh_proj.weight"}},
		{"glm-dsa", "blk.2.attn_q_a.scale", HFName{Name: "model.layers.2.self_attn.q_a_proj.weight_scale"}},
		{"glm-dsa", "blk.2.ffn_up_exps.scale", HFName{Name: "model.layers.2.mlp.experts.{e}.up_proj.weight_scale", Stacked: true}},
		{"glm-dsa", "blk.2.attn_output.input_scale", HFName{Name: "model.layers.2.self_attn.o_proj.input_scale"}},
	}
	for _, tt := range tests {
		t.Run(tt.arch+"/"+tt.gguf, func(t *testing.T) {
			got, err := GGUFToHF(tt.arch, tt.gguf)
			if err != nil {
				t.Fatalf("GGUFToHF: %v", err)
			}
			if got != tt.want {
				t.Fatalf("GGUFToHF = %+v, want %+v", got, tt.want)
			}
			back, err := got.GGUF(tt.arch)
			if err != nil || back != tt.gguf {
				t.Fatalf("%+v.GGUF = %q, %v; want %q", got, back, err, tt.gguf)
			}
			if got.Part == "" {
				back, err := HFToGGUF(tt.arch, got.Name)
				if err != nil || back != tt.gguf {
					t.Fatalf("HFToGGUF(%q) = %q, %v; want %q", got.Name, back, err, tt.gguf)
				}
			}
		})
	}
}

func TestHFToGGUF(t *testing.T) {
	tests := []struct{ arch, hf, want string }{
		// The combined kv_b_proj maps to the unsplit tensor of older files.
		{"glm-dsa", "model.layers.4.self_attn.kv_b_proj.weight", "blk.4.attn_kv_b.weight"},
		// A single expert maps to the stacked tensor that holds it.
		{"glm-dsa", "model.layers.3.mlp.experts.17.down_proj.weight", "blk.3.ffn_down_exps.weight"},
		{"deepseek2", "model.layers.3.mlp.experts.0.gate_proj.weight", "blk.3.ffn_gate_exps.weight"},
		{"glm-dsa", "model.layers.3.mlp.experts.{e}.up_proj.weight", "blk.3.ffn_up_exps.weight"},
		{"glm-dsa", "model.layers.3.mlp.gate.e_score_correction_bias", "blk.3.exp_probs_b.bias"},
		{"deepseek2", "model.layers.0.self_attn.q_proj.weight", "blk.0.attn_q.weight"},
		{"glm-dsa", "model.layers.0.self_attn.indexer.weights_proj.weight", "blk.0.indexer.proj.weight"},
		{"glm-dsa", "lm_head.weight", "output.weight"},
		{"glm-dsa", "model.embed_tokens.weight", "token_embd.weight"},
	}
	for _, tt := range tests {
		t.Run(tt.arch+"/"+tt.hf, func(t *testing.T) {
			got, err := HFToGGUF(tt.arch, tt.hf)
			if err != nil || got != tt.want {
				t.Fatalf("HFToGGUF = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestHFNameParts(t *testing.T) {
	h := HFName{Name: "model.layers.1.mlp.experts.{e}.gate_proj.weight", Stacked: true}
	if got, want := h.Expert(7), "model.layers.1.mlp.experts.7.gate_proj.weight"; got != want {
		t.Errorf("Expert(7) = %q, want %q", got, want)
	}
	kb := HFName{Name: "model.layers.1.self_attn.kv_b_proj.weight", Part: PartKB}
	if got, want := kb.String(), "model.layers.1.self_attn.kv_b_proj.weight[k_b]"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	bad := []HFName{
		{Name: "model.layers.1.self_attn.kv_b_proj.weight", Part: "q_b"},
		{Name: "model.layers.1.self_attn.o_proj.weight", Part: PartVB},
		{Name: "lm_head.weight", Part: PartKB},
	}
	for _, h := range bad {
		t.Run(h.String(), func(t *testing.T) {
			if got, err := h.GGUF("glm-dsa"); !errors.Is(err, ErrUnknownTensorName) {
				t.Fatalf("GGUF = %q, %v; want ErrUnknownTensorName", got, err)
			}
		})
	}
}

func TestNamesUnknown(t *testing.T) {
	ggufNames := []struct{ arch, name string }{
		{"glm-dsa", "blk.0.attn_q.weight"},             // V2-Lite only
		{"deepseek2", "blk.0.indexer.proj.weight"},     // glm-dsa only
		{"glm-dsa", "blk.0.attn_qkv.weight"},           // not MLA
		{"glm-dsa", "rope_freqs.weight"},               // not in these archs
		{"glm-dsa", "blk.00.attn_norm.weight"},         // not canonical
		{"glm-dsa", "blk.x.attn_norm.weight"},          // no index
		{"glm-dsa", "blk.0."},                          // no leaf
		{"glm-dsa", "blk.0.attn_norm"},                 // no kind suffix
		{"glm-dsa", "blk.0.exp_probs_b.weight"},        // only a bias exists
		{"glm-dsa", "token_embd.weight.weight"},        // doubled suffix
		{"glm-dsa", ""},                                // empty
		{"deepseek2", "blk.1.ffn_gate_up_exps.weight"}, // fused layout has no HF name
	}
	for _, tt := range ggufNames {
		t.Run("gguf/"+tt.arch+"/"+tt.name, func(t *testing.T) {
			got, err := GGUFToHF(tt.arch, tt.name)
			if !errors.Is(err, ErrUnknownTensorName) {
				t.Fatalf("GGUFToHF = %+v, %v; want ErrUnknownTensorName", got, err)
			}
			if !strings.Contains(err.Error(), "\""+tt.name+"\"") {
				t.Errorf("error %q does not name the tensor", err)
			}
		})
	}
	hfNames := []struct{ arch, name string }{
		{"glm-dsa", "model.layers.0.self_attn.q_proj.weight"},
		{"deepseek2", "model.layers.0.self_attn.indexer.wk.weight"},
		{"glm-dsa", "model.layers.0.mlp.experts.x.gate_proj.weight"},
		{"glm-dsa", "model.layers.0.mlp.experts.01.gate_proj.weight"},
		{"glm-dsa", "model.layers.0.self_attn.rotary_emb.inv_freq"},
		{"glm-dsa", "model.lm_head.weight"},
	}
	for _, tt := range hfNames {
		t.Run("hf/"+tt.arch+"/"+tt.name, func(t *testing.T) {
			got, err := HFToGGUF(tt.arch, tt.name)
			if !errors.Is(err, ErrUnknownTensorName) {
				t.Fatalf("HFToGGUF = %q, %v; want ErrUnknownTensorName", got, err)
			}
			if !strings.Contains(err.Error(), "\""+tt.name+"\"") {
				t.Errorf("error %q does not name the tensor", err)
			}
		})
	}
	if _, err := GGUFToHF("llama", "token_embd.weight"); !errors.Is(err, ErrNamesArch) {
		t.Errorf("GGUFToHF(llama): %v, want ErrNamesArch", err)
	}
	if _, err := HFToGGUF("qwen3", "lm_head.weight"); !errors.Is(err, ErrNamesArch) {
		t.Errorf("HFToGGUF(qwen3): %v, want ErrNamesArch", err)
	}
}

// TestNamesRoundTripModels maps every tensor of every test model to its HF
// name and back.
func TestNamesRoundTripModels(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(testmodels.Dir(t), "*.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("no models in testdata/models")
	}
	// The derived models: the nextn one has the MTP tensors.
	paths = append(paths, testmodels.Path(t, "glm5-mini-nextn.Q8_0"), testmodels.Path(t, "glm5-mini-sparse.Q8_0"))
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			arch := f.Architecture()
			if len(f.Tensors) == 0 {
				t.Fatal("no tensors")
			}
			seen := map[string]string{}
			nextn := 0
			for _, ti := range f.Tensors {
				h, err := GGUFToHF(arch, ti.Name)
				if err != nil {
					t.Errorf("GGUFToHF: %v", err)
					continue
				}
				back, err := h.GGUF(arch)
				if err != nil || back != ti.Name {
					t.Errorf("%s -> %s -> %q, %v", ti.Name, h, back, err)
				}
				if h.Stacked != (len(ti.Dims) == 3 && strings.Contains(ti.Name, "_exps.")) {
					t.Errorf("%s: Stacked = %v for dims %v", ti.Name, h.Stacked, ti.Dims)
				}
				if prev, ok := seen[h.String()]; ok {
					t.Errorf("%s and %s both map to %s", prev, ti.Name, h)
				}
				seen[h.String()] = ti.Name
				if strings.Contains(ti.Name, ".nextn.") {
					nextn++
				}
			}
			if strings.Contains(path, "nextn.Q8_0") && nextn != 6 {
				t.Errorf("%d nextn tensors, want 6", nextn)
			}
		})
	}
}
