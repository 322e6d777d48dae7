package tokenizer

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// TokenType is the type of a vocabulary entry (GGUF tokenizer.ggml.token_type).
type TokenType int32

// Token types, numbered as in GGUF.
const (
	TypeUndefined   TokenType = 0
	TypeNormal      TokenType = 1
	TypeUnknown     TokenType = 2
	TypeControl     TokenType = 3
	TypeUserDefined TokenType = 4
	TypeUnused      TokenType = 5
	TypeByte        TokenType = 6
)

// None marks an absent special token id (llama.cpp's LLAMA_TOKEN_NULL).
const None int32 = -1

// Vocab describes a byte-level BPE vocabulary: the content of GGUF's
// tokenizer.ggml.* keys. New reads it from a GGUF file; FromVocab builds a
// Tokenizer from it directly.
type Vocab struct {
	Model  string      // tokenizer.ggml.model; must be "gpt2"
	Pre    string      // tokenizer.ggml.pre, one of SupportedPre
	Tokens []string    // token texts in the byte-level alphabet, index = id
	Types  []TokenType // per token; nil means all TypeNormal
	Merges []string    // "left right", rank = index

	// Special token ids, None when absent.
	BOS, EOS, EOT, EOM, UNK, PAD int32

	AddBOS, AddEOS bool // add BOS/EOS when encoding with addSpecial
}

// Tokenizer encodes text to token ids and decodes ids to bytes. It is safe
// for concurrent use (its only mutable state is an internal cache of
// recently encoded words).
type Tokenizer struct {
	pre          *preTokenizer
	preName      string
	ignoreMerges bool

	tokens []string    // token text, index = id
	types  []TokenType // after llama.cpp's by-name adjustments
	ids    map[string]int32
	pieces []string // decoded bytes (normal) or text (special, user-defined); "" otherwise

	// BPE symbols are token ids; strings the merges need that are not
	// tokens get ids from len(tokens) on, with their text in extra.
	extra   []string
	byteSym [256]int32         // symbol of each byte's one-character string
	merges  map[uint64]mergeTo // (left, right) symbol pair -> rank, result

	special []int32 // CONTROL/USER_DEFINED/UNKNOWN ids, longest text first
	eog     map[int32]bool

	bos, eos, eot, eom, unk, pad int32
	addBOS, addEOS               bool

	scratch sync.Pool // *workspace
	cache   wordCache
}

type mergeTo struct {
	rank int32
	id   int32
}

func pairKey(l, r int32) uint64 { return uint64(uint32(l))<<32 | uint64(uint32(r)) }

// DefaultAddBOS reports whether llama.cpp adds BOS for a vocabulary with
// this tokenizer.ggml.pre when the file has no tokenizer.ggml.add_bos_token
// (true only for the Llama-3 family).
func DefaultAddBOS(pre string) bool {
	info, ok := lookupPre(pre)
	return ok && info.addBOS
}

// ErrUnsupported is wrapped by errors for vocabularies this package cannot
// tokenize (another tokenizer.ggml.model or an unknown pre-tokenizer).
var ErrUnsupported = errors.New("unsupported tokenizer")

// Names whose tokens llama.cpp treats as end of generation (and forces to
// CONTROL): llama_vocab::impl::load.
var eogNames = []string{
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>", "<|endoftext|>",
	"<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>",
	// FIM pad/repo/file-separator tokens are end-of-generation too.
	"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>",
	"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", "<|file_sep|>",
}

// Further names llama.cpp forces to CONTROL when it detects EOT and FIM
// tokens by text.
var controlNames = []string{
	"<｜end▁of▁sentence｜>",
	"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>",
	"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>",
	"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>",
}

// eotNames are llama.cpp's candidates for EOT when the file names none.
var eotNames = []string{
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
	"<EOT>", "_<EOT>", "<｜end▁of▁sentence｜>", "<end_of_utterance>",
}

// FromVocab builds a Tokenizer from v.
func FromVocab(v Vocab) (*Tokenizer, error) {
	if v.Model != "gpt2" {
		return nil, fmt.Errorf("tokenizer: tokenizer.ggml.model %q: %w (only \"gpt2\", byte-level BPE)", v.Model, ErrUnsupported)
	}
	info, ok := lookupPre(v.Pre)
	if !ok {
		return nil, fmt.Errorf("tokenizer: tokenizer.ggml.pre %q: %w (supported: %s)", v.Pre, ErrUnsupported, strings.Join(SupportedPre(), ", "))
	}
	n := len(v.Tokens)
	if n == 0 {
		return nil, errors.New("tokenizer: tokenizer.ggml.tokens is empty")
	}
	if n > 1<<30 {
		return nil, fmt.Errorf("tokenizer: %d tokens is too many", n)
	}
	if v.Types != nil && len(v.Types) != n {
		return nil, fmt.Errorf("tokenizer: tokenizer.ggml.token_type has %d entries for %d tokens", len(v.Types), n)
	}
	t := &Tokenizer{
		pre:          info.pre,
		preName:      v.Pre,
		ignoreMerges: info.ignoreMerges,
		tokens:       make([]string, n),
		types:        make([]TokenType, n),
		ids:          make(map[string]int32, n),
		addBOS:       v.AddBOS,
		addEOS:       v.AddEOS,
	}
	for i, s := range v.Tokens {
		if s == "" {
			s = "[EMPTY_" + strconv.Itoa(i) + "]" // as llama.cpp
		}
		t.tokens[i] = s
		t.ids[s] = int32(i) // a repeated text maps to its last id, as in llama.cpp
		t.types[i] = TypeNormal
		if v.Types != nil {
			t.types[i] = v.Types[i]
		}
	}
	for _, sp := range []struct {
		name string
		id   int32
		dst  *int32
	}{{"bos", v.BOS, &t.bos}, {"eos", v.EOS, &t.eos}, {"eot", v.EOT, &t.eot}, {"eom", v.EOM, &t.eom}, {"unknown", v.UNK, &t.unk}, {"padding", v.PAD, &t.pad}} {
		if sp.id < None || sp.id >= int32(n) {
			return nil, fmt.Errorf("tokenizer: %s token id %d out of range [0, %d)", sp.name, sp.id, n)
		}
		*sp.dst = sp.id
	}
	if t.addBOS && t.bos == None {
		return nil, errors.New("tokenizer: add_bos_token is set but there is no BOS token")
	}
	if t.addEOS && t.eos == None {
		return nil, errors.New("tokenizer: add_eos_token is set but there is no EOS token")
	}
	t.adjustSpecial()
	t.buildMerges(v.Merges)
	t.buildPieces()
	t.scratch.New = func() any { return new(workspace) }
	return t, nil
}

// adjustSpecial applies llama.cpp's by-name fix-ups: end-of-generation and
// FIM tokens become CONTROL, EOT is found by name if the file gives none,
// and the special-token list for text partitioning is built.
func (t *Tokenizer) adjustSpecial() {
	if t.eot == None {
		for _, name := range eotNames {
			if id, ok := t.ids[name]; ok && (t.eot == None || id < t.eot) {
				t.eot = id
			}
		}
		if t.eot != None {
			t.types[t.eot] = TypeControl
		}
	}
	for _, names := range [][]string{eogNames, controlNames} {
		for _, name := range names {
			if id, ok := t.ids[name]; ok {
				t.types[id] = TypeControl
			}
		}
	}
	t.eog = make(map[int32]bool)
	for _, name := range eogNames {
		if id, ok := t.ids[name]; ok {
			t.eog[id] = true
		}
	}
	for _, id := range []int32{t.eos, t.eot, t.eom} {
		if id != None {
			t.eog[id] = true
		}
	}
	for id, typ := range t.types {
		if typ == TypeControl || typ == TypeUserDefined || typ == TypeUnknown {
			t.special = append(t.special, int32(id))
		}
	}
	// Longest first; llama.cpp's std::sort leaves ties unordered, ids break them here.
	slices.SortStableFunc(t.special, func(a, b int32) int {
		return cmp.Compare(len(t.tokens[b]), len(t.tokens[a]))
	})
}

// symbol returns the BPE symbol id of s, creating one if s is no token.
func (t *Tokenizer) symbol(s string, extra map[string]int32) int32 {
	if id, ok := t.ids[s]; ok {
		return id
	}
	if id, ok := extra[s]; ok {
		return id
	}
	id := int32(len(t.tokens) + len(t.extra))
	t.extra = append(t.extra, s)
	extra[s] = id
	return id
}

func (t *Tokenizer) symbolText(id int32) string {
	if int(id) < len(t.tokens) {
		return t.tokens[id]
	}
	return t.extra[int(id)-len(t.tokens)]
}

func (t *Tokenizer) buildMerges(merges []string) {
	extra := make(map[string]int32)
	for b := range 256 {
		t.byteSym[b] = t.symbol(string(byteRunes[b]), extra)
	}
	t.merges = make(map[uint64]mergeTo, len(merges))
	for rank, m := range merges {
		// llama.cpp splits at the first space after the first byte.
		sp := -1
		if len(m) > 1 {
			if i := strings.IndexByte(m[1:], ' '); i >= 0 {
				sp = i + 1
			}
		}
		if sp < 0 {
			continue
		}
		left, right := m[:sp], m[sp+1:]
		key := pairKey(t.symbol(left, extra), t.symbol(right, extra))
		if _, dup := t.merges[key]; dup {
			continue // the first rank wins
		}
		t.merges[key] = mergeTo{rank: int32(rank), id: t.symbol(left+right, extra)}
	}
}

func (t *Tokenizer) buildPieces() {
	t.pieces = make([]string, len(t.tokens))
	for id, s := range t.tokens {
		switch t.types[id] {
		case TypeNormal:
			t.pieces[id] = decodeByteLevel(s)
		case TypeControl, TypeUnknown, TypeUserDefined:
			t.pieces[id] = s
		}
	}
}

// decodeByteLevel maps a token text in GPT-2's byte alphabet to its bytes.
// A character outside the alphabet stands for itself.
func decodeByteLevel(s string) string {
	var b []byte
	for _, r := range s {
		if c, ok := runeByte(r); ok {
			b = append(b, c)
		} else {
			b = appendCodepoint(b, r)
		}
	}
	return string(b)
}

// NumTokens returns the vocabulary size.
func (t *Tokenizer) NumTokens() int { return len(t.tokens) }

// Pre returns the tokenizer.ggml.pre value the tokenizer splits words by.
func (t *Tokenizer) Pre() string { return t.preName }

// Text returns the raw vocabulary text of token id (in the byte-level
// alphabet for normal tokens), or "" if id is out of range.
func (t *Tokenizer) Text(id int32) string {
	if !t.valid(id) {
		return ""
	}
	return t.tokens[id]
}

// Type returns the type of token id (after llama.cpp's adjustments: end of
// generation and FIM tokens are CONTROL), or TypeUndefined if id is out of
// range.
func (t *Tokenizer) Type(id int32) TokenType {
	if !t.valid(id) {
		return TypeUndefined
	}
	return t.types[id]
}

// ID returns the id of the token whose vocabulary text is s.
func (t *Tokenizer) ID(s string) (int32, bool) {
	id, ok := t.ids[s]
	return id, ok
}

// BOS returns the beginning-of-sequence token, or None.
func (t *Tokenizer) BOS() int32 { return t.bos }

// EOS returns the end-of-sequence token, or None.
func (t *Tokenizer) EOS() int32 { return t.eos }

// EOT returns the end-of-turn token, or None.
func (t *Tokenizer) EOT() int32 { return t.eot }

// EOM returns the end-of-message token, or None.
func (t *Tokenizer) EOM() int32 { return t.eom }

// UNK returns the unknown token, or None.
func (t *Tokenizer) UNK() int32 { return t.unk }

// PAD returns the padding token, or None.
func (t *Tokenizer) PAD() int32 { return t.pad }

// AddBOS reports whether Encode with addSpecial prepends BOS.
func (t *Tokenizer) AddBOS() bool { return t.addBOS }

// AddEOS reports whether Encode with addSpecial appends EOS.
func (t *Tokenizer) AddEOS() bool { return t.addEOS }

// IsEOG reports whether id ends generation: EOS, EOT, EOM and the tokens
// llama.cpp recognises by name (<|endoftext|>, <|im_end|>, ...).
func (t *Tokenizer) IsEOG(id int32) bool { return t.eog[id] }

// EOGs returns the end-of-generation tokens in increasing order.
func (t *Tokenizer) EOGs() []int32 {
	ids := make([]int32, 0, len(t.eog))
	for id := range t.eog {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (t *Tokenizer) valid(id int32) bool { return id >= 0 && int(id) < len(t.tokens) }
