package model

import (
	"fmt"
	"testing"

	"github.com/glmrun/glmrun/tensor"
)

// glm5Config is GLM-5's configuration (glm-dsa): 78 trunk layers and one
// NextN block, 3 of them dense.
func glm5Config() Config {
	return Config{
		Arch: "glm-dsa", Embd: 6144, BlockCount: 79, Layers: 78, NextN: 1, DenseLayers: 3,
		Heads: 64, HeadsKV: 1, QLoraRank: 2048, KVLoraRank: 512, DNope: 192, DRope: 64, DV: 256,
		AbsorbedMLA: true, FF: 12288, FFExp: 2048, Experts: 256, ExpertsUsed: 8, SharedExp: 1,
		ExpGroups: 1, ExpGroupsUse: 1, VocabSize: 154880,
		IndexerHeads: 32, IndexerDim: 128, IndexerTopK: 2048,
	}
}

// glm5Tensors lists GLM-5's tensors with UD-Q4_K_XL-like types (header
// only: no data).
func glm5Tensors(c *Config) []TensorDesc {
	E, H, V := int64(c.Embd), int64(c.Heads), int64(c.VocabSize)
	qr, kr, dn, dr, dv := int64(c.QLoraRank), int64(c.KVLoraRank), int64(c.DNope), int64(c.DRope), int64(c.DV)
	X, Fe, F := int64(c.Experts), int64(c.FFExp), int64(c.FF)
	Ih, Id := int64(c.IndexerHeads), int64(c.IndexerDim)
	ts := []TensorDesc{
		{"token_embd.weight", tensor.Q4_K, []int64{E, V}},
		{"output_norm.weight", tensor.F32, []int64{E}},
		{"output.weight", tensor.Q6_K, []int64{E, V}},
	}
	add := func(l int, name string, t tensor.Type, dims ...int64) {
		ts = append(ts, TensorDesc{fmt.Sprintf("blk.%d.%s", l, name), t, dims})
	}
	for l := 0; l < c.BlockCount; l++ {
		add(l, "attn_norm.weight", tensor.F32, E)
		add(l, "attn_q_a.weight", tensor.Q8_0, E, qr)
		add(l, "attn_q_a_norm.weight", tensor.F32, qr)
		add(l, "attn_q_b.weight", tensor.Q4_K, qr, H*(dn+dr))
		add(l, "attn_kv_a_mqa.weight", tensor.Q8_0, E, kr+dr)
		add(l, "attn_kv_a_norm.weight", tensor.F32, kr)
		add(l, "attn_k_b.weight", tensor.Q8_0, dn, kr, H)
		add(l, "attn_v_b.weight", tensor.Q8_0, kr, dv, H)
		add(l, "attn_output.weight", tensor.Q4_K, H*dv, E)
		add(l, "indexer.attn_q_b.weight", tensor.Q8_0, qr, Ih*Id)
		add(l, "indexer.attn_k.weight", tensor.Q8_0, E, Id)
		add(l, "indexer.k_norm.weight", tensor.F32, Id)
		add(l, "indexer.k_norm.bias", tensor.F32, Id)
		add(l, "indexer.proj.weight", tensor.F32, E, Ih)
		add(l, "ffn_norm.weight", tensor.F32, E)
		if l < c.DenseLayers {
			add(l, "ffn_gate.weight", tensor.Q4_K, E, F)
			add(l, "ffn_up.weight", tensor.Q4_K, E, F)
			add(l, "ffn_down.weight", tensor.Q6_K, F, E)
			continue
		}
		add(l, "ffn_gate_inp.weight", tensor.F32, E, X)
		add(l, "exp_probs_b.bias", tensor.F32, X)
		add(l, "ffn_gate_exps.weight", tensor.Q4_K, E, Fe, X)
		add(l, "ffn_up_exps.weight", tensor.Q4_K, E, Fe, X)
		add(l, "ffn_down_exps.weight", tensor.Q5_K, Fe, E, X)
		add(l, "ffn_gate_shexp.weight", tensor.Q4_K, E, Fe)
		add(l, "ffn_up_shexp.weight", tensor.Q4_K, E, Fe)
		add(l, "ffn_down_shexp.weight", tensor.Q6_K, Fe, E)
		if l >= c.Layers {
			add(l, "nextn.eh_proj.weight", tensor.Q8_0, 2*E, E)
			add(l, "nextn.enorm.weight", tensor.F32, E)
			add(l, "nextn.hnorm.weight", tensor.F32, E)
			add(l, "nextn.shared_head_norm.weight", tensor.F32, E)
		}
	}
	return ts
}

// rowBytes is RowSize for a test: cols elements of t.
func rowBytes(t *testing.T, typ tensor.Type, cols int64) int64 {
	t.Helper()
	n, err := typ.RowSize(cols)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPlanGLM5 computes the 8-device plan of GLM-5 from its configuration
// and tensor headers alone and checks the arithmetic: every device holds
// the replicated tensors and 1/8 of the split ones, device 0 the
// embeddings, output head and NextN-only tensors; shards plus replicated
// plus device 0 make the file's total; the split part of a MoE layer is
// its 32 experts and 1/8 of its attention heads and shared expert.
func TestPlanGLM5(t *testing.T) {
	c := glm5Config()
	p, err := NewPlan(&c, 8)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Plan{Devices: 8, Heads: 8, FF: 1536, SharedFF: 256, Experts: 32}); p != want {
		t.Fatalf("plan %+v, want %+v", p, want)
	}
	ts := glm5Tensors(&c)
	mem, err := p.Memory(&c, ts, tensor.F32)
	if err != nil {
		t.Fatal(err)
	}
	var total, sharded int64
	for _, d := range ts {
		rows := int64(1)
		for _, x := range d.Dims[1:] {
			rows *= x
		}
		total += rowBytes(t, d.Type, d.Dims[0]) * rows
	}
	if mem.Total != total {
		t.Errorf("total %d bytes, tensors sum to %d", mem.Total, total)
	}
	d0 := mem.Devices[0]
	for d, dm := range mem.Devices {
		sharded += dm.Sharded
		if dm.Replicated != d0.Replicated || dm.Sharded != d0.Sharded || dm.KVPerToken != d0.KVPerToken {
			t.Errorf("device %d %+v differs from device 0 %+v", d, dm, d0)
		}
		if dm.Expanded != 0 {
			t.Errorf("device %d: %d bytes expanded to F32; GLM-5's shards are whole blocks", d, dm.Expanded)
		}
		if d > 0 && dm.First != 0 {
			t.Errorf("device %d holds %d bytes of device-0 tensors", d, dm.First)
		}
	}
	if got := sharded + d0.Replicated + d0.First; got != mem.Total {
		t.Errorf("shards %d + replicated %d + device 0 %d = %d, want the file's %d", sharded, d0.Replicated, d0.First, got, mem.Total)
	}

	// Device 0 only: embeddings, output head and norm, NextN extras.
	E, V := int64(c.Embd), int64(c.VocabSize)
	first := V*rowBytes(t, tensor.Q4_K, E) + V*rowBytes(t, tensor.Q6_K, E) + 4*E +
		E*rowBytes(t, tensor.Q8_0, 2*E) + 3*4*E
	if d0.First != first {
		t.Errorf("device 0 tensors %d bytes, want %d", d0.First, first)
	}
	// Sharded per device, by hand: per layer 8 heads of q_b, k_b, v_b,
	// attn_output; dense layers 1536 FFN columns; MoE layers 32 experts
	// and 256 shared-expert columns.
	attn := 8*256*rowBytes(t, tensor.Q4_K, 2048) + 8*512*rowBytes(t, tensor.Q8_0, 192) +
		8*256*rowBytes(t, tensor.Q8_0, 512) + E*rowBytes(t, tensor.Q4_K, 8*256)
	dense := 2*1536*rowBytes(t, tensor.Q4_K, E) + E*rowBytes(t, tensor.Q6_K, 1536)
	moe := 32*(2*2048*rowBytes(t, tensor.Q4_K, E)+E*rowBytes(t, tensor.Q5_K, 2048)) +
		2*256*rowBytes(t, tensor.Q4_K, E) + E*rowBytes(t, tensor.Q6_K, 256)
	if want := 79*attn + 3*dense + 76*moe; d0.Sharded != want {
		t.Errorf("sharded %d bytes per device, want %d", d0.Sharded, want)
	}
	// The latent cache (576 floats) and indexer keys (128) of the 78
	// trunk layers, float32, on every device.
	if want := int64(78 * (576 + 128) * 4); d0.KVPerToken != want {
		t.Errorf("KV %d bytes per token, want %d", d0.KVPerToken, want)
	}
	t.Logf("GLM-5 on 8 devices: file %.1f GB; device 0 %.1f GB, others %.1f GB (replicated %.2f GB); KV %d B/token",
		float64(mem.Total)/1e9, float64(d0.Weights())/1e9, float64(mem.Devices[1].Weights())/1e9,
		float64(d0.Replicated)/1e9, d0.KVPerToken)

	// 16 devices: 128-column shards of the Q6_K shared down projection are
	// not whole 256-element blocks and are kept as F32.
	p16, err := NewPlan(&c, 16)
	if err != nil {
		t.Fatal(err)
	}
	mem16, err := p16.Memory(&c, ts, tensor.F32)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(76) * E * 128 * 4; mem16.Devices[3].Expanded != want {
		t.Errorf("16 devices: %d bytes expanded, want %d", mem16.Devices[3].Expanded, want)
	}
	if _, err := NewPlan(&c, 3); err == nil {
		t.Error("3 devices accepted for 64 heads")
	}
}

// TestPlace checks the placement of each kind of tensor.
func TestPlace(t *testing.T) {
	c := glm5Config()
	for name, want := range map[string]Placement{
		"token_embd.weight":             First,
		"output.weight":                 First,
		"blk.78.nextn.eh_proj.weight":   First,
		"blk.3.attn_q_a.weight":         Replicated,
		"blk.3.attn_kv_a_mqa.weight":    Replicated,
		"blk.3.indexer.attn_q_b.weight": Replicated,
		"blk.3.ffn_gate_inp.weight":     Replicated,
		"blk.3.exp_probs_b.bias":        Replicated,
		"blk.3.ffn_up_exps.scale":       Replicated,
		"blk.3.attn_q_b.weight":         SplitRows,
		"blk.3.attn_k_b.weight":         SplitRows,
		"blk.3.ffn_down_exps.weight":    SplitRows,
		"blk.0.ffn_gate.weight":         SplitRows,
		"blk.3.attn_output.weight":      SplitCols,
		"blk.0.ffn_down.weight":         SplitCols,
		"blk.3.ffn_down_shexp.weight":   SplitCols,
		"blk.12.attn_kv_a_norm.weight":  Replicated,
		"blk.x.attn_output.weight":      First, // not a layer name
	} {
		if got := Place(&c, name); got != want {
			t.Errorf("Place(%q) = %v, want %v", name, got, want)
		}
	}
}
