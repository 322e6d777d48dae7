package convert

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
)

// Supported architectures: the Hugging Face class names in config.json's
// "architectures" and the GGUF architecture each becomes.
const (
	ArchGLMDSA    = "GlmMoeDsaForCausalLM"   // GLM-5, 5.1, 5.2 → glm-dsa
	ArchGLMLite   = "Glm4MoeLiteForCausalLM" // GLM-4.7-Flash → deepseek2
	ArchDeepseek3 = "DeepseekV3ForCausalLM"  // DeepSeek-V3 → deepseek2
)

// ggufArch returns the GGUF architecture of a supported HF class.
func ggufArch(hf string) string {
	if hf == ArchGLMDSA {
		return "glm-dsa"
	}
	return "deepseek2"
}

// classDefaults are the values the transformers configuration classes
// (GlmMoeDsaConfig, Glm4MoeLiteConfig, DeepseekV3Config) give the keys
// this package reads when config.json leaves them out. llama.cpp's
// converter reads the config through those classes, so it sees them.
var classDefaults = map[string]map[string]any{
	ArchGLMDSA: {
		"vocab_size": 154880, "hidden_size": 6144, "intermediate_size": 12288, "moe_intermediate_size": 2048,
		"num_hidden_layers": 78, "num_attention_heads": 64, "num_key_value_heads": 64,
		"n_shared_experts": 1, "n_routed_experts": 256, "routed_scaling_factor": 2.5,
		"kv_lora_rank": 512, "q_lora_rank": 2048, "qk_rope_head_dim": 64, "v_head_dim": 256, "qk_nope_head_dim": 192,
		"n_group": 1, "topk_group": 1, "num_experts_per_tok": 8, "norm_topk_prob": true,
		"max_position_embeddings": 202752, "rms_norm_eps": 1e-5, "tie_word_embeddings": false,
		"index_topk": 2048, "index_head_dim": 128, "index_n_heads": 32, "num_experts": 256,
		"first_k_dense_replace": 3,
	},
	ArchGLMLite: {
		"vocab_size": 154880, "hidden_size": 2048, "intermediate_size": 10240, "moe_intermediate_size": 1536,
		"num_hidden_layers": 47, "num_attention_heads": 20, "num_key_value_heads": 20,
		"n_shared_experts": 1, "n_routed_experts": 64, "routed_scaling_factor": 1.8,
		"kv_lora_rank": 512, "q_lora_rank": 768, "qk_rope_head_dim": 64, "v_head_dim": 256, "qk_nope_head_dim": 192,
		"n_group": 1, "topk_group": 1, "num_experts_per_tok": 4, "norm_topk_prob": true,
		"max_position_embeddings": 202752, "rms_norm_eps": 1e-5, "tie_word_embeddings": false,
	},
	ArchDeepseek3: {
		"vocab_size": 129280, "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048,
		"num_hidden_layers": 61, "num_attention_heads": 128,
		"n_shared_experts": 1, "n_routed_experts": 256, "routed_scaling_factor": 2.5,
		"kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64, "v_head_dim": 128, "qk_nope_head_dim": 128,
		"n_group": 8, "topk_group": 4, "num_experts_per_tok": 8, "first_k_dense_replace": 3, "norm_topk_prob": true,
		"max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "tie_word_embeddings": false,
	},
}

// hparams is config.json as llama.cpp's converter sees it: the JSON object
// (numbers kept as json.Number so that 5 and 5.0 stay apart), text_config
// merged in, and the configuration class's defaults and derived keys
// filled in.
type hparams struct {
	path string         // config.json, for errors
	m    map[string]any // what llama.cpp's converter sees
	raw  map[string]any // the file as it is (SpecialVocab reads it directly)
}

// readJSON decodes path into a map, numbers as json.Number. A missing file
// gives (nil, nil) when optional.
func readJSON(path string, optional bool) (map[string]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if optional && errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("convert: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("convert: %s: %v", path, err)
	}
	if m == nil {
		return nil, fmt.Errorf("convert: %s: not a JSON object", path)
	}
	return m, nil
}

// readConfig reads dir/config.json and returns its hparams and HF
// architecture class.
func readConfig(dir string) (*hparams, string, error) {
	path := filepath.Join(dir, "config.json")
	m, err := readJSON(path, false)
	if err != nil {
		return nil, "", err
	}
	raw, err := readJSON(path, false)
	if err != nil {
		return nil, "", err
	}
	h := &hparams{path: path, m: m, raw: raw}
	if tc, ok := m["text_config"].(map[string]any); ok {
		for k, v := range tc {
			m[k] = v
		}
	}
	archs, ok := m["architectures"].([]any)
	if !ok || len(archs) == 0 {
		return nil, "", fmt.Errorf("convert: %s: key \"architectures\": missing or empty: cannot tell which model this is", path)
	}
	arch, _ := archs[0].(string)
	if _, ok := classDefaults[arch]; !ok {
		return nil, "", fmt.Errorf("convert: %s: key \"architectures\": %q is not supported (want %s, %s or %s)",
			path, archs[0], ArchGLMDSA, ArchGLMLite, ArchDeepseek3)
	}
	for k, v := range classDefaults[arch] {
		if _, ok := m[k]; !ok {
			m[k] = v
		}
	}
	// Keys the configuration classes derive in __post_init__.
	switch arch {
	case ArchGLMDSA:
		m["head_dim"] = m["qk_rope_head_dim"]
		if err := h.deriveIndexerTypes(); err != nil {
			return nil, "", err
		}
	case ArchDeepseek3:
		m["head_dim"] = m["qk_rope_head_dim"]
		if v, ok := m["num_key_value_heads"]; !ok || v == nil {
			m["num_key_value_heads"] = m["num_attention_heads"]
		}
	}
	return h, arch, nil
}

// deriveIndexerTypes fills in GLM-5's indexer_types as GlmMoeDsaConfig
// does when config.json has none: from index_topk_pattern ("F"/"S"
// characters or a list), else from index_topk_freq (every freq-th layer
// after index_skip_topk_offset has its own indexer).
func (h *hparams) deriveIndexerTypes() error {
	if v, ok := h.m["indexer_types"]; ok && v != nil {
		return nil
	}
	n, err := h.intKey("num_hidden_layers")
	if err != nil {
		return err
	}
	if n > 1<<20 {
		return h.errf("num_hidden_layers", "%d layers", n)
	}
	var types []any
	switch p := h.m["index_topk_pattern"].(type) {
	case string:
		for _, c := range p {
			switch c {
			case 'F':
				types = append(types, "full")
			case 'S':
				types = append(types, "shared")
			default:
				return h.errf("index_topk_pattern", "character %q is neither F nor S", c)
			}
		}
	case []any:
		types = p
	case nil:
		freq, offset := int64(1), int64(2)
		if h.has("index_topk_freq") {
			if freq, err = h.intKey("index_topk_freq"); err != nil {
				return err
			}
		}
		if h.has("index_skip_topk_offset") {
			if offset, err = h.intKey("index_skip_topk_offset"); err != nil {
				return err
			}
		}
		freq = max(freq, 1)
		for i := range n {
			if max(i-offset+1, 0)%freq == 0 {
				types = append(types, "full")
			} else {
				types = append(types, "shared")
			}
		}
	default:
		return h.errf("index_topk_pattern", "is %T, want a string or a list", p)
	}
	h.m["indexer_types"] = types
	return nil
}

func (h *hparams) errf(key, format string, args ...any) error {
	return fmt.Errorf("convert: %s: key %q: %s", h.path, key, fmt.Sprintf(format, args...))
}

// has reports whether key is present and not null.
func (h *hparams) has(key string) bool {
	v, ok := h.m[key]
	return ok && v != nil
}

// find returns the first of keys that is present and not null, as
// llama.cpp's find_hparam does, or "".
func (h *hparams) find(keys ...string) string {
	for _, k := range keys {
		if h.has(k) {
			return k
		}
	}
	return ""
}

// intKey reads an integer key.
func (h *hparams) intKey(key string) (int64, error) {
	v, ok := h.m[key]
	if !ok || v == nil {
		return 0, h.errf(key, "missing")
	}
	return h.asInt(key, v)
}

func (h *hparams) asInt(key string, v any) (int64, error) {
	switch x := v.(type) {
	case json.Number:
		n, err := strconv.ParseInt(string(x), 10, 64)
		if err != nil {
			return 0, h.errf(key, "%s is not an integer", x)
		}
		return n, nil
	case int:
		return int64(x), nil
	}
	return 0, h.errf(key, "%v is not an integer", v)
}

// dim reads an integer key that sizes something: 0 < value ≤ 2^24 (zero
// allowed when allowZero).
func (h *hparams) dim(key string, allowZero bool) (int, error) {
	n, err := h.intKey(key)
	if err != nil {
		return 0, err
	}
	if n < 0 || n > 1<<24 || (n == 0 && !allowZero) {
		return 0, h.errf(key, "value %d out of range", n)
	}
	return int(n), nil
}

// floatKey reads a number key.
func (h *hparams) floatKey(key string) (float64, error) {
	v, ok := h.m[key]
	if !ok || v == nil {
		return 0, h.errf(key, "missing")
	}
	return h.asFloat(key, v)
}

func (h *hparams) asFloat(key string, v any) (float64, error) {
	switch x := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return 0, h.errf(key, "%s is not a number", x)
		}
		return f, nil
	case float64:
		return x, nil
	case int:
		return float64(x), nil
	}
	return 0, h.errf(key, "%v is not a number", v)
}

// boolKey reads a boolean key.
func (h *hparams) boolKey(key string) (bool, error) {
	switch x := h.m[key].(type) {
	case bool:
		return x, nil
	case nil:
		return false, h.errf(key, "missing")
	}
	return false, h.errf(key, "%v is not true or false", h.m[key])
}

// truthy is Python's truth value of a key: false when absent, null, false,
// 0 or empty.
func (h *hparams) truthy(key string) bool {
	switch x := h.m[key].(type) {
	case nil:
		return false
	case bool:
		return x
	case json.Number:
		f, err := x.Float64()
		return err != nil || f != 0
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
}

// f32 rounds a float64 to float32 as Python's struct.pack("<f") does,
// reporting a value out of float32's range.
func (h *hparams) f32(key string) (float32, error) {
	f, err := h.floatKey(key)
	if err != nil {
		return 0, err
	}
	if math.IsInf(float64(float32(f)), 0) && !math.IsInf(f, 0) {
		return 0, h.errf(key, "%v is out of float32 range", f)
	}
	return float32(f), nil
}

// ropeParams returns the RoPE parameters as transformers standardises
// them: rope_parameters, else the legacy rope_scaling, with rope_theta
// (default 10000) and partial_rotary_factor folded in.
func (h *hparams) ropeParams() map[string]any {
	var rp map[string]any
	for _, k := range []string{"rope_scaling", "rope_parameters"} {
		if m, ok := h.m[k].(map[string]any); ok && len(m) > 0 {
			rp = map[string]any{}
			for kk, v := range m {
				rp[kk] = v
			}
			break
		}
	}
	if rp == nil {
		rp = map[string]any{}
	}
	if _, ok := rp["rope_theta"]; !ok {
		if v, ok := h.m["rope_theta"]; ok && v != nil {
			rp["rope_theta"] = v
		} else {
			rp["rope_theta"] = json.Number("10000.0")
		}
	}
	if _, ok := rp["partial_rotary_factor"]; !ok {
		if v, ok := h.m["partial_rotary_factor"]; ok && v != nil {
			rp["partial_rotary_factor"] = v
		}
	}
	if _, ok := rp["rope_type"]; !ok {
		if t, ok := rp["type"]; ok {
			rp["rope_type"] = t
		} else {
			rp["rope_type"] = "default"
		}
	}
	return rp
}
