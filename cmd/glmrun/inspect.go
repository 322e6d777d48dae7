package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/glmrun/glmrun/attention"
	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/internal/units"
	"github.com/glmrun/glmrun/model"
	"github.com/glmrun/glmrun/tensor"
)

// runInspect prints what a GGUF file holds: architecture, hyper-parameters,
// tokenizer, tensors and their types. It reads keys defensively: a missing
// or mistyped key is shown as absent, never an error, so that it works on
// any valid GGUF file.
func runInspect(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("inspect", stderr)
	asJSON := fs.Bool("json", false, "print one JSON object instead of text")
	showKV := fs.Bool("kv", false, "also list every metadata key and value")
	noTensors := fs.Bool("no-tensors", false, "leave out the tensor table")
	tp := fs.Int("tp", 0, "also show the bytes of weights and KV cache per token each of N tensor-parallel devices would hold")
	var cache cacheFlags
	cache.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: glmrun inspect [flags] FILE.gguf\n\nPrints a GGUF file's architecture, hyper-parameters, tokenizer and tensors.\n\nflags:")
		fs.PrintDefaults()
	}
	pos, err := parseFlagsAnywhere(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: want one GGUF file, have %d arguments", errUsage, len(pos))
	}
	if *tp < 0 {
		return fmt.Errorf("%w: --tp %d: want >= 0 (0: no tensor-parallel table)", errUsage, *tp)
	}
	cacheType, err := cache.parse()
	if err != nil {
		return err
	}
	f, err := gguf.Open(pos[0])
	if err != nil {
		return err
	}
	defer f.Close()
	rep := newInspectReport(f, *showKV, cacheType)
	if *noTensors {
		rep.Tensors = nil
	}
	if *tp > 0 {
		if rep.TensorParallel, err = newTPReport(f, *tp, cacheType); err != nil {
			return err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(rep)
	}
	if err := rep.writeText(stdout); err != nil || rep.TensorParallel == nil {
		return err
	}
	return rep.TensorParallel.writeText(stdout)
}

// parseFlagsAnywhere parses flags that may come before, between or after
// the positional arguments ("FILE --json" as well as "--json FILE") and
// returns the positional arguments. Everything after "--" is positional.
func parseFlagsAnywhere(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// inspectReport is everything inspect shows; it is also the --json object.
type inspectReport struct {
	File         string   `json:"file"`
	Shards       []string `json:"shards,omitempty"`
	Version      uint32   `json:"version"`
	Alignment    uint64   `json:"alignment"`
	Architecture string   `json:"architecture"`
	Name         string   `json:"name,omitempty"`
	FileType     *int64   `json:"file_type,omitempty"`
	FileTypeName string   `json:"file_type_name,omitempty"`
	// HParams holds the hyper-parameter keys present in the file, without
	// the "<arch>." prefix; absent keys are left out.
	HParams map[string]any `json:"hparams"`
	// Derived holds values computed from HParams (head dims, layer kinds).
	Derived    map[string]any   `json:"derived"`
	Tokenizer  *tokenizerReport `json:"tokenizer,omitempty"`
	Tensors    []tensorReport   `json:"tensors"`
	Types      []typeReport     `json:"types"`
	NumTensors int              `json:"tensor_count"`
	// TotalBytes and TotalElements sum over all tensors.
	TotalBytes    int64    `json:"total_bytes"`
	TotalElements int64    `json:"total_elements"`
	BitsPerWeight *float64 `json:"bits_per_weight,omitempty"`
	// Metadata lists every key and value (with --kv).
	Metadata []kvReport `json:"metadata,omitempty"`
	// TensorParallel is the per-device memory plan (with --tp N).
	TensorParallel *tpReport `json:"tensor_parallel,omitempty"`
	// Keys are the architecture's keys that glmrun does not read, with
	// what it makes of them (informational, not supported, unknown);
	// KeysError says why they could not be classified, if so.
	Keys      []keyReport `json:"unread_keys"`
	KeysError string      `json:"unread_keys_error,omitempty"`

	hp []hparamLine // text rendering of the hyper-parameters
}

type keyReport struct {
	Key string `json:"key"`
	Use string `json:"use"`
	Why string `json:"why"`
}

type tokenizerReport struct {
	Model        string                  `json:"model,omitempty"`
	Pre          string                  `json:"pre,omitempty"`
	VocabSize    int                     `json:"vocab_size"`
	Merges       int                     `json:"merges"`
	Special      map[string]specialToken `json:"special,omitempty"`
	AddBOS       *bool                   `json:"add_bos,omitempty"`
	AddEOS       *bool                   `json:"add_eos,omitempty"`
	ChatTemplate bool                    `json:"has_chat_template"`
	TemplateLen  int                     `json:"chat_template_bytes,omitempty"`
}

type specialToken struct {
	ID   int64  `json:"id"`
	Text string `json:"text,omitempty"`
}

type tensorReport struct {
	Name   string  `json:"name"`
	HFName string  `json:"hf_name,omitempty"`
	Shape  []int64 `json:"shape"` // ggml ne order
	Type   string  `json:"type"`
	Bytes  int64   `json:"bytes"`
	Shard  string  `json:"shard,omitempty"`
}

type typeReport struct {
	Type     string `json:"type"`
	Count    int    `json:"count"`
	Elements int64  `json:"elements"`
	Bytes    int64  `json:"bytes"`
}

type kvReport struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value string `json:"value"`
}

// hparamLine is one line of the text hyper-parameter section.
type hparamLine struct{ label, text string }

// hparamKeys are the hyper-parameter keys inspect reports, relative to
// "<arch>.", in display order, with their kind: 'i' integer, 'f' number,
// 'b' bool, 's' string. A key of another type is treated as absent.
var hparamKeys = []struct {
	key  string
	kind byte
}{
	{"block_count", 'i'}, {"leading_dense_block_count", 'i'}, {"nextn_predict_layers", 'i'},
	{"embedding_length", 'i'}, {"feed_forward_length", 'i'}, {"expert_feed_forward_length", 'i'},
	{"context_length", 'i'}, {"vocab_size", 'i'},
	{"attention.head_count", 'i'}, {"attention.head_count_kv", 'i'},
	{"attention.q_lora_rank", 'i'}, {"attention.kv_lora_rank", 'i'},
	{"attention.key_length", 'i'}, {"attention.value_length", 'i'},
	{"attention.key_length_mla", 'i'}, {"attention.value_length_mla", 'i'},
	{"expert_count", 'i'}, {"expert_used_count", 'i'}, {"expert_shared_count", 'i'},
	{"expert_group_count", 'i'}, {"expert_group_used_count", 'i'},
	{"expert_gating_func", 'i'}, {"expert_weights_norm", 'b'}, {"expert_weights_scale", 'f'},
	{"attention.indexer.head_count", 'i'}, {"attention.indexer.key_length", 'i'}, {"attention.indexer.top_k", 'i'},
	{"rope.dimension_count", 'i'}, {"rope.freq_base", 'f'},
	{"rope.scaling.type", 's'}, {"rope.scaling.factor", 'f'}, {"rope.scaling.original_context_length", 'i'},
	{"rope.scaling.yarn_log_multiplier", 'f'}, {"rope.scaling.attn_factor", 'f'},
	{"rope.scaling.yarn_beta_fast", 'f'}, {"rope.scaling.yarn_beta_slow", 'f'},
	{"attention.layer_norm_rms_epsilon", 'f'}, {"attention.layer_norm_epsilon", 'f'},
}

// gatingFuncs names llama.cpp's expert_gating_func values.
var gatingFuncs = map[int64]string{0: "none", 1: "softmax", 2: "sigmoid", 3: "softmax_weight"}

// fileTypes names llama.cpp's general.file_type values (llama_ftype).
var fileTypes = map[int64]string{
	0: "ALL_F32", 1: "MOSTLY_F16", 2: "MOSTLY_Q4_0", 3: "MOSTLY_Q4_1", 7: "MOSTLY_Q8_0",
	8: "MOSTLY_Q5_0", 9: "MOSTLY_Q5_1", 10: "MOSTLY_Q2_K", 11: "MOSTLY_Q3_K_S",
	12: "MOSTLY_Q3_K_M", 13: "MOSTLY_Q3_K_L", 14: "MOSTLY_Q4_K_S", 15: "MOSTLY_Q4_K_M",
	16: "MOSTLY_Q5_K_S", 17: "MOSTLY_Q5_K_M", 18: "MOSTLY_Q6_K", 19: "MOSTLY_IQ2_XXS",
	20: "MOSTLY_IQ2_XS", 21: "MOSTLY_Q2_K_S", 22: "MOSTLY_IQ3_XS", 23: "MOSTLY_IQ3_XXS",
	24: "MOSTLY_IQ1_S", 25: "MOSTLY_IQ4_NL", 26: "MOSTLY_IQ3_S", 27: "MOSTLY_IQ3_M",
	28: "MOSTLY_IQ2_S", 29: "MOSTLY_IQ2_M", 30: "MOSTLY_IQ4_XS", 31: "MOSTLY_IQ1_M",
	32: "MOSTLY_BF16", 36: "MOSTLY_TQ1_0", 37: "MOSTLY_TQ2_0", 38: "MOSTLY_MXFP4_MOE",
}

// kvReader reads metadata defensively: every getter reports whether the
// key was present with a usable type.
type kvReader struct{ f *gguf.File }

func (r kvReader) int(key string) (int64, bool) {
	v, ok := r.f.Lookup(key)
	if !ok {
		return 0, false
	}
	x, err := v.AsInt()
	return x, err == nil
}

func (r kvReader) float(key string) (float64, bool) {
	v, ok := r.f.Lookup(key)
	if !ok {
		return 0, false
	}
	x, err := v.AsFloat()
	if err != nil {
		return 0, false
	}
	if v.Type() == gguf.TypeFloat32 {
		// Show an f32 as the shortest decimal that round-trips in f32
		// (1e-05, not 9.999999747378752e-06).
		x, _ = strconv.ParseFloat(strconv.FormatFloat(x, 'g', -1, 32), 64)
	}
	return x, true
}

// indexerPattern spells attention.indexer.types out (GLM-5.2): each
// layer full or shared, and what the shared ones save.
func indexerPattern(v gguf.Value) string {
	words := make([]string, v.Len())
	shared := 0
	for i := range words {
		words[i] = "full"
		if b, err := v.Index(i).AsBool(); err == nil && !b {
			words[i] = "shared"
			shared++
		}
	}
	return fmt.Sprintf("%s (%d shared: they reuse the previous full layer's top-k and have no indexer-key cache)",
		strings.Join(words, ", "), shared)
}

func (r kvReader) bool(key string) (bool, bool) {
	v, ok := r.f.Lookup(key)
	if !ok {
		return false, false
	}
	x, err := v.AsBool()
	return x, err == nil
}

func (r kvReader) string(key string) (string, bool) {
	v, ok := r.f.Lookup(key)
	if !ok {
		return "", false
	}
	x, err := v.AsString()
	return x, err == nil
}

// value returns a present key of the given kind (see hparamKeys) as a
// JSON-friendly Go value.
func (r kvReader) value(key string, kind byte) (any, bool) {
	switch kind {
	case 'i':
		return r.int(key)
	case 'f':
		return r.float(key)
	case 'b':
		return r.bool(key)
	case 's':
		return r.string(key)
	}
	return nil, false
}

func newInspectReport(f *gguf.File, withKV bool, cacheType tensor.Type) *inspectReport {
	kv := kvReader{f}
	rep := &inspectReport{
		File:         f.Path,
		Version:      f.Version,
		Alignment:    f.Alignment,
		Architecture: f.Architecture(),
		HParams:      map[string]any{},
		Derived:      map[string]any{},
	}
	rep.Name, _ = kv.string("general.name")
	if ft, ok := kv.int("general.file_type"); ok {
		rep.FileType = &ft
		rep.FileTypeName = fileTypes[ft]
	}
	arch := rep.Architecture
	for _, k := range hparamKeys {
		if v, ok := kv.value(arch+"."+k.key, k.kind); ok {
			rep.HParams[k.key] = v
		}
	}
	rep.hp = describeHParams(kv, arch, cacheType, rep.Derived)
	rep.Tokenizer = describeTokenizer(kv)
	rep.Keys = []keyReport{}
	if statuses, err := model.KeyReport(f); err != nil {
		rep.KeysError = strings.TrimPrefix(err.Error(), f.Path+": ")
	} else {
		for _, st := range statuses {
			if st.Use != model.KeyRead {
				rep.Keys = append(rep.Keys, keyReport{Key: st.Key, Use: st.Use.String(), Why: st.Why})
			}
		}
	}

	byType := map[tensor.Type]*typeReport{}
	for _, ti := range f.Tensors {
		tr := tensorReport{
			Name:  ti.Name,
			Shape: append([]int64(nil), ti.Dims...),
			Type:  ti.Type.String(),
			Bytes: tensorBytes(ti),
		}
		if h, err := model.GGUFToHF(arch, ti.Name); err == nil {
			tr.HFName = h.String()
		}
		if len(f.Shards) > 1 {
			tr.Shard = filepath.Base(ti.Shard)
		}
		rep.Tensors = append(rep.Tensors, tr)
		t := byType[ti.Type]
		if t == nil {
			t = &typeReport{Type: tr.Type}
			byType[ti.Type] = t
		}
		t.Count++
		t.Elements += ti.NumElements()
		t.Bytes += tr.Bytes
		rep.TotalElements += ti.NumElements()
		rep.TotalBytes += tr.Bytes
	}
	if len(f.Shards) > 1 {
		rep.Shards = f.Shards
	}
	rep.NumTensors = len(f.Tensors)
	rep.Types = []typeReport{}
	for _, t := range byType {
		rep.Types = append(rep.Types, *t)
	}
	sort.Slice(rep.Types, func(i, j int) bool {
		if rep.Types[i].Bytes != rep.Types[j].Bytes {
			return rep.Types[i].Bytes > rep.Types[j].Bytes
		}
		return rep.Types[i].Type < rep.Types[j].Type
	})
	if rep.Tensors == nil {
		rep.Tensors = []tensorReport{}
	}
	if rep.TotalElements > 0 {
		bpw := float64(rep.TotalBytes) * 8 / float64(rep.TotalElements)
		rep.BitsPerWeight = &bpw
	}
	if withKV {
		for _, e := range f.KVs {
			rep.Metadata = append(rep.Metadata, kvReport{Key: e.Key, Type: valueTypeName(e.Value), Value: e.Value.String()})
		}
	}
	return rep
}

// valueTypeName returns "u32", "string" or "array[string]".
func valueTypeName(v gguf.Value) string {
	if v.Type() == gguf.TypeArray {
		return fmt.Sprintf("array[%s]", v.ElemType())
	}
	return v.Type().String()
}

// tensorBytes returns the size of a tensor's data.
func tensorBytes(ti *gguf.TensorInfo) int64 {
	if ti.Type.Known() && len(ti.Dims) > 0 {
		if row, err := ti.Type.RowSize(ti.RowLen()); err == nil {
			return row * ti.NumRows()
		}
	}
	return int64(len(ti.Data))
}

// describeHParams renders the hyper-parameters of architecture arch as text
// lines and fills derived with the values computed from them.
func describeHParams(kv kvReader, arch string, cacheType tensor.Type, derived map[string]any) []hparamLine {
	p := func(k string) string { return arch + "." + k }
	num := func(k string) string {
		if x, ok := kv.int(p(k)); ok {
			return strconv.FormatInt(x, 10)
		}
		if x, ok := kv.float(p(k)); ok {
			return strconv.FormatFloat(x, 'g', -1, 64)
		}
		return "-"
	}
	var lines []hparamLine
	add := func(label, text string) { lines = append(lines, hparamLine{label, text}) }

	// Layers: trunk, leading dense, MoE and NextN/MTP blocks.
	if n, ok := kv.int(p("block_count")); ok {
		text := strconv.FormatInt(n, 10)
		nextn, hasNextn := kv.int(p("nextn_predict_layers"))
		dense, hasDense := kv.int(p("leading_dense_block_count"))
		var parts []string
		if hasDense {
			experts, _ := kv.int(p("expert_count"))
			parts = append(parts, fmt.Sprintf("%d leading dense", dense))
			derived["dense_layers"] = dense
			if experts > 0 && n-dense-nextn >= 0 {
				parts = append(parts, fmt.Sprintf("%d MoE", n-dense-nextn))
				derived["moe_layers"] = n - dense - nextn
			}
		}
		if hasNextn {
			parts = append(parts, fmt.Sprintf("%d nextn/MTP", nextn))
			derived["nextn_layers"] = nextn
		}
		derived["trunk_layers"] = n - nextn
		if len(parts) > 0 {
			text += " (" + strings.Join(parts, ", ") + ")"
		}
		add("layers", text)
	} else {
		add("layers", "-")
	}
	add("embedding", num("embedding_length"))
	add("context length", num("context_length"))
	add("vocab size", num("vocab_size"))
	add("FFN width", num("feed_forward_length"))

	heads := num("attention.head_count")
	if _, ok := kv.int(p("attention.head_count_kv")); ok {
		heads += ", kv heads " + num("attention.head_count_kv")
	}
	add("attention heads", heads)
	qRank, _ := kv.int(p("attention.q_lora_rank"))
	kvRank, _ := kv.int(p("attention.kv_lora_rank"))
	mla := kvRank > 0
	if mla {
		q := num("attention.q_lora_rank")
		if qRank == 0 {
			q += " (no q LoRA: q_proj)"
		}
		add("q lora rank", q)
		add("kv lora rank", num("attention.kv_lora_rank"))
	}
	add("key/value length", num("attention.key_length")+" / "+num("attention.value_length"))

	// Head dims: MLA files store key_length_mla = nope + rope and
	// value_length_mla; older deepseek2 files only key/value_length.
	qk, hasQK := kv.int(p("attention.key_length_mla"))
	v, hasV := kv.int(p("attention.value_length_mla"))
	src := "key_length_mla"
	if !hasQK || qk == 0 {
		qk, hasQK = kv.int(p("attention.key_length"))
		v, hasV = kv.int(p("attention.value_length"))
		src = "key_length"
	}
	rope, hasRope := kv.int(p("rope.dimension_count"))
	if mla && hasQK && hasRope && qk >= rope {
		derived["head_dim_qk_nope"] = qk - rope
		derived["head_dim_qk_rope"] = rope
		derived["head_dim_qk"] = qk
		text := fmt.Sprintf("qk %d = nope %d + rope %d", qk, qk-rope, rope)
		if hasV {
			derived["head_dim_v"] = v
			text += fmt.Sprintf(", v %d", v)
		}
		add("head dims", text+" (from "+src+")")
	} else if hasRope {
		add("rope dims", strconv.FormatInt(rope, 10))
	}

	// Mixture of experts.
	if n, ok := kv.int(p("expert_count")); ok && n > 0 {
		text := fmt.Sprintf("%d total, %s used, %s shared, width %s", n, num("expert_used_count"), num("expert_shared_count"), num("expert_feed_forward_length"))
		add("experts", text)
		if _, ok := kv.int(p("expert_group_count")); ok {
			add("expert groups", num("expert_group_count")+" ("+num("expert_group_used_count")+" used)")
		}
		gating := "-"
		if g, ok := kv.int(p("expert_gating_func")); ok {
			name := gatingFuncs[g]
			if name == "" {
				name = "unknown"
			}
			derived["expert_gating"] = name
			gating = fmt.Sprintf("%s (%d)", name, g)
		}
		norm := "-"
		if b, ok := kv.bool(p("expert_weights_norm")); ok {
			norm = strconv.FormatBool(b)
		}
		add("gating", fmt.Sprintf("%s, weights norm %s, scale %s", gating, norm, num("expert_weights_scale")))
	}

	// DSA lightning indexer.
	if n, ok := kv.int(p("attention.indexer.head_count")); ok && n > 0 {
		add("indexer", fmt.Sprintf("%d heads, dim %s, top_k %s", n, num("attention.indexer.key_length"), num("attention.indexer.top_k")))
		if v, ok := kv.f.Lookup(p("attention.indexer.types")); ok && v.Type() == gguf.TypeArray && v.ElemType() == gguf.TypeBool {
			add("indexer types", indexerPattern(v))
			derived["indexer_types"] = v.String()
		}
	}

	// RoPE and its scaling.
	text := "base " + num("rope.freq_base")
	if st, ok := kv.string(p("rope.scaling.type")); ok && st != "" && st != "none" {
		text += ", scaling " + st + " factor " + num("rope.scaling.factor")
		var extra []string
		for _, e := range []struct{ key, label string }{
			{"rope.scaling.original_context_length", "orig ctx"},
			{"rope.scaling.yarn_log_multiplier", "yarn log mul"},
			{"rope.scaling.attn_factor", "attn factor"},
			{"rope.scaling.yarn_beta_fast", "beta fast"},
			{"rope.scaling.yarn_beta_slow", "beta slow"},
		} {
			if s := num(e.key); s != "-" {
				extra = append(extra, e.label+" "+s)
			}
		}
		if len(extra) > 0 {
			text += " (" + strings.Join(extra, ", ") + ")"
		}
	} else {
		text += ", no scaling"
	}
	add("rope", text)
	eps := num("attention.layer_norm_rms_epsilon")
	if eps == "-" {
		if s := num("attention.layer_norm_epsilon"); s != "-" {
			add("layer norm eps", s)
			return lines
		}
	}
	add("rms eps", eps)
	if mla {
		add("KV cache ("+attention.CacheTypeName(cacheType)+")", cacheLine(kv, arch, kvRank, cacheType, derived))
	}
	return lines
}

// cacheLine describes the KV cache glmrun allocates for the file with rows
// of type typ: per trunk layer and position the latent (kv_lora_rank) and
// the roped key (rope.dimension_count) and, for layers with their own DSA
// indexer, its key (attention.indexer.key_length); per token and at the
// training context. It sets derived's kv_cache_bytes_per_token and
// kv_cache_type.
func cacheLine(kv kvReader, arch string, kvRank int64, typ tensor.Type, derived map[string]any) string {
	p := func(k string) string { return arch + "." + k }
	layers, _ := kv.int(p("block_count"))
	nextn, _ := kv.int(p("nextn_predict_layers"))
	layers -= nextn
	rope, _ := kv.int(p("rope.dimension_count"))
	idx, _ := kv.int(p("attention.indexer.key_length"))
	if n, _ := kv.int(p("attention.indexer.head_count")); n <= 0 {
		idx = 0
	}
	full := layers
	if v, ok := kv.f.Lookup(p("attention.indexer.types")); ok && v.Type() == gguf.TypeArray && v.ElemType() == gguf.TypeBool {
		full = 0
		for i := range v.Len() {
			if b, err := v.Index(i).AsBool(); err == nil && b {
				full++
			}
		}
	}
	if layers <= 0 || kvRank <= 0 {
		return "-"
	}
	dims := make([]int, layers)
	for l := range full {
		dims[l] = int(idx)
	}
	name := attention.CacheTypeName(typ)
	if (kvRank+rope)%int64(typ.BlockSize()) != 0 || idx%int64(typ.BlockSize()) != 0 {
		return fmt.Sprintf("- (%s needs rows of whole %d-value blocks: latent+rope %d, indexer key %d)", name, typ.BlockSize(), kvRank+rope, idx)
	}
	perToken := attention.CacheBytesPerToken(typ, int(kvRank), int(rope), dims)
	derived["kv_cache_bytes_per_token"] = perToken
	derived["kv_cache_type"] = name
	text := fmt.Sprintf("%s per token (%d layers × %d latent+rope", units.Bytes(perToken), layers, kvRank+rope)
	if idx > 0 {
		text += fmt.Sprintf(", %d with a %d-wide indexer key", full, idx)
	}
	text += ", " + name + ")"
	if ctx, ok := kv.int(p("context_length")); ok && ctx > 0 {
		text += fmt.Sprintf("; %s at the training context of %d", units.Bytes(perToken*ctx), ctx)
	}
	return text
}

// specialKeys lists the tokenizer's special-token id keys.
var specialKeys = []string{"bos", "eos", "eot", "eom", "unknown", "padding", "seperator", "sep", "cls", "mask"}

// describeTokenizer summarises the tokenizer.* keys, or returns nil when the
// file has none.
func describeTokenizer(kv kvReader) *tokenizerReport {
	model, hasModel := kv.string("tokenizer.ggml.model")
	tokV, hasTok := kv.f.Lookup("tokenizer.ggml.tokens")
	if !hasModel && !hasTok {
		return nil
	}
	t := &tokenizerReport{Model: model, Special: map[string]specialToken{}}
	t.Pre, _ = kv.string("tokenizer.ggml.pre")
	var tokens []string
	if hasTok {
		tokens, _ = tokV.AsStrings()
		t.VocabSize = tokV.Len()
	}
	if m, ok := kv.f.Lookup("tokenizer.ggml.merges"); ok {
		t.Merges = m.Len()
	}
	for _, name := range specialKeys {
		id, ok := kv.int("tokenizer.ggml." + name + "_token_id")
		if !ok {
			continue
		}
		st := specialToken{ID: id}
		if id >= 0 && id < int64(len(tokens)) {
			st.Text = tokens[id]
		}
		t.Special[name] = st
	}
	if b, ok := kv.bool("tokenizer.ggml.add_bos_token"); ok {
		t.AddBOS = &b
	}
	if b, ok := kv.bool("tokenizer.ggml.add_eos_token"); ok {
		t.AddEOS = &b
	}
	if s, ok := kv.string("tokenizer.chat_template"); ok {
		t.ChatTemplate = true
		t.TemplateLen = len(s)
	}
	return t
}

// writeText prints the report for people.
func (r *inspectReport) writeText(w io.Writer) error {
	ew := &errWriter{w: w}
	ew.printf("file:          %s (GGUF v%d, alignment %d)\n", r.File, r.Version, r.Alignment)
	for i, s := range r.Shards {
		ew.printf("  shard %d/%d:   %s\n", i+1, len(r.Shards), s)
	}
	arch := r.Architecture
	if arch == "" {
		arch = "- (no general.architecture)"
	}
	ew.printf("architecture:  %s\n", arch)
	if r.Name != "" {
		ew.printf("name:          %s\n", r.Name)
	}
	if r.FileType != nil {
		name := r.FileTypeName
		if name == "" {
			name = "unknown"
		}
		ew.printf("file type:     %d (%s)\n", *r.FileType, name)
	}

	ew.printf("\nhyper-parameters (%s.*; - = absent)\n", r.Architecture)
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	for _, l := range r.hp {
		fmt.Fprintf(tw, "  %s:\t%s\n", l.label, l.text)
	}
	tw.Flush()
	if r.KeysError != "" {
		ew.printf("  (glmrun cannot run it: %s)\n", r.KeysError)
	}
	if len(r.Keys) > 0 {
		ew.printf("\nkeys glmrun does not read (not supported and unknown ones fail the load without --force)\n")
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		for _, k := range r.Keys {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", k.Key, k.Use, k.Why)
		}
		tw.Flush()
	}

	ew.printf("\ntokenizer\n")
	if t := r.Tokenizer; t == nil {
		ew.printf("  none\n")
	} else {
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "  model:\t%s\n", orDash(t.Model))
		fmt.Fprintf(tw, "  pre:\t%s\n", orDash(t.Pre))
		fmt.Fprintf(tw, "  vocab size:\t%d (%d merges)\n", t.VocabSize, t.Merges)
		for _, name := range specialKeys {
			if st, ok := t.Special[name]; ok {
				text := "(no such token)"
				if st.ID >= 0 && st.ID < int64(t.VocabSize) {
					text = strconv.Quote(st.Text)
				}
				fmt.Fprintf(tw, "  %s id:\t%d %s\n", name, st.ID, text)
			}
		}
		fmt.Fprintf(tw, "  add bos:\t%s\n", boolOrDash(t.AddBOS))
		if t.AddEOS != nil {
			fmt.Fprintf(tw, "  add eos:\t%s\n", boolOrDash(t.AddEOS))
		}
		if t.ChatTemplate {
			fmt.Fprintf(tw, "  chat template:\tyes (%d bytes)\n", t.TemplateLen)
		} else {
			fmt.Fprintf(tw, "  chat template:\tno\n")
		}
		tw.Flush()
	}

	if r.NumTensors == 0 {
		ew.printf("\ntensors: none (a vocabulary-only file)\n")
		return ew.err
	}
	if r.Tensors != nil {
		ew.printf("\ntensors (%d; shape in ggml ne order, ne0 first)\n", r.NumTensors)
		tw = tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		shardCol := len(r.Shards) > 1
		fmt.Fprint(tw, "  name\tHF name\tshape\ttype\tbytes")
		if shardCol {
			fmt.Fprint(tw, "\tshard")
		}
		fmt.Fprintln(tw)
		for _, t := range r.Tensors {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d", t.Name, orDash(t.HFName), formatShape(t.Shape), t.Type, t.Bytes)
			if shardCol {
				fmt.Fprintf(tw, "\t%s", t.Shard)
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	}

	ew.printf("\ntypes\n")
	tw = tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  type\ttensors\telements\tbytes\tshare\t")
	for _, t := range r.Types {
		share := 0.0
		if r.TotalBytes > 0 {
			share = 100 * float64(t.Bytes) / float64(r.TotalBytes)
		}
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%.1f%%\t\n", t.Type, t.Count, t.Elements, t.Bytes, share)
	}
	tw.Flush()
	ew.printf("\ntotal: %d tensors, %d elements, %d bytes (%s)", r.NumTensors, r.TotalElements, r.TotalBytes, units.Bytes(r.TotalBytes))
	if r.BitsPerWeight != nil {
		ew.printf(", %.3f bits per weight", *r.BitsPerWeight)
	}
	ew.printf("\n")

	if len(r.Metadata) > 0 {
		ew.printf("\nmetadata (%d keys)\n", len(r.Metadata))
		tw = tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		for _, m := range r.Metadata {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", m.Key, m.Type, oneLine(m.Value))
		}
		tw.Flush()
	}
	return ew.err
}

// oneLine shortens a value for a table cell: newlines escaped, at most 120
// characters.
func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", `\n`)
	if r := []rune(s); len(r) > 120 {
		s = string(r[:117]) + "..."
	}
	return s
}

// formatShape prints ggml ne order as "[256, 1024]".
func formatShape(dims []int64) string {
	s := make([]string, len(dims))
	for i, d := range dims {
		s[i] = strconv.FormatInt(d, 10)
	}
	return "[" + strings.Join(s, ", ") + "]"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func boolOrDash(b *bool) string {
	if b == nil {
		return "-"
	}
	return strconv.FormatBool(*b)
}

// errWriter remembers the first write error so that printing code can
// check once at the end.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, args ...any) {
	fmt.Fprintf(e, format, args...)
}
