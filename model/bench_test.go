package model

import (
	"testing"
)

// decodeFixture loads glm5-mini.Q4_K_M on the fast path and returns a
// session whose cache has room for 32 positions (warmed up: its buffers
// and views exist) and a logits buffer.
func decodeFixture(tb testing.TB) (*Session, []float32) {
	m, err := Load(modelPath(tb, "glm5-mini.Q4_K_M"), Options{Fast: true, Threads: 2})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { m.Close() })
	s, err := m.NewSession(SessionOptions{ContextSize: 32})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	logits := make([]float32, m.Config().VocabSize)
	for range 32 {
		if err := s.DecodeInto(logits, 7); err != nil {
			tb.Fatal(err)
		}
	}
	s.Reset()
	return s, logits
}

// decodeStep decodes one token, starting over when the context is full.
func decodeStep(tb testing.TB, s *Session, logits []float32) {
	if s.Pos() == s.ContextSize() {
		s.Reset()
	}
	if err := s.DecodeInto(logits, 7); err != nil {
		tb.Fatal(err)
	}
}

// TestDecodeStepAllocs: a decode step on the fast CPU path allocates
// nothing once the session's buffers exist.
func TestDecodeStepAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	s, logits := decodeFixture(t)
	if n := testing.AllocsPerRun(50, func() { decodeStep(t, s, logits) }); n != 0 {
		t.Errorf("decode step: %v allocations, want 0", n)
	}
}

// BenchmarkDecodeStep is one decode step (one token through every layer
// and the output head) of glm5-mini.Q4_K_M on the fast path.
func BenchmarkDecodeStep(b *testing.B) {
	s, logits := decodeFixture(b)
	b.ReportAllocs()
	for b.Loop() {
		decodeStep(b, s, logits)
	}
}
