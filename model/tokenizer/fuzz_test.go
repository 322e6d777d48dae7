package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// seedTexts returns varied text: llama.cpp's tokenizer test inputs and the
// glm5-mini cases.
func seedTexts(tb testing.TB) []string {
	tb.Helper()
	inp, err := os.ReadFile(filepath.Join(testdata, "tokenizers", "vocab-deepseek-v3.gguf.inp"))
	if err != nil {
		tb.Fatal(err)
	}
	out := strings.Split(string(inp), "\n__ggml_vocab_test__\n")
	var tc tokenizerCases
	if err := json.Unmarshal(readGz(tb, "refs/glm5-mini.tokenizer-cases.json.gz"), &tc); err != nil {
		tb.Fatal(err)
	}
	for _, c := range tc.Cases {
		out = append(out, c.Text)
	}
	return out
}

// fuzzVocabs are the tokenizers the round trip is checked on: one per
// splitter family (custom llama-3 and GPT-2 loops, std::regex emulation).
var fuzzVocabs = []string{glm5Mini, "tokenizers/ggml-vocab-gpt-2.gguf.gz", "tokenizers/vocab-deepseek-v3.gguf.gz"}

// FuzzTokenize checks that plain-text tokenization round-trips:
// Decode(Encode(s)) == s for valid UTF-8. Plain text yields no control
// token, except where the vocabulary ignores merges (llama-bpe, glm4): a
// pre-tokenizer word that is exactly a control token's text, such as
// "/nothink", becomes that token, as in llama.cpp (the glm5-mini refs
// show it), so control tokens are decoded as text here.
func FuzzTokenize(f *testing.F) {
	for _, s := range seedTexts(f) {
		f.Add(s)
	}
	f.Add("<|user|>[gMASK]<think>\n\n  \t~~~ 1234567 ´`'s'LL  ")
	toks := make([]*Tokenizer, len(fuzzVocabs))
	for i, v := range fuzzVocabs {
		toks[i] = load(f, v)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		for i, tok := range toks {
			ids := tok.Encode(s, false, false)
			for _, id := range ids {
				if typ := tok.Type(id); (typ == TypeControl || typ == TypeUnknown) && !tok.ignoreMerges {
					t.Fatalf("%s: %q gave special token %d (%q)", fuzzVocabs[i], s, id, tok.Text(id))
				}
			}
			back, err := tok.Decode(ids, true)
			if err != nil {
				t.Fatal(err)
			}
			if back != s {
				t.Fatalf("%s: round trip %q -> %v -> %q", fuzzVocabs[i], s, ids, back)
			}
		}
	})
}

// benchText is about 8 KB of mixed text: prose, code, numbers, CJK,
// Cyrillic, emoji, whitespace runs and chat markup.
func benchText(tb testing.TB) string {
	var b strings.Builder
	for b.Len() < 8<<10 {
		for _, s := range seedTexts(tb) {
			b.WriteString(s)
			b.WriteByte('\n')
		}
		b.WriteString("func (t *Tokenizer) Encode(text string) []int32 {\n\treturn t.encode(text, 0x7f, 3.14159)\n}\n")
	}
	return b.String()
}

// BenchmarkTokenize reports encoding throughput (MB/s of input text).
func BenchmarkTokenize(b *testing.B) {
	text := benchText(b)
	for _, v := range []string{glm5Mini, "tokenizers/vocab-qwen3.gguf.gz", "tokenizers/vocab-llama3.gguf.gz", "tokenizers/vocab-deepseek-v3.gguf.gz"} {
		tok := load(b, v)
		b.Run(tok.Pre()+"/"+filepath.Base(v), func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				n = len(tok.Encode(text, false, true))
			}
			b.ReportMetric(float64(len(text))/float64(n), "bytes/token")
		})
	}
}

// BenchmarkDecode reports decoding throughput (MB/s of output text).
func BenchmarkDecode(b *testing.B) {
	text := benchText(b)
	tok := load(b, glm5Mini)
	ids := tok.Encode(text, false, true)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tok.Decode(ids, true); err != nil {
			b.Fatal(err)
		}
	}
}
