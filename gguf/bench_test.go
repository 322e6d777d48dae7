package gguf

import (
	"testing"
)

// BenchmarkOpen opens (maps and validates) a whole glm5-mini model.
func BenchmarkOpen(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		f, err := Open(mini)
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

// BenchmarkParseVocab parses a vocabulary-only file of 128k tokens and
// merges from memory: the metadata-heavy case.
func BenchmarkParseVocab(b *testing.B) {
	data := readMaybeGz(b, "../testdata/tokenizers/vocab-llama3.gguf.gz")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("vocab-llama3.gguf", data); err != nil {
			b.Fatal(err)
		}
	}
}
