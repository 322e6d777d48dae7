package model

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// fakeMeta is hand-made metadata for config tests.
type fakeMeta map[string]any

func (m fakeMeta) Has(key string) bool { _, ok := m[key]; return ok }

func (m fakeMeta) get(key string) (any, error) {
	v, ok := m[key]
	if !ok {
		return nil, fmt.Errorf("key %q: missing", key)
	}
	return v, nil
}

func (m fakeMeta) Uint(key string) (uint64, error) {
	v, err := m.get(key)
	if err != nil {
		return 0, err
	}
	i, ok := v.(int)
	if !ok || i < 0 {
		return 0, fmt.Errorf("key %q: not an unsigned integer", key)
	}
	return uint64(i), nil
}

func (m fakeMeta) Float(key string) (float64, error) {
	v, err := m.get(key)
	if err != nil {
		return 0, err
	}
	switch x := v.(type) {
	case float64:
		return x, nil
	case int:
		return float64(x), nil
	}
	return 0, fmt.Errorf("key %q: not a number", key)
}

func (m fakeMeta) String(key string) (string, error) {
	v, err := m.get(key)
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("key %q: not a string", key)
	}
	return s, nil
}

func (m fakeMeta) Bool(key string) (bool, error) {
	v, err := m.get(key)
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("key %q: not a bool", key)
	}
	return b, nil
}

func (m fakeMeta) Bools(key string) ([]bool, error) {
	v, err := m.get(key)
	if err != nil {
		return nil, err
	}
	b, ok := v.([]bool)
	if !ok {
		return nil, fmt.Errorf("key %q: not an array of bool", key)
	}
	return b, nil
}

func (m fakeMeta) Floats(key string) ([]float64, error) {
	v, err := m.get(key)
	if err != nil {
		return nil, err
	}
	f, ok := v.([]float64)
	if !ok {
		return nil, fmt.Errorf("key %q: not an array of numbers", key)
	}
	return f, nil
}

func (m fakeMeta) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (m fakeMeta) Len(key string) (int, bool) {
	v, ok := m[key].([]string)
	return len(v), ok
}

// glm5Meta returns GLM-5's published hyper-parameters (docs/MATH.md
// section 1.3).
func glm5Meta() fakeMeta {
	a := "glm-dsa."
	return fakeMeta{
		"general.architecture":                 "glm-dsa",
		a + "embedding_length":                 6144,
		a + "block_count":                      79,
		a + "nextn_predict_layers":             1,
		a + "leading_dense_block_count":        3,
		a + "attention.head_count":             64,
		a + "attention.head_count_kv":          1,
		a + "attention.q_lora_rank":            2048,
		a + "attention.kv_lora_rank":           512,
		a + "rope.dimension_count":             64,
		a + "attention.key_length_mla":         256,
		a + "attention.value_length_mla":       256,
		a + "attention.key_length":             576,
		a + "attention.value_length":           512,
		a + "feed_forward_length":              12288,
		a + "expert_feed_forward_length":       2048,
		a + "expert_count":                     256,
		a + "expert_used_count":                8,
		a + "expert_shared_count":              1,
		a + "expert_weights_scale":             2.5,
		a + "expert_weights_norm":              true,
		a + "rope.freq_base":                   1e6,
		a + "attention.layer_norm_rms_epsilon": 1e-5,
		a + "context_length":                   202752,
		a + "vocab_size":                       154880,
		a + "attention.indexer.head_count":     32,
		a + "attention.indexer.key_length":     128,
		a + "attention.indexer.top_k":          2048,
	}
}

// v3Meta returns DeepSeek-V3's hyper-parameters (deepseek2, YaRN, groups).
func v3Meta() fakeMeta {
	a := "deepseek2."
	return fakeMeta{
		"general.architecture":                     "deepseek2",
		a + "embedding_length":                     7168,
		a + "block_count":                          61,
		a + "leading_dense_block_count":            3,
		a + "attention.head_count":                 128,
		a + "attention.q_lora_rank":                1536,
		a + "attention.kv_lora_rank":               512,
		a + "rope.dimension_count":                 64,
		a + "attention.key_length_mla":             192,
		a + "attention.value_length_mla":           128,
		a + "feed_forward_length":                  18432,
		a + "expert_feed_forward_length":           2048,
		a + "expert_count":                         256,
		a + "expert_used_count":                    8,
		a + "expert_shared_count":                  1,
		a + "expert_group_count":                   8,
		a + "expert_group_used_count":              4,
		a + "expert_weights_scale":                 2.5,
		a + "expert_weights_norm":                  true,
		a + "rope.freq_base":                       10000,
		a + "rope.scaling.type":                    "yarn",
		a + "rope.scaling.factor":                  40,
		a + "rope.scaling.original_context_length": 4096,
		a + "rope.scaling.yarn_log_multiplier":     0.1,
		a + "attention.layer_norm_rms_epsilon":     1e-6,
		a + "context_length":                       163840,
		a + "vocab_size":                           129280,
	}
}

func TestReadConfig(t *testing.T) {
	c, err := readConfig(glm5Meta())
	if err != nil {
		t.Fatal(err)
	}
	if c.Layers != 78 || c.NextN != 1 || c.DNope != 192 || c.DV != 256 || c.Gating != GatingSigmoid ||
		c.IndexerTopK != 2048 || c.ExpGroups != 1 || c.YaRNLogMul != 0 || c.IndexerNormEps != 0 {
		t.Errorf("GLM-5 config: %+v", c)
	}
	if _, tau := c.ropeScales(); tau != 1.0/16 {
		t.Errorf("GLM-5 tau %g, want 1/16", tau)
	}

	c, err = readConfig(v3Meta())
	if err != nil {
		t.Fatal(err)
	}
	if c.Gating != GatingSoftmax || c.DNope != 128 || c.YaRNLogMul != 1 || c.ExpGroups != 8 || c.ExpGroupsUse != 4 {
		t.Errorf("DeepSeek-V3 config: %+v", c)
	}
	// docs/MATH.md section 3.5: DeepSeek-V3 τ = (1+0.1·ln 40)²/sqrt(192)
	// = 0.13523, rope magnitude 1.
	attnFactor, tau := c.ropeScales()
	if math.Abs(float64(tau)-0.13523) > 1e-5 {
		t.Errorf("DeepSeek-V3 tau %g, want 0.13523", tau)
	}
	if m := attnFactor * yarnG(40, 1); math.Abs(float64(m)-1) > 1e-6 {
		t.Errorf("DeepSeek-V3 rope magnitude %g, want 1", m)
	}
}

func TestReadConfigDefaults(t *testing.T) {
	m := glm5Meta()
	delete(m, "glm-dsa.expert_weights_scale")
	delete(m, "glm-dsa.vocab_size")
	m["tokenizer.ggml.tokens"] = make([]string, 1000)
	c, err := readConfig(m)
	if err != nil {
		t.Fatal(err)
	}
	if c.ExpWeightsScale != 0 || c.VocabSize != 1000 || c.Gating != GatingSigmoid {
		t.Errorf("defaults: scale %g, vocab %d, gating %d", c.ExpWeightsScale, c.VocabSize, c.Gating)
	}
	// GLM-4.7-Flash heuristic: deepseek2, 47 layers, vocab 154880, no gating key -> sigmoid.
	f := v3Meta()
	f["deepseek2.block_count"] = 47
	f["deepseek2.vocab_size"] = 154880
	if c, err = readConfig(f); err != nil || c.Gating != GatingSigmoid {
		t.Errorf("GLM-4.7-Flash gating %d (%v), want sigmoid", c.Gating, err)
	}
	// Lite deepseek2 (27 layers) may omit q_lora_rank.
	f = v3Meta()
	f["deepseek2.block_count"] = 27
	delete(f, "deepseek2.attention.q_lora_rank")
	if c, err = readConfig(f); err != nil || c.QLoraRank != 0 {
		t.Errorf("lite: q_lora_rank %d, %v", c.QLoraRank, err)
	}
	// Legacy deepseek2 without *_mla keys: head dims from key/value_length.
	f = v3Meta()
	delete(f, "deepseek2.attention.key_length_mla")
	delete(f, "deepseek2.attention.value_length_mla")
	f["deepseek2.attention.key_length"] = 192
	f["deepseek2.attention.value_length"] = 128
	if c, err = readConfig(f); err != nil || c.AbsorbedMLA || c.DNope != 128 || c.DV != 128 {
		t.Errorf("legacy: %+v, %v", c, err)
	}
}

// indexerTypes returns n full layers but the shared ones listed.
func indexerTypes(n int, shared ...int) []bool {
	t := make([]bool, n)
	for i := range t {
		t[i] = !slices.Contains(shared, i)
	}
	return t
}

// TestIndexerTypes: GLM-5.2's attention.indexer.types marks the shared
// layers; without the key every layer is full.
func TestIndexerTypes(t *testing.T) {
	m := glm5Meta()
	c, err := readConfig(m)
	if err != nil {
		t.Fatal(err)
	}
	for l := range c.BlockCount {
		if c.IndexerShared(l) {
			t.Fatalf("GLM-5: layer %d shared", l)
		}
	}
	m["glm-dsa.attention.indexer.types"] = indexerTypes(78, 1, 2, 77)
	if c, err = readConfig(m); err != nil {
		t.Fatal(err)
	}
	for l := range c.BlockCount {
		// Layer 78 is the NextN block: always full.
		if want := l == 1 || l == 2 || l == 77; c.IndexerShared(l) != want {
			t.Errorf("layer %d: shared %v, want %v", l, c.IndexerShared(l), want)
		}
	}
}

func TestReadConfigErrors(t *testing.T) {
	cases := []struct {
		name string
		edit func(m fakeMeta)
		want string
	}{
		{"no arch", func(m fakeMeta) { delete(m, "general.architecture") }, "general.architecture"},
		{"other arch", func(m fakeMeta) { m["general.architecture"] = "llama" }, `"llama" is not supported`},
		{"missing embd", func(m fakeMeta) { delete(m, "glm-dsa.embedding_length") }, `"glm-dsa.embedding_length": missing`},
		{"missing kv rank", func(m fakeMeta) { delete(m, "glm-dsa.attention.kv_lora_rank") }, `"glm-dsa.attention.kv_lora_rank": missing`},
		{"missing q rank", func(m fakeMeta) { delete(m, "glm-dsa.attention.q_lora_rank") }, `"glm-dsa.attention.q_lora_rank": missing`},
		{"dsa without mla", func(m fakeMeta) { delete(m, "glm-dsa.attention.key_length_mla") }, "requires MLA"},
		{"missing indexer", func(m fakeMeta) { delete(m, "glm-dsa.attention.indexer.top_k") }, `"glm-dsa.attention.indexer.top_k": missing`},
		{"missing eps", func(m fakeMeta) { delete(m, "glm-dsa.attention.layer_norm_rms_epsilon") }, "layer_norm_rms_epsilon"},
		{"rope too wide", func(m fakeMeta) { m["glm-dsa.rope.dimension_count"] = 256 }, "key_length_mla"},
		{"odd rope", func(m fakeMeta) { m["glm-dsa.rope.dimension_count"] = 63 }, "rope.dimension_count"},
		{"key length", func(m fakeMeta) { m["glm-dsa.attention.key_length"] = 512 }, `"glm-dsa.attention.key_length": 512, want`},
		{"nextn too many", func(m fakeMeta) { m["glm-dsa.nextn_predict_layers"] = 79 }, "nextn_predict_layers"},
		{"dense too many", func(m fakeMeta) { m["glm-dsa.leading_dense_block_count"] = 90 }, "leading_dense_block_count"},
		{"used > experts", func(m fakeMeta) { m["glm-dsa.expert_used_count"] = 300 }, "expert_used_count"},
		{"groups", func(m fakeMeta) { m["glm-dsa.expert_group_count"] = 3 }, "expert_group_count"},
		{"gating", func(m fakeMeta) { m["glm-dsa.expert_gating_func"] = 3 }, "gating function 3"},
		{"huge", func(m fakeMeta) { m["glm-dsa.embedding_length"] = 1 << 40 }, "out of range"},
		{"wrong type", func(m fakeMeta) { m["glm-dsa.block_count"] = "many" }, "glm-dsa.block_count"},
		{"scaling", func(m fakeMeta) { m["glm-dsa.rope.scaling.type"] = "longrope" }, `"longrope" is not supported`},
		{"nan", func(m fakeMeta) { m["glm-dsa.rope.freq_base"] = math.NaN() }, "not finite"},
		{"indexer types length", func(m fakeMeta) { m["glm-dsa.attention.indexer.types"] = []bool{true, false} },
			`"glm-dsa.attention.indexer.types": 2 entries, want one per trunk layer (block_count − nextn_predict_layers = 78)`},
		{"first layer shared", func(m fakeMeta) { m["glm-dsa.attention.indexer.types"] = indexerTypes(78, 0, 5) },
			`"glm-dsa.attention.indexer.types": layer 0 is shared`},
		{"indexer types not bools", func(m fakeMeta) { m["glm-dsa.attention.indexer.types"] = "full" },
			`"glm-dsa.attention.indexer.types": not an array of bool`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := glm5Meta()
			tc.edit(m)
			_, err := readConfig(m)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}
