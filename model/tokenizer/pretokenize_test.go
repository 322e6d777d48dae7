package tokenizer

import (
	"slices"
	"testing"
)

// words splits text with the pre-tokenizer of pre.
func words(t *testing.T, pre, text string) []string {
	t.Helper()
	info, ok := lookupPre(pre)
	if !ok {
		t.Fatalf("pre %q unknown", pre)
	}
	cps := decodeCodepoints(nil, text)
	cls := make([]class, len(cps))
	for i, r := range cps {
		cls[i] = classify(r)
	}
	ends, _ := info.pre.split(cps, cls, nil, nil)
	var out []string
	lo := 0
	for _, e := range ends {
		if int(e) <= lo {
			t.Fatalf("%s %q: empty or backwards word at %d (ends %v)", pre, text, lo, ends)
		}
		out = append(out, string(cps[lo:e]))
		lo = int(e)
	}
	if lo != len(cps) {
		t.Fatalf("%s %q: words end at %d of %d", pre, text, lo, len(cps))
	}
	return out
}

// TestPreTokenizers checks edge cases of each pre-tokenizer; the expected
// words follow from the regexes in llama.cpp's src/llama-vocab.cpp under
// ECMAScript semantics (leftmost match, alternatives in order, unmatched
// text a word of its own).
func TestPreTokenizers(t *testing.T) {
	for _, c := range []struct {
		pre, text string
		want      []string
	}{
		// \s+(?!\S) leaves the last space to the next word; \s+ at the end.
		{"glm4", "Hello  world   ", []string{"Hello", " ", " world", "   "}},
		// contractions are case-insensitive in llama-3's regex ...
		{"glm4", "I'M we'Re 'LL", []string{"I", "'M", " we", "'Re", " '", "LL"}},
		// ... but not in GPT-2's.
		{"gpt-2", "I'M we're", []string{"I", "'", "M", " we", "'re"}},
		// \p{N}{1,3}, and a non-letter prefix joins the letters after it.
		{"glm4", "12345 x7", []string{"123", "45", " x", "7"}},
		{"glm4", "$abc ?!\n\nx", []string{"$abc", " ?!\n\n", "x"}},
		// \s*[\r\n]+ ends at the last newline of the run.
		{"glm4", "a \n \n  b", []string{"a", " \n \n", " ", " b"}},
		{"llama-bpe", "\t\tx", []string{"\t", "\tx"}},
		{"qwen2", "12345", []string{"1", "2", "3", "4", "5"}},
		{"gpt-2", " 123 abc  ", []string{" 123", " abc", "  "}},
		{"gpt-2", "a  b", []string{"a", " ", " b"}},
		// deepseek-v3: digits first, then CJK/kana runs, then the main
		// regex; '~' is no \p{S} in llama.cpp's collapsed text, so "~~~"
		// matches nothing and stays a word between matches.
		{"deepseek-v3", "~~~ a", []string{"~~~", " a"}},
		{"deepseek-v3", "12345abc", []string{"123", "45", "abc"}},
		{"deepseek-v3", "中文abc ひらがな", []string{"中文", "abc", " ", "ひらがな"}},
		{"deepseek-v3", "(x) $$", []string{"(x", ")", " $$"}},
		// deepseek-llm: newlines alone, letters with one optional space,
		// punctuation, trailing spaces, CJK, numbers.
		{"deepseek-llm", "Hello World\n", []string{"Hello", " World", "\n"}},
		{"deepseek-llm", "3.14  \n", []string{"3", ".", "14", "  ", "\n"}},
		{"deepseek-coder", "x12", []string{"x", "1", "2"}},
		{"deepseek-coder", "a, b", []string{"a", ",", " b"}},
	} {
		t.Run(c.pre+"/"+c.text, func(t *testing.T) {
			if got := words(t, c.pre, c.text); !slices.Equal(got, c.want) {
				t.Errorf("%q:\n got %q\nwant %q", c.text, got, c.want)
			}
		})
	}
}

// TestPreTokenizersCover splits assorted text with every pre-tokenizer and
// checks the words tile the input (words checks it) and are not empty.
func TestPreTokenizersCover(t *testing.T) {
	texts := []string{
		"", " ", "\n", "a", "~", "\u00a0x", "e\u0301\u0301", "\u3000中\u3000", "x\x00y\x7f",
		"🚀🦙 emoji", "Ünïcödé café, 中文, русский", "   \t\n\r\n  ", "'s'S'll'LL", "１２３ａｂｃ！",
		"\xff\xfe invalid \xc3", "\u2028\u2029\u0085", "١٢٣٤ arabic", "\u200b",
	}
	for _, pre := range SupportedPre() {
		for _, text := range texts {
			words(t, pre, text)
		}
	}
}

func TestDecodeCodepoints(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []rune
	}{
		{"aé中🚀", []rune{'a', 'é', '中', '🚀'}},
		{"\xff", []rune{0xfffd}},
		{"a\xc3", []rune{'a', 0xfffd}},
		{"\xe4\xb8", []rune{0xfffd, 0xfffd}},
		{"\xc0\x80", []rune{0}},              // overlong NUL decodes, as in llama.cpp
		{"\xed\xa0\x80", []rune{0xd800}},     // so does a surrogate
		{"\xf7\xbf\xbf\xbf", []rune{0xfffd}}, // beyond U+10FFFF
		{"\x80a", []rune{0xfffd, 'a'}},
	} {
		if got := decodeCodepoints(nil, c.in); !slices.Equal(got, c.want) {
			t.Errorf("decodeCodepoints(%q) = %U, want %U", c.in, got, c.want)
		}
	}
	if got := string(appendCodepoint(nil, 0xd800)); got != "\xed\xa0\x80" {
		t.Errorf("appendCodepoint(U+D800) = %q", got)
	}
}

func TestByteAlphabet(t *testing.T) {
	seen := map[rune]bool{}
	for b := range 256 {
		r := byteRunes[b]
		if seen[r] {
			t.Fatalf("rune %U used twice", r)
		}
		seen[r] = true
		if back, ok := runeByte(r); !ok || back != byte(b) {
			t.Errorf("byte %#x -> %U -> %#x %v", b, r, back, ok)
		}
	}
	// GPT-2's alphabet: space is 'Ġ' (U+0120), newline 'Ċ' (U+010A).
	if byteRunes[' '] != 'Ġ' || byteRunes['\n'] != 'Ċ' || byteRunes['a'] != 'a' {
		t.Errorf("space %U, newline %U, a %U", byteRunes[' '], byteRunes['\n'], byteRunes['a'])
	}
	if _, ok := runeByte('中'); ok {
		t.Error("runeByte('中') ok")
	}
}
