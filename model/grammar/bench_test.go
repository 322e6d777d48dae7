package grammar

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/model/tokenizer"
)

// qwen3 loads the 151,669-token vocabulary of testdata (the size of
// GLM-4.7-Flash's and the synthetic reference shape's).
func qwen3(b *testing.B) (*tokenizer.Tokenizer, *Vocab) {
	b.Helper()
	path := filepath.Join("..", "..", "testdata", "tokenizers", "vocab-qwen3.gguf.gz")
	raw, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		b.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		b.Fatal(err)
	}
	f, err := gguf.Parse(path, data)
	if err != nil {
		b.Fatal(err)
	}
	tok, err := tokenizer.New(f)
	if err != nil {
		b.Fatal(err)
	}
	pieces := make([]string, tok.NumTokens())
	for id := range pieces {
		pieces[id] = tok.Piece(int32(id), false)
	}
	v, err := NewVocab(pieces, tok.EOGs())
	if err != nil {
		b.Fatal(err)
	}
	return tok, v
}

// BenchmarkMask times what constrained decoding adds per token on a
// 151k vocabulary: the mask and the move past the chosen token, for a
// JSON-schema reply, each generation with a fresh matcher (cold caches).
func BenchmarkMask(b *testing.B) {
	tok, v := qwen3(b)
	src, err := SchemaGrammar([]byte(`{"type": "object", "properties": {"name": {"type": "string", "maxLength": 40},
		"age": {"type": "integer"}, "city": {"enum": ["Paris", "Berlin", "Rome"]},
		"tags": {"type": "array", "items": {"type": "string"}, "maxItems": 4}, "score": {"type": "number"}},
		"required": ["name", "age"]}`))
	if err != nil {
		b.Fatal(err)
	}
	g, err := Parse(src)
	if err != nil {
		b.Fatal(err)
	}
	text := `{"name": "Ann Smith, the third of her name", "age": 41, "city": "Rome", "tags": ["blue", "tall"], "score": 12.75}`
	ids := tok.Encode(text, false, false)
	logits := make([]float32, v.Size())
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		m, err := g.NewMatcher(v)
		if err != nil {
			b.Fatal(err)
		}
		for _, id := range ids {
			if err := m.Apply(logits); err != nil {
				b.Fatal(err)
			}
			if err := m.Accept(id); err != nil {
				b.Fatalf("token %d (%q): %v", id, tok.Piece(id, false), err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ids))/1e6, "ms/token")
}

func BenchmarkNewVocab(b *testing.B) {
	tok, _ := qwen3(b)
	pieces := make([]string, tok.NumTokens())
	for id := range pieces {
		pieces[id] = tok.Piece(int32(id), false)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := NewVocab(pieces, tok.EOGs()); err != nil {
			b.Fatal(err)
		}
	}
}
