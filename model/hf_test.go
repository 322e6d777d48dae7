package model

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/glmrun/glmrun/internal/testmodels"
)

// llamacppConversion is what llama.cpp's converter wrote for a checkpoint
// (testdata/hf/NAME.llamacpp-T.json): each tensor's type, shape and hash.
type llamacppConversion struct {
	Tensors []struct {
		Name   string `json:"name"`
		SHA256 string `json:"sha256"`
	} `json:"tensors"`
}

// TestSharedIndexerLogits runs GLM-5.2's shared-indexer layers
// (attention.indexer.types = full, shared, full, full; top_k 8 of a
// 40-token prompt, so attention is sparse from position 8 on) against
// transformers' own modeling code: prefill, decode one token at a time,
// and a batched decode step of two sequences, each within 1e-3 of the
// logits transformers computed in float32. The GGUF is llama.cpp's
// conversion of the checkpoint (bf16, lossless for its bf16 weights),
// checked tensor by tensor against the hashes the converter reported.
func TestSharedIndexerLogits(t *testing.T) {
	const name, tol = "glm52-hfs", 1e-3
	path := filepath.Join("..", "testdata", "hf", name+".bf16.gguf")
	m, err := Load(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var conv llamacppConversion
	if err := json.Unmarshal(testmodels.HF(t, name+".llamacpp-bf16"), &conv); err != nil {
		t.Fatal(err)
	}
	if len(conv.Tensors) != len(m.file.Tensors) {
		t.Fatalf("%d tensors, llama.cpp's conversion has %d", len(m.file.Tensors), len(conv.Tensors))
	}
	for _, want := range conv.Tensors {
		ti, ok := m.file.Tensor(want.Name)
		if !ok {
			t.Fatalf("tensor %s missing", want.Name)
		}
		if sum := sha256.Sum256(ti.Data); hex.EncodeToString(sum[:]) != want.SHA256 {
			t.Fatalf("tensor %s is not llama.cpp's conversion", want.Name)
		}
	}
	c := m.Config()
	if got := []bool{c.IndexerShared(0), c.IndexerShared(1), c.IndexerShared(2), c.IndexerShared(3)}; got[0] || !got[1] || got[2] || got[3] {
		t.Fatalf("shared layers %v, want only layer 1", got)
	}
	if m.Weights().Layers[1].Attn.Indexer != nil {
		t.Error("the shared layer has indexer weights")
	}

	batch, seq := testmodels.ReadHFLogits(t, name+".P.batch"), testmodels.ReadHFLogits(t, name+".P.seq")
	if len(batch.Tokens) <= c.IndexerTopK {
		t.Fatalf("%d tokens: no sparse attention with top_k %d", len(batch.Tokens), c.IndexerTopK)
	}

	s, err := m.NewSession(SessionOptions{ContextSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The shared layer has no indexer-key cache: 3 of 4 layers have one.
	if want := int64(64) * int64(4*c.Layers*(c.KVLoraRank+c.DRope)+4*3*c.IndexerDim); s.CacheBytes() != want {
		t.Errorf("cache of %d bytes, want %d (no indexer keys for the shared layer)", s.CacheBytes(), want)
	}
	rows, err := s.Prefill(batch.Tokens)
	if err != nil {
		t.Fatal(err)
	}
	var prefill float64
	for i, row := range rows {
		prefill = max(prefill, maxAbsDiff(row, batch.PromptLogits[i].Logits))
	}

	// Decode: one session alone, and two sessions in batched steps (the
	// second a token behind, so the two see different key counts).
	alone, err := m.NewSession(SessionOptions{ContextSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer alone.Close()
	var b [2]*Session
	for i := range b {
		if b[i], err = m.NewSession(SessionOptions{ContextSize: 64}); err != nil {
			t.Fatal(err)
		}
		defer b[i].Close()
	}
	if _, err := b[1].Decode(batch.Tokens[0]); err != nil {
		t.Fatal(err)
	}
	var decode, batched float64
	for i, tok := range batch.Tokens {
		row, err := alone.Decode(tok)
		if err != nil {
			t.Fatal(err)
		}
		decode = max(decode, maxAbsDiff(row, seq.PromptLogits[i].Logits))
		if i+1 == len(batch.Tokens) {
			break
		}
		out, err := DecodeBatch(b[:], []int32{tok, batch.Tokens[i+1]})
		if err != nil {
			t.Fatal(err)
		}
		batched = max(batched, maxAbsDiff(out[0], seq.PromptLogits[i].Logits), maxAbsDiff(out[1], seq.PromptLogits[i+1].Logits))
	}
	// Tensor parallelism: each device runs the (replicated) indexer and
	// keeps its own selection for the shared layer.
	m2, err := Load(path, Options{TensorParallel: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	s2, err := m2.NewSession(SessionOptions{ContextSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	rows2, err := s2.Prefill(batch.Tokens)
	if err != nil {
		t.Fatal(err)
	}
	var tp2 float64
	for i, row := range rows2 {
		tp2 = max(tp2, maxAbsDiff(row, batch.PromptLogits[i].Logits))
	}
	t.Logf("max |glmrun − transformers|: prefill %.2g, decode %.2g, batched decode %.2g, prefill on 2 devices %.2g", prefill, decode, batched, tp2)
	for _, c := range []struct {
		path string
		d    float64
	}{{"prefill", prefill}, {"decode", decode}, {"batched decode", batched}, {"prefill on 2 devices", tp2}} {
		if c.d > tol {
			t.Errorf("%s: max abs logit diff %.3g from transformers > %g", c.path, c.d, tol)
		}
	}
}
