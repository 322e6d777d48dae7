package convert

import (
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/glmrun/glmrun/gguf"
)

// spec holds the model dimensions the conversion needs, read from the
// hparams and checked.
type spec struct {
	hfArch, arch string

	embd, vocab   int
	layers, nextn int // trunk layers; NextN (MTP) blocks in the checkpoint
	blocks        int // GGUF block_count
	keepMTP       bool
	heads         int
	qRank, kvRank int // qRank 0: no q LoRA (attn_q)
	dNope, dRope  int
	dV            int
	ff, ffExp     int
	experts       int
	shared        int
	dense         int // leading dense blocks
	idxHeads      int // indexer (glm-dsa only)
	idxDim        int
	indexerFull   []bool
	tied          bool
	fp8Block      []int // weight_block_size, nil when absent
	quantMethod   string
}

// readSpec checks and collects the dimensions.
func readSpec(h *hparams, hfArch string, noMTP bool) (*spec, error) {
	s := &spec{hfArch: hfArch, arch: ggufArch(hfArch)}
	var err error
	get := func(dst *int, key string, allowZero bool) {
		if err == nil {
			*dst, err = h.dim(key, allowZero)
		}
	}
	get(&s.embd, "hidden_size", false)
	get(&s.vocab, "vocab_size", false)
	get(&s.layers, "num_hidden_layers", false)
	get(&s.heads, "num_attention_heads", false)
	get(&s.kvRank, "kv_lora_rank", false)
	get(&s.dNope, "qk_nope_head_dim", false)
	get(&s.dRope, "qk_rope_head_dim", false)
	get(&s.dV, "v_head_dim", false)
	get(&s.ff, "intermediate_size", false)
	get(&s.ffExp, "moe_intermediate_size", false)
	get(&s.experts, "n_routed_experts", false)
	if h.has("q_lora_rank") {
		get(&s.qRank, "q_lora_rank", false)
	}
	if h.has("n_shared_experts") {
		get(&s.shared, "n_shared_experts", true)
	}
	if h.has("num_nextn_predict_layers") {
		get(&s.nextn, "num_nextn_predict_layers", true)
	}
	if h.has("first_k_dense_replace") {
		get(&s.dense, "first_k_dense_replace", true)
	}
	if s.arch == "glm-dsa" {
		get(&s.idxHeads, "index_n_heads", false)
		get(&s.idxDim, "index_head_dim", false)
	}
	if err != nil {
		return nil, err
	}
	if h.has("tie_word_embeddings") {
		if s.tied, err = h.boolKey("tie_word_embeddings"); err != nil {
			return nil, err
		}
	}
	switch hfArch {
	case ArchGLMDSA:
		s.keepMTP = !noMTP
	case ArchGLMLite:
		s.keepMTP = !noMTP && s.nextn > 0
	case ArchDeepseek3:
		// llama.cpp's deepseek2 converter drops DeepSeek-V3's MTP block.
		s.keepMTP = false
	}
	s.blocks = s.layers
	if s.keepMTP {
		s.blocks += s.nextn
	}
	if types, ok := h.m["indexer_types"].([]any); ok && s.arch == "glm-dsa" {
		for i, t := range types {
			str, ok := t.(string)
			if !ok || (str != "full" && str != "shared") {
				return nil, h.errf("indexer_types", "entry %d is %v, want \"full\" or \"shared\"", i, t)
			}
			s.indexerFull = append(s.indexerFull, str == "full")
		}
	}
	if qc, ok := h.m["quantization_config"].(map[string]any); ok {
		s.quantMethod, _ = qc["quant_method"].(string)
		if s.quantMethod == "" && qc["quant_method"] != nil {
			return nil, h.errf("quantization_config", "quant_method %v is not a string", qc["quant_method"])
		}
		if bs, ok := qc["weight_block_size"].([]any); ok && s.quantMethod == "fp8" {
			for _, b := range bs {
				n, err := h.asInt("quantization_config.weight_block_size", b)
				if err != nil {
					return nil, err
				}
				if n <= 0 || n > 1<<20 {
					return nil, h.errf("quantization_config.weight_block_size", "block size %d", n)
				}
				s.fp8Block = append(s.fp8Block, int(n))
			}
		}
	}
	if s.quantMethod != "" && s.quantMethod != "fp8" {
		return nil, h.errf("quantization_config", "quant_method %q is not supported (only fp8 block scales)", s.quantMethod)
	}
	if s.dense > s.layers {
		return nil, h.errf("first_k_dense_replace", "%d dense layers of %d", s.dense, s.layers)
	}
	return s, nil
}

// Output types of llama.cpp's --outtype, with the general.file_type each
// writes.
const (
	OutF32  = "f32"
	OutF16  = "f16"
	OutBF16 = "bf16"
	OutQ8_0 = "q8_0"
	OutAuto = "auto"
)

var fileTypes = map[string]uint32{OutF32: 0, OutF16: 1, OutQ8_0: 7, OutBF16: 32}

// metaWriter adds keys with llama.cpp's overwrite rule: a key set twice
// keeps its first position and takes the last value.
type metaWriter struct {
	w    *gguf.Writer
	arch string
}

func (m *metaWriter) set(key string, v gguf.Value) { m.w.SetKV(key, v) }
func (m *metaWriter) a(key string, v gguf.Value)   { m.w.SetKV(m.arch+"."+key, v) }

// writeModelParams adds the architecture keys in the order llama.cpp's
// TextModel, DeepseekV2Model and the GLM classes add them.
func writeModelParams(m *metaWriter, h *hparams, s *spec, fileType uint32) error {
	u32 := func(key, hkey string) error {
		n, err := h.intKey(hkey)
		if err != nil {
			return err
		}
		if n < 0 || n > math.MaxUint32 {
			return h.errf(hkey, "%d does not fit a u32", n)
		}
		m.a(key, gguf.Uint32(uint32(n)))
		return nil
	}
	f32 := func(key, hkey string) error {
		f, err := h.f32(hkey)
		if err != nil {
			return err
		}
		m.a(key, gguf.Float32(f))
		return nil
	}
	var errs []error
	do := func(err error) { errs = append(errs, err) }
	opt := func(key string, hkeys ...string) {
		if k := h.find(hkeys...); k != "" {
			do(u32(key, k))
		}
	}

	// TextModel.set_gguf_parameters.
	m.a("block_count", gguf.Uint32(uint32(s.blocks)))
	opt("context_length", "max_position_embeddings", "n_ctx", "n_positions", "max_length", "max_sequence_length", "model_max_length")
	opt("embedding_length", "hidden_size", "n_embd", "dim")
	opt("feed_forward_length", "prefix_dense_intermediate_size", "dense_intermediate_size", "intermediate_size", "n_inner", "hidden_dim")
	opt("attention.head_count", "num_attention_heads", "n_head", "n_heads")
	// DeepseekV2Model: MLA is stored as MQA, one KV head.
	m.a("attention.head_count_kv", gguf.Uint32(1))
	if v, ok := h.m["is_causal"].(bool); ok && !v {
		m.a("attention.causal", gguf.Bool(false))
	}
	rp := h.ropeParams()
	if full, ok := rp["full_attention"].(map[string]any); ok {
		rp = full
	}
	rh := &hparams{path: h.path + " (rope parameters)", m: rp}
	if rt, ok := rp["rope_type"].(string); ok {
		factor := rh.has("factor")
		switch {
		case rt == "linear" && factor:
			m.a("rope.scaling.type", gguf.String("linear"))
			do(rfloat(m, rh, "rope.scaling.factor", "factor"))
		case rt == "yarn" && factor:
			m.a("rope.scaling.type", gguf.String("yarn"))
			do(rfloat(m, rh, "rope.scaling.factor", "factor"))
			n, err := rh.intKey("original_max_position_embeddings")
			if err == nil && (n < 0 || n > math.MaxUint32) {
				err = rh.errf("original_max_position_embeddings", "%d does not fit a u32", n)
			}
			do(err)
			m.a("rope.scaling.original_context_length", gguf.Uint32(uint32(n)))
			if v, ok := rp["truncate"].(bool); ok {
				m.a("rope.scaling.yarn_truncate", gguf.Bool(v))
			}
			if rh.has("extrapolation_factor") {
				do(rfloat(m, rh, "rope.scaling.yarn_ext_factor", "extrapolation_factor"))
			}
			if k := rh.find("attention_factor", "attn_factor"); k != "" {
				do(rfloat(m, rh, "rope.scaling.yarn_attn_factor", k))
			}
			if rh.has("beta_fast") {
				do(rfloat(m, rh, "rope.scaling.yarn_beta_fast", "beta_fast"))
			}
			if rh.has("beta_slow") {
				do(rfloat(m, rh, "rope.scaling.yarn_beta_slow", "beta_slow"))
			}
		case rt == "su" || rt == "longrope":
			m.a("rope.scaling.type", gguf.String("longrope"))
		}
	}
	if rh.has("rope_theta") {
		do(rfloat(m, rh, "rope.freq_base", "rope_theta"))
	}
	if k := h.find("rms_norm_eps", "norm_eps"); k != "" {
		do(f32("attention.layer_norm_rms_epsilon", k))
	}
	if k := h.find("layer_norm_eps", "layer_norm_epsilon", "norm_epsilon"); k != "" {
		do(f32("attention.layer_norm_epsilon", k))
	}
	opt("expert_count", "num_local_experts", "num_experts", "n_routed_experts")
	opt("expert_used_count", "num_experts_per_tok", "num_experts_per_token", "top_k_experts")
	opt("expert_group_count", "n_group")
	opt("expert_group_used_count", "topk_group")
	if k := h.find("score_function", "scoring_func", "score_func", "moe_router_activation", "moe_router_activation_func", "expert_selection_fn", "router_score_func"); k != "" {
		fn, _ := h.m[k].(string)
		gating := map[string]uint32{"softmax": 1, "sigmoid": 2, "sqrtsoftplus": 4}[fn]
		if gating == 0 {
			do(h.errf(k, "unsupported expert gating function %v", h.m[k]))
		}
		m.a("expert_gating_func", gguf.Uint32(gating))
	}
	if h.has("head_dim") {
		do(u32("attention.key_length", "head_dim"))
		do(u32("attention.value_length", "head_dim"))
	}
	m.set("general.file_type", gguf.Uint32(fileType))

	// DeepseekV2Model.set_gguf_parameters.
	m.a("leading_dense_block_count", gguf.Uint32(uint32(s.dense)))
	do(u32("vocab_size", "vocab_size"))
	if s.qRank > 0 {
		m.a("attention.q_lora_rank", gguf.Uint32(uint32(s.qRank)))
	}
	m.a("attention.kv_lora_rank", gguf.Uint32(uint32(s.kvRank)))
	m.a("attention.key_length", gguf.Uint32(uint32(s.kvRank+s.dRope)))
	m.a("attention.value_length", gguf.Uint32(uint32(s.kvRank)))
	m.a("attention.key_length_mla", gguf.Uint32(uint32(s.dNope+s.dRope)))
	m.a("attention.value_length_mla", gguf.Uint32(uint32(s.dV)))
	m.a("expert_feed_forward_length", gguf.Uint32(uint32(s.ffExp)))
	m.a("expert_count", gguf.Uint32(uint32(s.experts)))
	m.a("expert_shared_count", gguf.Uint32(uint32(s.shared)))
	if h.has("routed_scaling_factor") {
		do(f32("expert_weights_scale", "routed_scaling_factor"))
	}
	if h.truthy("norm_topk_prob") {
		m.a("expert_weights_norm", gguf.Bool(true))
	}
	m.a("rope.dimension_count", gguf.Uint32(uint32(s.dRope)))
	if rp0 := h.ropeParams(); rp0["mscale_all_dim"] != nil {
		rh0 := &hparams{path: h.path + " (rope parameters)", m: rp0}
		f, err := rh0.floatKey("mscale_all_dim")
		do(err)
		m.a("rope.scaling.yarn_log_multiplier", gguf.Float32(float32(0.1*f)))
	}

	switch s.hfArch {
	case ArchGLMDSA:
		prf := 1.0
		if rh0 := (&hparams{path: h.path, m: h.ropeParams()}); rh0.has("partial_rotary_factor") {
			var err error
			prf, err = rh0.floatKey("partial_rotary_factor")
			do(err)
		}
		m.a("rope.dimension_count", gguf.Uint32(uint32(float64(s.dRope)*prf)))
		if s.keepMTP && h.has("num_nextn_predict_layers") {
			m.a("nextn_predict_layers", gguf.Uint32(uint32(s.nextn)))
		}
		m.a("attention.indexer.head_count", gguf.Uint32(uint32(s.idxHeads)))
		m.a("attention.indexer.key_length", gguf.Uint32(uint32(s.idxDim)))
		do(u32("attention.indexer.top_k", "index_topk"))
		if s.indexerFull != nil {
			m.a("attention.indexer.types", gguf.Array(s.indexerFull))
		}
	case ArchGLMLite:
		if s.keepMTP {
			m.a("nextn_predict_layers", gguf.Uint32(uint32(s.nextn)))
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func rfloat(m *metaWriter, h *hparams, key, hkey string) error {
	f, err := h.f32(hkey)
	if err == nil {
		m.a(key, gguf.Float32(f))
	}
	return err
}

// writeSampling adds general.sampling.* from generation_config.json, as
// llama.cpp does before general.name.
func writeSampling(m *metaWriter, gen *hparams) error {
	if gen == nil {
		return nil
	}
	keys := []struct {
		key   string
		hkeys []string
		kind  byte // 's' string, 'i' i32, 'f' f32
	}{
		{"sequence", []string{"sequence"}, 's'},
		{"top_k", []string{"top_k"}, 'i'},
		{"top_p", []string{"top_p"}, 'f'},
		{"min_p", []string{"min_p"}, 'f'},
		{"xtc_probability", []string{"xtc_probability"}, 'f'},
		{"xtc_threshold", []string{"xtc_threshold"}, 'f'},
		{"temp", []string{"temperature"}, 'f'},
		{"penalty_last_n", []string{"penalty_last_n"}, 'i'},
		{"penalty_repeat", []string{"penalty_repeat", "repetition_penalty"}, 'f'},
		{"mirostat", []string{"mirostat"}, 'i'},
		{"mirostat_tau", []string{"mirostat_tau"}, 'f'},
		{"mirostat_eta", []string{"mirostat_eta"}, 'f'},
	}
	for _, k := range keys {
		hk := gen.find(k.hkeys...)
		if hk == "" {
			continue
		}
		key := "general.sampling." + k.key
		switch k.kind {
		case 's':
			s, ok := gen.m[hk].(string)
			if !ok {
				return gen.errf(hk, "%v is not a string", gen.m[hk])
			}
			m.set(key, gguf.String(s))
		case 'i':
			n, err := gen.intKey(hk)
			if err != nil {
				return err
			}
			if n < math.MinInt32 || n > math.MaxInt32 {
				return gen.errf(hk, "%d does not fit an i32", n)
			}
			m.set(key, gguf.Int32(int32(n)))
		case 'f':
			f, err := gen.f32(hk)
			if err != nil {
				return err
			}
			m.set(key, gguf.Float32(f))
		}
	}
	return nil
}

// modelName is what llama.cpp's gguf.Metadata heuristics derive from the
// directory name (and config.json's _name_or_path): general.name and the
// optional basename, finetune, version and size label.
type modelName struct {
	name, org, basename, finetune, version, sizeLabel string
}

// from fills the fields of n that are still empty from a model id
// ("org/Model-Name-7B-Instruct" or a directory name), as
// Metadata.get_model_id_components does.
func (n *modelName) from(id string, totalParams int64) {
	full, org, base, fine, ver, size := modelIDComponents(id, totalParams)
	fill := func(dst *string, v string) {
		if *dst == "" {
			*dst = v
		}
	}
	fill(&n.name, idToTitle(full))
	if org != "" {
		fill(&n.org, idToTitle(org))
	}
	fill(&n.basename, base)
	fill(&n.finetune, fine)
	fill(&n.version, ver)
	fill(&n.sizeLabel, size)
}

var (
	reVersion  = regexp.MustCompile(`(?i)^(v|iter)?\d+([.]\d+)*$`)
	reQuant    = regexp.MustCompile(`(?i)^(i?q\d(_\w)*|b?fp?(16|32))$`)
	reSize     = regexp.MustCompile(`(?i)^((([A]|\d+[x])?\d+([._]\d+)?[KMBT][\d]?)|small|mini|medium|large|x?xl)$`)
	reFinetune = regexp.MustCompile(`(?i)^(chat|instruct|vision|lora)$`)
	reTitleNo  = regexp.MustCompile(`^(v\d+(?:\.\d+)*|\d.*)$`)
)

// modelIDComponents splits a model id into name, organisation, basename,
// finetune, version and size label with llama.cpp's heuristics.
func modelIDComponents(id string, totalParams int64) (full, org, basename, finetune, version, sizeLabel string) {
	if strings.Contains(id, " ") {
		return id, "", "", "", "", ""
	}
	full = id
	if o, rest, ok := strings.Cut(id, "/"); ok {
		org, full = o, rest
		if strings.HasPrefix(org, ".") {
			org = ""
		}
	}
	var parts []string
	for p := range strings.SplitSeq(full, "-") {
		if p != "" {
			parts = append(parts, p)
		}
	}
	types := make([]map[string]bool, len(parts))
	for i, part := range parts {
		t := map[string]bool{}
		types[i] = t
		switch {
		case reVersion.MatchString(part):
			t["version"] = true
		case reQuant.MatchString(part):
			t["type"] = true
			parts[i] = strings.ToUpper(part)
		case i > 0 && reSize.MatchString(part):
			part = strings.ReplaceAll(part, "_", ".")
			if isDecimal(part[len(part)-1]) && len(part) >= 2 {
				part = part[:len(part)-2] + "." + part[len(part)-1:] + part[len(part)-2:len(part)-1]
			}
			if len(part) > 1 && isDecimal(part[len(part)-2]) && strings.ContainsRune("kmbt", rune(part[len(part)-1])) {
				part = part[:len(part)-1] + strings.ToUpper(part[len(part)-1:])
			}
			if totalParams != 0 {
				if v, err := strconv.ParseFloat(part[:len(part)-1], 64); err == nil {
					unit := strings.IndexByte(" KMBT", part[len(part)-1])
					label := v * math.Pow(1000, float64(unit))
					tp := float64(totalParams)
					if (totalParams < 0 && label < float64(-totalParams/8)) ||
						(totalParams > 0 && math.Abs(label-tp) > float64(7*totalParams/8)) {
						t["finetune"] = true
						part = part[:len(part)-1] + strings.ToLower(part[len(part)-1:])
					}
				}
			}
			if len(t) == 0 {
				t["size_label"] = true
			}
			parts[i] = part
		case i > 0 && reFinetune.MatchString(part):
			if totalParams < 0 && strings.EqualFold(part, "lora") {
				t["type"] = true
			} else {
				t["finetune"] = true
			}
		}
	}
	// A number-based size label makes word-based ones ordinary words.
	numeric := false
	for i, p := range parts {
		if types[i]["size_label"] && strings.ContainsFunc(p, func(r rune) bool { return r >= '0' && r <= '9' }) {
			numeric = true
		}
	}
	if numeric {
		for i, p := range parts {
			if types[i]["size_label"] && !strings.ContainsFunc(p, func(r rune) bool { return !unicode.IsLetter(r) }) {
				delete(types[i], "size_label")
			}
		}
	}
	atStart := true
	for i, p := range parts {
		t := types[i]
		first, _ := utf8.DecodeRuneInString(p)
		if atStart && ((len(t) == 0 && unicode.IsLetter(first)) || t["version"]) {
			t["basename"] = true
		} else {
			atStart = false
			if len(t) == 0 {
				t["finetune"] = true
			}
		}
	}
	for i := len(parts) - 1; i >= 0; i-- {
		if t := types[i]; t["basename"] && len(t) > 1 {
			delete(t, "basename")
		} else {
			break
		}
	}
	join := func(keep func(map[string]bool) bool, dedup bool) string {
		var out []string
		seen := map[string]bool{}
		for i, p := range parts {
			if keep(types[i]) && !(dedup && seen[p]) {
				out = append(out, p)
				seen[p] = true
			}
		}
		return strings.Join(out, "-")
	}
	basename = join(func(t map[string]bool) bool { return t["basename"] }, false)
	sizeLabel = join(func(t map[string]bool) bool { return t["size_label"] }, true)
	finetune = join(func(t map[string]bool) bool { return t["finetune"] }, false)
	version = join(func(t map[string]bool) bool { return t["version"] && !t["basename"] }, false)
	if sizeLabel == "" && finetune == "" && version == "" {
		basename = ""
	}
	return full, org, basename, finetune, version, sizeLabel
}

func isDecimal(c byte) bool { return c >= '0' && c <= '9' }

// idToTitle is llama.cpp's Metadata.id_to_title: dashes become spaces and
// each all-lowercase word that is not a version number is title-cased the
// way Python's str.title does it ("fp8s" → "Fp8S").
func idToTitle(s string) string {
	words := strings.Fields(strings.ReplaceAll(strings.TrimSpace(s), "-", " "))
	for i, w := range words {
		if isLower(w) && !reTitleNo.MatchString(w) {
			words[i] = pyTitle(w)
		}
	}
	return strings.Join(words, " ")
}

func isCased(r rune) bool { return unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r) }

// isLower is Python's str.islower.
func isLower(s string) bool {
	cased := false
	for _, r := range s {
		if unicode.IsUpper(r) || unicode.IsTitle(r) {
			return false
		}
		if unicode.IsLower(r) {
			cased = true
		}
	}
	return cased
}

// pyTitle is Python's str.title: a cased letter after an uncased character
// is upper-cased, any other lower-cased.
func pyTitle(s string) string {
	var sb strings.Builder
	prevCased := false
	for _, r := range s {
		if prevCased {
			sb.WriteRune(unicode.ToLower(r))
		} else {
			sb.WriteRune(unicode.ToTitle(r))
		}
		prevCased = isCased(r)
	}
	return sb.String()
}

// sizeLabel is llama.cpp's parameter-count label: "4x1.1M" for 4 experts
// and 1.1M parameters per expert path, "7.2B" for a dense model.
func sizeLabel(total, shared, expert, expertCount int64) string {
	if expertCount > 0 {
		return fmt.Sprintf("%dx%s", expertCount, roundedCount(abs64(shared)+abs64(expert)))
	}
	return roundedCount(abs64(total))
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// roundedCount formats a parameter count with at least two significant
// digits and a K/M/B/T suffix (gguf-py's model_weight_count_rounded_notation).
func roundedCount(n int64) string {
	f := float64(n)
	var scaled float64
	var suffix string
	switch {
	case f > 1e12:
		scaled, suffix = f*1e-12, "T"
	case f > 1e9:
		scaled, suffix = f*1e-9, "B"
	case f > 1e6:
		scaled, suffix = f*1e-6, "M"
	default:
		scaled, suffix = f*1e-3, "K"
	}
	digits := len(strings.TrimLeft(strconv.FormatFloat(math.RoundToEven(scaled), 'f', 0, 64), "0"))
	fix := max(2-digits, 0)
	return strconv.FormatFloat(scaled, 'f', fix, 64) + suffix
}

// dirID is the directory name llama.cpp falls back to for the model name.
func dirID(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return filepath.Base(dir)
}
