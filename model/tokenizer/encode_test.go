package tokenizer

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// enc maps raw text to GPT-2's byte alphabet (how vocabularies spell tokens).
func enc(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteRune(byteRunes[s[i]])
	}
	return b.String()
}

// tinyVocab is a hand-made vocabulary: the 256 byte tokens (id = byte),
// then extra normal tokens, then the given specials.
func tinyVocab(t *testing.T, pre string, extra, merges []string, specials map[string]TokenType) *Tokenizer {
	t.Helper()
	v := Vocab{Model: "gpt2", Pre: pre, BOS: None, EOS: None, EOT: None, EOM: None, UNK: None, PAD: None}
	for b := range 256 {
		v.Tokens = append(v.Tokens, string(byteRunes[b]))
		v.Types = append(v.Types, TypeNormal)
	}
	for _, s := range extra {
		v.Tokens = append(v.Tokens, enc(s))
		v.Types = append(v.Types, TypeNormal)
	}
	names := make([]string, 0, len(specials))
	for s := range specials {
		names = append(names, s)
	}
	slices.Sort(names)
	for _, s := range names {
		v.Tokens = append(v.Tokens, s)
		v.Types = append(v.Types, specials[s])
	}
	for _, m := range merges {
		l, r, _ := strings.Cut(m, " ")
		v.Merges = append(v.Merges, enc(l)+" "+enc(r))
	}
	tok, err := FromVocab(v)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func texts(tok *Tokenizer, ids []int32) []string {
	var out []string
	for _, id := range ids {
		out = append(out, tok.Piece(id, true))
	}
	return out
}

func TestBPEMerges(t *testing.T) {
	// ranks: "a b" 0, "b c" 1, "ab c" 2, "c c" 3, "cc cc" 4
	tok := tinyVocab(t, "gpt-2", []string{"ab", "bc", "abc", "cc", "cccc"},
		[]string{"a b", "b c", "ab c", "c c", "cc cc"}, nil)
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"abc", []string{"abc"}},         // a+b first (rank 0), then ab+c
		{"bc", []string{"bc"}},           // only b+c applies
		{"abbc", []string{"ab", "bc"}},   // both pairs, disjoint
		{"ccccc", []string{"cccc", "c"}}, // leftmost first on equal ranks
		{"cba", []string{"c", "b", "a"}}, // no merge
		{"xabcx", []string{"x", "abc", "x"}},
		{"a\u00e9", []string{"a", "\xc3", "\xa9"}}, // é is two byte tokens
	} {
		if got := texts(tok, tok.Encode(c.in, false, false)); !slices.Equal(got, c.want) {
			t.Errorf("%q: got %q, want %q", c.in, got, c.want)
		}
	}
}

func TestIgnoreMerges(t *testing.T) {
	// "xyz" is a token that the merges cannot build; glm4 and llama-bpe
	// take a word that is a token whole, gpt-2 does not.
	extra, merges := []string{"xy", "xyz"}, []string{"x y"}
	for _, c := range []struct {
		pre  string
		want []string
	}{
		{"glm4", []string{"xyz"}},
		{"llama-bpe", []string{"xyz"}},
		{"gpt-2", []string{"xy", "z"}},
		{"qwen2", []string{"xy", "z"}},
	} {
		tok := tinyVocab(t, c.pre, extra, merges, nil)
		if got := texts(tok, tok.Encode("xyz", false, false)); !slices.Equal(got, c.want) {
			t.Errorf("%s: got %q, want %q", c.pre, got, c.want)
		}
	}
}

func TestMergeToNonToken(t *testing.T) {
	// A merge whose result is no token: llama.cpp falls back to the
	// tokens of the single bytes of its text.
	tok := tinyVocab(t, "gpt-2", nil, []string{"q r"}, nil)
	if got := texts(tok, tok.Encode("qr", false, false)); !slices.Equal(got, []string{"q", "r"}) {
		t.Errorf("got %q", got)
	}
}

func TestSpecialPartition(t *testing.T) {
	specials := map[string]TokenType{
		"<a>":   TypeControl,
		"<a><b": TypeControl, // longer: wins where both match
		"<b>":   TypeControl,
		"[U]":   TypeUserDefined,
		"<unk>": TypeUnknown,
	}
	tok := tinyVocab(t, "gpt-2", nil, nil, specials)
	id := func(s string) int32 {
		i, ok := tok.ID(s)
		if !ok {
			t.Fatalf("no token %q", s)
		}
		return i
	}
	bytesOf := func(s string) []int32 {
		var ids []int32
		for i := 0; i < len(s); i++ {
			ids = append(ids, int32(s[i]))
		}
		return ids
	}
	cat := func(parts ...[]int32) []int32 { return slices.Concat(parts...) }
	for _, c := range []struct {
		name, text string
		parse      bool
		want       []int32
	}{
		{"control parsed", "x<a>y", true, cat(bytesOf("x"), []int32{id("<a>")}, bytesOf("y"))},
		{"control not parsed", "x<a>y", false, bytesOf("x<a>y")},
		{"user-defined always", "x[U]y", false, cat(bytesOf("x"), []int32{id("[U]")}, bytesOf("y"))},
		{"unknown only parsed", "<unk>", false, bytesOf("<unk>")},
		{"unknown parsed", "<unk>", true, []int32{id("<unk>")}},
		// "<a><b" is cut out first (longest), leaving ">" rather than "<b>".
		{"longest first", "<a><b>", true, cat([]int32{id("<a><b")}, bytesOf(">"))},
		{"repeats", "<b><b>[U]", true, []int32{id("<b>"), id("<b>"), id("[U]")}},
		{"empty", "", true, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := tok.Encode(c.text, false, c.parse); !slices.Equal(got, c.want) {
				t.Errorf("%q: got %v, want %v", c.text, got, c.want)
			}
		})
	}
}

func TestAddSpecial(t *testing.T) {
	v := Vocab{Model: "gpt2", Pre: "llama-bpe", Tokens: []string{"<s>", "</s>", "a"}, BOS: 0, EOS: 1,
		EOT: None, EOM: None, UNK: None, PAD: None, AddBOS: true, AddEOS: true}
	tok, err := FromVocab(v)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tok.Encode("a", true, false), []int32{0, 2, 1}; !slices.Equal(got, want) {
		t.Errorf("addSpecial: %v, want %v", got, want)
	}
	if got, want := tok.Encode("a", false, false), []int32{2}; !slices.Equal(got, want) {
		t.Errorf("no addSpecial: %v, want %v", got, want)
	}
	if !DefaultAddBOS("llama-bpe") || DefaultAddBOS("glm4") || DefaultAddBOS("nope") {
		t.Error("DefaultAddBOS")
	}
}

func TestFromVocabErrors(t *testing.T) {
	ok := Vocab{Model: "gpt2", Pre: "glm4", Tokens: []string{"a", "b"}, BOS: None, EOS: None, EOT: None, EOM: None, UNK: None, PAD: None}
	for _, c := range []struct {
		name string
		edit func(v *Vocab)
		want string
	}{
		{"model", func(v *Vocab) { v.Model = "llama" }, `tokenizer.ggml.model "llama"`},
		{"pre", func(v *Vocab) { v.Pre = "mystery" }, `tokenizer.ggml.pre "mystery"`},
		{"no tokens", func(v *Vocab) { v.Tokens = nil }, "empty"},
		{"types", func(v *Vocab) { v.Types = []TokenType{1} }, "1 entries for 2 tokens"},
		{"bos", func(v *Vocab) { v.BOS = 2 }, "bos token id 2 out of range"},
		{"add bos", func(v *Vocab) { v.AddBOS = true }, "no BOS"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := ok
			c.edit(&v)
			_, err := FromVocab(v)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want it to contain %q", err, c.want)
			}
		})
	}
	if _, err := FromVocab(ok); err != nil {
		t.Errorf("valid vocab: %v", err)
	}
}

func TestEmptyTokenText(t *testing.T) {
	v := Vocab{Model: "gpt2", Pre: "gpt-2", Tokens: []string{"a", ""}, BOS: None, EOS: None, EOT: None, EOM: None, UNK: None, PAD: None}
	tok, err := FromVocab(v)
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Text(1); got != "[EMPTY_1]" {
		t.Errorf("empty token text = %q", got)
	}
}

func TestConcurrentEncode(t *testing.T) {
	tok := load(t, glm5Mini)
	text := "Hello world! The quick brown fox, isn't it? 中文 🚀 <|user|>"
	want := tok.Encode(text, false, true)
	done := make(chan []int32)
	for range 8 {
		go func() {
			var last []int32
			for range 50 {
				last = tok.Encode(text, false, true)
			}
			done <- last
		}()
	}
	for range 8 {
		if got := <-done; !slices.Equal(got, want) {
			t.Errorf("concurrent Encode = %v, want %v", got, want)
		}
	}
	if !utf8.ValidString(text) {
		t.Fatal("bad test text")
	}
}
