package tokenizer

import (
	"errors"
	"fmt"

	"github.com/glmrun/glmrun/gguf"
)

// GGUF keys of the tokenizer (docs/FILE-LAYOUTS.md section 5).
const (
	KeyModel     = "tokenizer.ggml.model"
	KeyPre       = "tokenizer.ggml.pre"
	KeyTokens    = "tokenizer.ggml.tokens"
	KeyTokenType = "tokenizer.ggml.token_type"
	KeyMerges    = "tokenizer.ggml.merges"
	KeyBOS       = "tokenizer.ggml.bos_token_id"
	KeyEOS       = "tokenizer.ggml.eos_token_id"
	KeyEOT       = "tokenizer.ggml.eot_token_id"
	KeyEOM       = "tokenizer.ggml.eom_token_id"
	KeyUNK       = "tokenizer.ggml.unknown_token_id"
	KeyPAD       = "tokenizer.ggml.padding_token_id"
	KeyAddBOS    = "tokenizer.ggml.add_bos_token"
	KeyAddEOS    = "tokenizer.ggml.add_eos_token"
)

// ErrNoTokenizer is wrapped by New's error for a file without a tokenizer
// (no tokenizer.ggml.model key).
var ErrNoTokenizer = errors.New("no tokenizer")

// New builds the Tokenizer of a GGUF file from its tokenizer.ggml.* keys.
// A file without a tokenizer, another tokenizer.ggml.model than "gpt2" or a
// tokenizer.ggml.pre this package does not know gives an error naming the
// file, key and value.
func New(f *gguf.File) (*Tokenizer, error) {
	v, err := ReadVocab(f)
	if err != nil {
		return nil, err
	}
	t, err := FromVocab(v)
	if err != nil {
		return nil, fmt.Errorf("%w (file %s)", err, f.Path)
	}
	return t, nil
}

// ReadVocab reads the tokenizer.ggml.* keys of f, with llama.cpp's defaults
// for absent special tokens and add_bos_token.
func ReadVocab(f *gguf.File) (Vocab, error) {
	var v Vocab
	errf := func(format string, args ...any) error {
		return fmt.Errorf("tokenizer: %s: "+format, append([]any{f.Path}, args...)...)
	}
	if _, ok := f.Lookup(KeyModel); !ok {
		return v, errf("key %q missing: %w", KeyModel, ErrNoTokenizer)
	}
	var err error
	if v.Model, err = f.String(KeyModel); err != nil {
		return v, fmt.Errorf("tokenizer: %w", err)
	}
	if v.Model != "gpt2" {
		return v, errf("%s = %q: %w (only \"gpt2\", byte-level BPE)", KeyModel, v.Model, ErrUnsupported)
	}
	if _, ok := f.Lookup(KeyPre); !ok {
		return v, errf("key %q missing: %w (llama.cpp would fall back to its \"default\" regexes; supported: %v)", KeyPre, ErrUnsupported, SupportedPre())
	}
	if v.Pre, err = f.String(KeyPre); err != nil {
		return v, fmt.Errorf("tokenizer: %w", err)
	}
	info, ok := lookupPre(v.Pre)
	if !ok {
		return v, errf("%s = %q: %w (supported: %v)", KeyPre, v.Pre, ErrUnsupported, SupportedPre())
	}
	if v.Tokens, err = f.Strings(KeyTokens); err != nil {
		return v, fmt.Errorf("tokenizer: %w", err)
	}
	if v.Merges, err = f.Strings(KeyMerges); err != nil {
		return v, fmt.Errorf("tokenizer: %w", err)
	}
	if _, ok := f.Lookup(KeyTokenType); ok {
		types, err := f.Ints(KeyTokenType)
		if err != nil {
			return v, fmt.Errorf("tokenizer: %w", err)
		}
		if len(types) != len(v.Tokens) {
			return v, errf("%s has %d entries for %d tokens", KeyTokenType, len(types), len(v.Tokens))
		}
		v.Types = make([]TokenType, len(types))
		for i, x := range types {
			v.Types[i] = TokenType(x)
		}
	}
	// llama.cpp's defaults for "gpt2" vocabularies; glm4 has no BOS by default.
	v.BOS, v.EOS, v.EOT, v.EOM, v.UNK, v.PAD = 11, 11, None, None, None, None
	if v.Pre == "glm4" || v.Pre == "chatglm-bpe" {
		v.BOS = None
	}
	for _, k := range []struct {
		key string
		dst *int32
	}{{KeyBOS, &v.BOS}, {KeyEOS, &v.EOS}, {KeyEOT, &v.EOT}, {KeyEOM, &v.EOM}, {KeyUNK, &v.UNK}, {KeyPAD, &v.PAD}} {
		if _, ok := f.Lookup(k.key); !ok {
			continue
		}
		id, err := f.Uint(k.key)
		if err != nil {
			return v, fmt.Errorf("tokenizer: %w", err)
		}
		if id >= uint64(len(v.Tokens)) {
			return v, errf("%s = %d out of range (%d tokens)", k.key, id, len(v.Tokens))
		}
		*k.dst = int32(id)
	}
	for _, id := range []*int32{&v.BOS, &v.EOS} {
		if *id >= int32(len(v.Tokens)) {
			*id = None // the default 11 of a tiny vocabulary
		}
	}
	v.AddBOS = info.addBOS
	for _, k := range []struct {
		key string
		dst *bool
	}{{KeyAddBOS, &v.AddBOS}, {KeyAddEOS, &v.AddEOS}} {
		if _, ok := f.Lookup(k.key); !ok {
			continue
		}
		if *k.dst, err = f.Bool(k.key); err != nil {
			return v, fmt.Errorf("tokenizer: %w", err)
		}
	}
	return v, nil
}
