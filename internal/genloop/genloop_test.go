package genloop

import (
	"math"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/model/sample"
	"github.com/glmrun/glmrun/model/tokenizer"
)

// pieces are the tokens of the test vocabulary, in GPT-2's byte-level
// alphabet: "Ã" and "©" are the two bytes of "é" (C3 A9).
var pieces = []string{"ab", "c", "xS", "T", "OPy", "xST", "Ay", "a", "bcd", "aa", "aab", "caf", "Ã", "©", "!", "b", "x",
	"<|endoftext|>", "<tool_call>"}

func testTokenizer(t *testing.T) (*tokenizer.Tokenizer, map[string]int32) {
	t.Helper()
	v := tokenizer.Vocab{Model: "gpt2", Pre: "glm4", Tokens: pieces,
		BOS: tokenizer.None, EOS: tokenizer.None, EOT: tokenizer.None, EOM: tokenizer.None, UNK: tokenizer.None, PAD: tokenizer.None}
	ids := map[string]int32{}
	for i, p := range pieces {
		ty := tokenizer.TypeNormal
		if strings.HasPrefix(p, "<") {
			ty = tokenizer.TypeControl
		}
		v.Types = append(v.Types, ty)
		ids[p] = int32(i)
	}
	v.EOS = ids["<|endoftext|>"]
	tok, err := tokenizer.FromVocab(v)
	if err != nil {
		t.Fatal(err)
	}
	return tok, ids
}

func TestStream(t *testing.T) {
	tok, ids := testTokenizer(t)
	for _, c := range []struct {
		name   string
		opts   Options
		tokens []string
		full   int      // index of the token that fills the context, -1 none
		want   []string // text emitted per token
		reason Reason   // of the last token
		stop   string
	}{
		{"no stops", Options{}, []string{"ab", "c"}, -1, []string{"ab", "c"}, Running, ""},
		{"stop inside a token", Options{Stop: []string{"b"}}, []string{"ab"}, -1, []string{"a"}, StopString, "b"},
		{"stop across tokens", Options{Stop: []string{"STOP"}}, []string{"xS", "T", "OPy"}, -1, []string{"x", "", ""}, StopString, "STOP"},
		{"false start", Options{Stop: []string{"STOP"}}, []string{"xST", "Ay"}, -1, []string{"x", "STAy"}, Running, ""},
		{"earliest stop wins", Options{Stop: []string{"cd", "b"}}, []string{"a", "bcd"}, -1, []string{"a", ""}, StopString, "b"},
		{"restart in held text", Options{Stop: []string{"aab"}}, []string{"aa", "aab"}, -1, []string{"", "aa"}, StopString, "aab"},
		{"stop after a split character", Options{Stop: []string{"é!"}}, []string{"caf", "Ã", "©", "!"}, -1, []string{"caf", "", "", ""}, StopString, "é!"},
		{"empty stop ignored", Options{Stop: []string{""}}, []string{"ab"}, -1, []string{"ab"}, Running, ""},
		{"EOG flushes held text", Options{Stop: []string{"STOP"}}, []string{"xS", "<|endoftext|>"}, -1, []string{"x", "S"}, EOG, ""},
		{"IgnoreEOS", Options{IgnoreEOS: true, Special: true}, []string{"<|endoftext|>"}, -1, []string{"<|endoftext|>"}, Running, ""},
		{"control token hidden", Options{}, []string{"a", "<tool_call>", "b"}, -1, []string{"a", "", "b"}, Running, ""},
		{"marker", Options{Markers: map[int32]byte{ids["<tool_call>"]: 1}}, []string{"Ã", "<tool_call>"}, -1, []string{"", "\uFFFD\x01"}, Running, ""},
		{"length flushes a split character", Options{MaxTokens: 2}, []string{"a", "Ã"}, -1, []string{"a", "\uFFFD"}, Length, ""},
		{"raw bytes", Options{MaxTokens: 2, RawBytes: true}, []string{"a", "Ã"}, -1, []string{"a", "\xc3"}, Length, ""},
		{"context", Options{Stop: []string{"bx"}}, []string{"a", "b"}, 1, []string{"a", "b"}, Context, ""},
		{"length before context", Options{MaxTokens: 1}, []string{"a"}, 0, []string{"a"}, Length, ""},
		{"done", Options{Done: func(id int32) bool { return id == ids["c"] }}, []string{"ab", "c", "x"}, -1, []string{"ab", "c"}, Done, ""},
		{"stop string before done", Options{Stop: []string{"c"}, Done: func(int32) bool { return true }}, []string{"c"}, -1, []string{""}, StopString, "c"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.opts.Tokenizer = tok
			s := New(c.opts)
			var st Step
			n := 0
			for i, p := range c.tokens {
				var err error
				if st, err = s.Add(ids[p], i == c.full); err != nil {
					t.Fatal(err)
				}
				if i >= len(c.want) {
					t.Fatalf("token %d %q: not ended after %d tokens", i, p, len(c.want))
				}
				if st.Text != c.want[i] {
					t.Errorf("token %d %q: emitted %q, want %q", i, p, st.Text, c.want[i])
				}
				n++
				if st.Reason != Running {
					break
				}
			}
			if n != len(c.want) || st.Reason != c.reason || st.StopString != c.stop {
				t.Errorf("ended after %d tokens with %v %q, want %d with %v %q", n, st.Reason, st.StopString, len(c.want), c.reason, c.stop)
			}
			if s.Generated() != n {
				t.Errorf("Generated() = %d, want %d", s.Generated(), n)
			}
		})
	}
}

func TestStreamBadToken(t *testing.T) {
	tok, _ := testTokenizer(t)
	if _, err := New(Options{Tokenizer: tok}).Add(int32(len(pieces)), false); err == nil {
		t.Error("a token outside the vocabulary was decoded")
	}
}

func TestStopStrings(t *testing.T) {
	for _, tc := range []struct {
		text   string
		stop   []string
		index  int
		prefix int
	}{
		{"hello world", nil, -1, 0},
		{"hello world", []string{"wor"}, 6, 0},
		{"hello wo", []string{"world"}, -1, 2},
		{"hello w", []string{"world", "w"}, 6, 1},
		{"abcab", []string{"abc", "bx"}, 0, 2},
		{"xx", []string{"xxx"}, -1, 2},
		{"hé", []string{"é!"}, -1, 2},
	} {
		if got, _ := firstStop(tc.text, tc.stop); got != tc.index {
			t.Errorf("firstStop(%q, %q) = %d, want %d", tc.text, tc.stop, got, tc.index)
		}
		if got := stopPrefixLen(tc.text, tc.stop); got != tc.prefix {
			t.Errorf("stopPrefixLen(%q, %q) = %d, want %d", tc.text, tc.stop, got, tc.prefix)
		}
	}
}

func TestPick(t *testing.T) {
	smp, err := sample.New(sample.Options{})
	if err != nil {
		t.Fatal(err)
	}
	logits := []float32{0, 3, 1, 2}
	id, lp, err := Pick(smp, logits, nil, true, 2)
	if err != nil || id != 1 || lp.Chosen.ID != 1 || len(lp.Top) != 2 || lp.Top[1].ID != 3 {
		t.Errorf("Pick greedy = %d, %+v, %v; want 1 with top [1 3]", id, lp, err)
	}
	ban := func(l []float32) error { l[1] = float32(math.Inf(-1)); return nil }
	if id, _, err := Pick(smp, []float32{0, 3, 1, 2}, ban, false, 0); err != nil || id != 3 {
		t.Errorf("Pick with token 1 masked = %d, %v; want 3", id, err)
	}
}
