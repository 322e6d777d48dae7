package convert

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/glmrun/glmrun/gguf"
)

// Token types of tokenizer.ggml.token_type (llama.cpp's TokenType).
const (
	tokNormal      = 1
	tokControl     = 3
	tokUserDefined = 4
	tokUnused      = 5
)

// Pre-tokenizer regexes that identify tokenizer.ggml.pre. llama.cpp
// recognises a vocabulary by hashing how it tokenizes a fixed text; the
// regexes of tokenizer.json's pre_tokenizer tell the same vocabularies
// apart without running the tokenizer.
var (
	glm4Regex = []string{`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`}
	ds3Regex  = []string{`\p{N}{1,3}`, `[一-龥぀-ゟ゠-ヿ]+`,
		"[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"}
)

// addedToken is one entry of tokenizer.json's added_tokens.
type addedToken struct {
	ID         int64  `json:"id"`
	Content    string `json:"content"`
	Special    bool   `json:"special"`
	Normalized bool   `json:"normalized"`
}

// tokenizerJSON is the part of tokenizer.json the conversion reads.
type tokenizerJSON struct {
	AddedTokens   []addedToken   `json:"added_tokens"`
	Normalizer    map[string]any `json:"normalizer"`
	PreTokenizer  map[string]any `json:"pre_tokenizer"`
	PostProcessor map[string]any `json:"post_processor"`
	Model         struct {
		Type   string           `json:"type"`
		Vocab  map[string]int64 `json:"vocab"`
		Merges json.RawMessage  `json:"merges"`
	} `json:"model"`
}

// vocabInfo is the tokenizer as llama.cpp writes it.
type vocabInfo struct {
	pre    string
	tokens []string
	types  []int32
	merges []string
	// special token ids and add_*_token flags in the order llama.cpp sets
	// them (its SpecialVocab keeps insertion order).
	specialTypes []string
	specialIDs   map[string]uint32
	addTypes     []string
	addValues    map[string]bool
	chat         any // nil, a string, or []namedTemplate
	normalizer   []struct {
		key string
		v   bool
	}
}

type namedTemplate struct{ name, template string }

func (v *vocabInfo) setSpecial(typ string, id int64, src string) error {
	if id < 0 || id > 1<<32-1 {
		return fmt.Errorf("convert: %s: special token %s id %d out of range", src, typ, id)
	}
	if _, ok := v.specialIDs[typ]; ok {
		return nil
	}
	v.specialTypes = append(v.specialTypes, typ)
	v.specialIDs[typ] = uint32(id)
	return nil
}

func (v *vocabInfo) setAdd(typ string, val bool, overwrite bool) {
	if _, ok := v.addValues[typ]; ok {
		if overwrite {
			v.addValues[typ] = val
		}
		return
	}
	v.addTypes = append(v.addTypes, typ)
	v.addValues[typ] = val
}

// readVocab reads tokenizer.json, tokenizer_config.json, config.json and
// the chat template files of dir as llama.cpp's get_vocab_base and
// SpecialVocab do, with the GLM special tokens for the GLM architectures.
func readVocab(dir string, h *hparams, s *spec) (*vocabInfo, error) {
	path := filepath.Join(dir, "tokenizer.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("convert: %w", err)
	}
	var tj tokenizerJSON
	if err := json.Unmarshal(b, &tj); err != nil {
		return nil, fmt.Errorf("convert: %s: %v", path, err)
	}
	if tj.Model.Type != "BPE" {
		return nil, fmt.Errorf("convert: %s: model type %q, want a byte-level BPE tokenizer", path, tj.Model.Type)
	}
	v := &vocabInfo{specialIDs: map[string]uint32{}, addValues: map[string]bool{}}
	if v.pre, err = preTokenizer(path, s.hfArch, tj.PreTokenizer); err != nil {
		return nil, err
	}

	// Tokens: the model vocabulary and the added tokens by id; ids with no
	// token become "[PADn]" (unused) up to vocab_size.
	byID := map[int64]string{}
	maxID := int64(-1)
	for tok, id := range tj.Model.Vocab {
		if prev, dup := byID[id]; dup && prev < tok {
			continue // deterministic choice for a (broken) duplicate id
		}
		byID[id] = tok
		maxID = max(maxID, id)
	}
	added := map[string]addedToken{}
	for _, a := range tj.AddedTokens {
		byID[a.ID] = a.Content
		added[a.Content] = a
		maxID = max(maxID, a.ID)
	}
	if maxID >= int64(s.vocab) {
		return nil, fmt.Errorf("convert: %s: token id %d is not below config.json's vocab_size %d", path, maxID, s.vocab)
	}
	for i := range int64(s.vocab) {
		tok, ok := byID[i]
		switch {
		case !ok:
			v.tokens = append(v.tokens, fmt.Sprintf("[PAD%d]", i))
			v.types = append(v.types, tokUnused)
		case isAdded(added, tok):
			if added[tok].Special || looksSpecial(tok) {
				v.types = append(v.types, tokControl)
			} else {
				tok = strings.ReplaceAll(tok, "\u2581", " ")
				v.types = append(v.types, tokUserDefined)
			}
			v.tokens = append(v.tokens, tok)
		default:
			v.tokens = append(v.tokens, tok)
			v.types = append(v.types, tokNormal)
		}
	}

	if v.merges, err = readMerges(path, tj.Model.Merges); err != nil {
		return nil, err
	}
	if tj.Normalizer != nil {
		v.parseNormalizer(tj.Normalizer)
	}

	// SpecialVocab: tokenizer_config.json names the special tokens; the
	// post-processor says whether BOS/EOS are added.
	tcPath := filepath.Join(dir, "tokenizer_config.json")
	tc, err := readJSON(tcPath, true)
	if err != nil {
		return nil, err
	}
	tokenTypes := []string{"bos", "eos", "unk", "sep", "pad", "cls", "mask"}
	content := func(key string) string {
		switch e := tc[key].(type) {
		case string:
			return e
		case map[string]any:
			c, _ := e["content"].(string)
			return c
		}
		return ""
	}
	if tc != nil {
		if content("bos_token") == "" && content("cls_token") != "" {
			tc["bos_token"] = content("cls_token")
		}
		if content("eos_token") == "" && content("sep_token") != "" {
			tc["eos_token"] = content("sep_token")
		}
	}
	if tj.PostProcessor != nil {
		tokenTypes = v.postProcessor(tj.PostProcessor, tc, tokenTypes, content)
	}
	if len(tc) > 0 {
		if v.chat, err = chatTemplate(dir, tc); err != nil {
			return nil, err
		}
		for _, typ := range tokenTypes {
			if add, ok := tc["add_"+typ+"_token"].(bool); ok {
				v.setAdd(typ, add, false)
			}
			c := content(typ + "_token")
			if c == "" {
				continue
			}
			for _, a := range tj.AddedTokens {
				if a.Content == c {
					if err := v.setSpecial(typ, a.ID, tcPath); err != nil {
						return nil, err
					}
					break
				}
			}
		}
	}
	// config.json's *_token_id (integers only: GLM's eos_token_id is a list).
	for _, typ := range tokenTypes {
		key := typ + "_token_id"
		val, ok := h.raw[key]
		if !ok || val == nil {
			if tcfg, ok := h.raw["text_config"].(map[string]any); ok {
				val = tcfg[key]
			}
		}
		if n, ok := val.(json.Number); ok {
			if id, err := n.Int64(); err == nil {
				if err := v.setSpecial(typ, id, h.path); err != nil {
					return nil, err
				}
			}
		}
	}
	if s.hfArch == ArchGLMDSA || s.hfArch == ArchGLMLite {
		// llama.cpp's _set_vocab_glm: [gMASK] starts a prompt, <|user|> ends
		// a turn, <|observation|> a tool call.
		for _, st := range []struct{ typ, content string }{
			{"bos", "[gMASK]"}, {"eot", "<|user|>"}, {"unk", "<|endoftext|>"}, {"eom", "<|observation|>"},
		} {
			a, ok := added[st.content]
			if !ok {
				return nil, fmt.Errorf("convert: %s: no added token %q, which GLM models need as the %s token", path, st.content, st.typ)
			}
			if err := v.setSpecial(st.typ, a.ID, path); err != nil {
				return nil, err
			}
		}
	}
	return v, nil
}

func isAdded(added map[string]addedToken, tok string) bool {
	_, ok := added[tok]
	return ok
}

// looksSpecial is llama.cpp's does_token_look_special.
func looksSpecial(t string) bool {
	switch t {
	case "<pad>", "<mask>", "<2mass>", "[@BOS@]":
		return true
	}
	return strings.HasPrefix(t, "<|") && strings.HasSuffix(t, "|>") ||
		strings.HasPrefix(t, "<｜") && strings.HasSuffix(t, "｜>") ||
		strings.HasPrefix(t, "<unused") && strings.HasSuffix(t, ">")
}

// preTokenizer identifies tokenizer.ggml.pre from tokenizer.json's
// pre_tokenizer regexes.
func preTokenizer(path, hfArch string, pt map[string]any) (string, error) {
	var regexes []string
	var walk func(m map[string]any)
	walk = func(m map[string]any) {
		switch m["type"] {
		case "Sequence":
			list, _ := m["pretokenizers"].([]any)
			for _, e := range list {
				if em, ok := e.(map[string]any); ok {
					walk(em)
				}
			}
		case "Split":
			if p, ok := m["pattern"].(map[string]any); ok {
				if r, ok := p["Regex"].(string); ok {
					regexes = append(regexes, r)
				}
			}
		}
	}
	if pt != nil {
		walk(pt)
	}
	switch {
	case slices.Equal(regexes, glm4Regex):
		return "glm4", nil
	case slices.Equal(regexes, ds3Regex):
		return "deepseek-v3", nil
	}
	return "", fmt.Errorf("convert: %s: pre-tokenizer regexes %q are neither GLM-4's (glm4) nor DeepSeek-V3's (deepseek-v3), the vocabularies of %s this converter knows",
		path, regexes, hfArch)
}

// readMerges returns the merges as "a b" strings; the newer list-of-pairs
// form has spaces inside a part encoded as U+0120, as llama.cpp does.
func readMerges(path string, raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("convert: %s: merges: %v", path, err)
	}
	out := make([]string, 0, len(list))
	for i, e := range list {
		var s string
		if json.Unmarshal(e, &s) == nil {
			out = append(out, s)
			continue
		}
		var pair []string
		if err := json.Unmarshal(e, &pair); err != nil || len(pair) != 2 {
			return nil, fmt.Errorf("convert: %s: merge %d is neither a string nor a pair of strings", path, i)
		}
		for j := range pair {
			pair[j] = strings.ReplaceAll(pair[j], " ", "\u0120")
		}
		out = append(out, pair[0]+" "+pair[1])
	}
	return out, nil
}

// parseNormalizer sets the normalizer flags llama.cpp reads.
func (v *vocabInfo) parseNormalizer(n map[string]any) {
	set := func(key string, val bool) {
		for i := range v.normalizer {
			if v.normalizer[i].key == key {
				v.normalizer[i].v = val
				return
			}
		}
		v.normalizer = append(v.normalizer, struct {
			key string
			v   bool
		}{key, val})
	}
	switch n["type"] {
	case "Lowercase":
		set("lowercase", true)
	case "NFC":
		set("nfc", true)
	case "StripAccents":
		set("strip_accents", true)
	case "BertNormalizer":
		if b, ok := n["lowercase"].(bool); ok {
			set("lowercase", b)
		}
		if b, ok := n["strip_accents"].(bool); ok {
			set("strip_accents", b)
		}
	case "Sequence":
		list, _ := n["normalizers"].([]any)
		for _, e := range list {
			if m, ok := e.(map[string]any); ok {
				v.parseNormalizer(m)
			}
		}
	}
}

// postProcessor reads add_bos/add_eos/add_sep from tokenizer.json's
// post-processor as llama.cpp's SpecialVocab does for the ByteLevel,
// RobertaProcessing and simple TemplateProcessing cases. It returns the
// special token types to look up, with eot or eom added when a template
// ends with a token other than the configured EOS.
func (v *vocabInfo) postProcessor(pp map[string]any, tc map[string]any, types []string, content func(string) string) []string {
	procs := []any{pp}
	if list, ok := pp["processors"].([]any); ok {
		procs = list
	}
	specialID := func(e any) string {
		m, _ := e.(map[string]any)
		st, _ := m["SpecialToken"].(map[string]any)
		id, _ := st["id"].(string)
		return id
	}
	for _, p := range procs {
		pm, _ := p.(map[string]any)
		switch pm["type"] {
		case "ByteLevel":
			v.setAdd("bos", false, false)
			v.setAdd("eos", false, false)
		case "RobertaProcessing":
			v.setAdd("bos", true, true)
			v.setAdd("eos", true, true)
			v.setAdd("sep", true, true)
			if len(tc) > 0 && content("cls_token") == "" {
				if c, ok := pm["cls"].([]any); ok && len(c) > 0 {
					tc["cls_token"], _ = c[0].(string)
				} else {
					tc["cls_token"] = content("bos_token")
				}
			}
			if len(tc) > 0 && content("sep_token") == "" {
				if c, ok := pm["sep"].([]any); ok && len(c) > 0 {
					tc["sep_token"], _ = c[0].(string)
				} else {
					tc["sep_token"] = content("eos_token")
				}
			}
		case "TemplateProcessing":
			single, _ := pm["single"].([]any)
			if len(single) <= 1 {
				continue
			}
			bos, cls, eos := content("bos_token"), content("cls_token"), content("eos_token")
			if first := specialID(single[0]); first != "" {
				if len(tc) > 0 && first != bos && first != cls {
					if bos == "" {
						tc["bos_token"], bos = first, first
					}
					if cls == "" {
						tc["cls_token"], cls = first, first
					}
				}
				if len(tc) == 0 {
					bos = first
				}
				v.setAdd("bos", first == bos || first == cls, true)
			}
			if last := specialID(single[len(single)-1]); last != "" {
				if len(tc) > 0 && last != eos {
					if !slices.Contains(types, "eot") {
						types = append(slices.Clone(types), "eot")
						tc["eot_token"] = eos
					} else if !slices.Contains(types, "eom") {
						types = append(slices.Clone(types), "eom")
						tc["eom_token"] = eos
					}
					tc["eos_token"], eos = last, last
				}
				if len(tc) == 0 {
					eos = last
				}
				v.setAdd("eos", last == eos, true)
			}
		}
	}
	return types
}

// chatTemplate returns the chat template as llama.cpp's SpecialVocab finds
// it: tokenizer_config.json's chat_template, else chat_template.jinja
// (with additional_chat_templates/*.jinja as named ones), else
// chat_template.json.
func chatTemplate(dir string, tc map[string]any) (any, error) {
	var alt any
	jinja := filepath.Join(dir, "chat_template.jinja")
	if b, err := os.ReadFile(jinja); err == nil {
		alt = string(b)
		extra, _ := filepath.Glob(filepath.Join(dir, "additional_chat_templates", "*.jinja"))
		if len(extra) > 0 {
			slices.Sort(extra)
			list := []namedTemplate{{"default", string(b)}}
			for _, p := range extra {
				eb, err := os.ReadFile(p)
				if err != nil {
					return nil, fmt.Errorf("convert: %w", err)
				}
				list = append(list, namedTemplate{strings.TrimSuffix(filepath.Base(p), ".jinja"), string(eb)})
			}
			alt = list
		}
	} else if m, err := readJSON(filepath.Join(dir, "chat_template.json"), true); err != nil {
		return nil, err
	} else if m != nil {
		alt = templateValue(m["chat_template"])
	}
	if v, ok := tc["chat_template"]; ok {
		// A value that is neither a string nor a list is ignored, as
		// llama.cpp ignores it (with a warning).
		return templateValue(v), nil
	}
	return alt, nil
}

// templateValue converts a JSON chat_template (a string or a list of
// {"name", "template"}) to a string or []namedTemplate; anything else is
// nil.
func templateValue(v any) any {
	switch x := v.(type) {
	case string:
		return x
	case []any:
		var list []namedTemplate
		for _, e := range x {
			m, _ := e.(map[string]any)
			name, _ := m["name"].(string)
			tmpl, ok := m["template"].(string)
			if ok {
				list = append(list, namedTemplate{name, tmpl})
			}
		}
		return list
	}
	return nil
}

// specialKeys are the GGUF keys of the special token ids; llama.cpp has
// no key for cls.
var specialKeys = map[string]string{
	"bos": "tokenizer.ggml.bos_token_id", "eos": "tokenizer.ggml.eos_token_id",
	"unk": "tokenizer.ggml.unknown_token_id", "sep": "tokenizer.ggml.seperator_token_id",
	"pad": "tokenizer.ggml.padding_token_id", "mask": "tokenizer.ggml.mask_token_id",
	"eot": "tokenizer.ggml.eot_token_id", "eom": "tokenizer.ggml.eom_token_id",
}

// write adds the tokenizer keys in llama.cpp's order.
func (v *vocabInfo) write(m *metaWriter) {
	m.set("tokenizer.ggml.model", gguf.String("gpt2"))
	m.set("tokenizer.ggml.pre", gguf.String(v.pre))
	m.set("tokenizer.ggml.tokens", gguf.Array(v.tokens))
	m.set("tokenizer.ggml.token_type", gguf.Array(v.types))
	if len(v.merges) > 0 {
		m.set("tokenizer.ggml.merges", gguf.Array(v.merges))
	}
	for _, typ := range v.specialTypes {
		if key, ok := specialKeys[typ]; ok {
			m.set(key, gguf.Uint32(v.specialIDs[typ]))
		}
	}
	for _, typ := range v.addTypes {
		if typ == "bos" || typ == "eos" || typ == "sep" {
			m.set("tokenizer.ggml.add_"+typ+"_token", gguf.Bool(v.addValues[typ]))
		}
	}
	switch c := v.chat.(type) {
	case string:
		m.set("tokenizer.chat_template", gguf.String(c))
	case []namedTemplate:
		var names []string
		def := ""
		hasDef := false
		for _, t := range c {
			name := sanitizeTemplateName(t.name)
			if name == "" {
				continue
			}
			if name == "default" {
				def, hasDef = t.template, true
				continue
			}
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
			m.set("tokenizer.chat_template."+name, gguf.String(t.template))
		}
		if len(names) > 0 {
			m.set("tokenizer.chat_templates", gguf.Array(names))
		}
		if hasDef {
			m.set("tokenizer.chat_template", gguf.String(def))
		}
	}
	for _, n := range v.normalizer {
		m.set("tokenizer.ggml.normalizer."+n.key, gguf.Bool(n.v))
	}
}

// sanitizeTemplateName keeps ASCII letters and digits, the rest becomes
// '_', as llama.cpp's writer does.
func sanitizeTemplateName(s string) string {
	var sb strings.Builder
	for _, r := range s {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			sb.WriteRune(r)
		} else {
			sb.WriteByte('_')
		}
	}
	return sb.String()
}
