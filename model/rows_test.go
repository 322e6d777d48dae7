package model

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// TestImportRows: a session that imports another's exported cache rows
// (whole or after a prefix of its own) and goes on gives bit for bit the
// logits of the session that computed them, with the DSA indexer's keys
// restored past top_k (glm5-mini-sparse, top_k 8), under tensor
// parallelism too.
func TestImportRows(t *testing.T) {
	for _, tc := range []struct {
		model string
		tp    int
		fast  bool
	}{
		{"glm5-mini.Q8_0", 1, false},
		{"glm5-mini-sparse.Q8_0", 1, false},
		{"glm5-mini-sparse.Q8_0", 2, true},
		{"ds2-mini.Q8_0", 1, true},
	} {
		t.Run(fmt.Sprintf("%s/tp%d", tc.model, tc.tp), func(t *testing.T) {
			m, err := Load(modelPath(t, tc.model), Options{TensorParallel: tc.tp, Threads: 2, Fast: tc.fast, BatchInvariant: true})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			prompt := make([]int32, 40)
			for i := range prompt {
				prompt[i] = int32(3 + (i*37)%200)
			}
			src, err := m.NewSession(SessionOptions{ContextSize: 64})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := src.Prefill(prompt[:32]); err != nil {
				t.Fatal(err)
			}
			for _, own := range []int{0, 16} {
				rows := make([]float32, (32-own)*src.CacheValues())
				if err := src.ExportRows(rows, own, 32-own); err != nil {
					t.Fatal(err)
				}
				dst, err := m.NewSession(SessionOptions{ContextSize: 64})
				if err != nil {
					t.Fatal(err)
				}
				if own > 0 {
					if _, err := dst.Prefill(prompt[:own]); err != nil {
						t.Fatal(err)
					}
				}
				if err := dst.ImportRows(rows, own, 32-own); err != nil {
					t.Fatal(err)
				}
				if dst.Pos() != 32 {
					t.Fatalf("position %d after the import, want 32", dst.Pos())
				}
				// Both go on from position 32: the rest of the prompt, then
				// decoded tokens.
				ref, err := m.NewSession(SessionOptions{ContextSize: 64})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := ref.Prefill(prompt[:32]); err != nil {
					t.Fatal(err)
				}
				a, err := ref.Prefill(prompt[32:])
				if err != nil {
					t.Fatal(err)
				}
				b, err := dst.Prefill(prompt[32:])
				if err != nil {
					t.Fatal(err)
				}
				same(t, "prefill after the import", a, b)
				for step := range 3 {
					la, err := ref.Decode(int32(10 + step))
					if err != nil {
						t.Fatal(err)
					}
					lb, err := dst.Decode(int32(10 + step))
					if err != nil {
						t.Fatal(err)
					}
					same(t, fmt.Sprintf("decode step %d", step), [][]float32{la}, [][]float32{lb})
				}
				ref.Close()
				dst.Close()
			}
			src.Close()
		})
	}
}

func same(t *testing.T, what string, a, b [][]float32) {
	t.Helper()
	for i := range a {
		for j := range a[i] {
			if math.Float32bits(a[i][j]) != math.Float32bits(b[i][j]) {
				t.Fatalf("%s: row %d logit %d: %v vs %v", what, i, j, a[i][j], b[i][j])
			}
		}
	}
}

func TestImportRowsMisuse(t *testing.T) {
	m, err := Load(modelPath(t, "glm5-mini.Q8_0"), Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s, err := m.NewSession(SessionOptions{ContextSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Prefill([]int32{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	v := s.CacheValues()
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"export past the sequence", s.ExportRows(make([]float32, 5*v), 0, 5), "the sequence has 4"},
		{"export short buffer", s.ExportRows(make([]float32, v), 0, 2), "values for 2 positions"},
		{"import past the sequence", s.ImportRows(make([]float32, v), 5, 1), "the sequence has 4"},
		{"import past the context", s.ImportRows(make([]float32, 20*v), 0, 20), "context is full"},
		{"import short buffer", s.ImportRows(make([]float32, v), 0, 2), "values for 2 positions"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, tc.err, tc.want)
		}
	}
	if s.Pos() != 4 {
		t.Fatalf("failed imports moved the sequence to %d", s.Pos())
	}
}

func TestImportRowsMTP(t *testing.T) {
	m, err := Load(modelPath(t, "glm5-tiny.Q8_0"), Options{MTP: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s, err := m.NewSession(SessionOptions{MTP: true, ContextSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Prefill([]int32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	rows := make([]float32, s.CacheValues())
	if err := s.ExportRows(rows, 0, 1); err == nil || !strings.Contains(err.Error(), "MTP") {
		t.Errorf("export from an MTP session: %v", err)
	}
	if err := s.ImportRows(rows, 0, 1); err == nil || !strings.Contains(err.Error(), "MTP") {
		t.Errorf("import into an MTP session: %v", err)
	}
}
