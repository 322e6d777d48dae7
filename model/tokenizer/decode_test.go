package tokenizer

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestDecoderStream feeds glm5-mini tokens one at a time: its truncated
// vocabulary spells most non-ASCII characters with single-byte tokens, so
// characters are split across tokens and must be held back.
func TestDecoderStream(t *testing.T) {
	tok := load(t, glm5Mini)
	for _, text := range []string{
		"Ünïcödé café, 中文, русский, emoji 🚀🦙",
		"<|user|>中<think>文</think>🦙",
	} {
		ids := tok.Encode(text, false, true)
		d := tok.NewDecoder(true)
		var b strings.Builder
		held := 0
		for _, id := range ids {
			chunk, err := d.Add(id)
			if err != nil {
				t.Fatal(err)
			}
			if !utf8.ValidString(chunk) {
				t.Errorf("%q: chunk %q is not valid UTF-8", text, chunk)
			}
			if !utf8.ValidString(tok.Piece(id, true)) {
				held++
			}
			b.WriteString(chunk)
		}
		b.WriteString(d.Flush())
		if b.String() != text {
			t.Errorf("streamed %q, want %q", b.String(), text)
		}
		if held == 0 {
			t.Errorf("%q: no token held part of a character; the test does not test holding back", text)
		}
	}
}

func TestDecoderBytes(t *testing.T) {
	tok := tinyVocab(t, "gpt-2", nil, nil, map[string]TokenType{"<c>": TypeControl})
	ctl, _ := tok.ID("<c>")
	type step struct {
		id   int32
		want string
	}
	for _, c := range []struct {
		name    string
		special bool
		steps   []step
		flush   string
	}{
		{"rocket", false, []step{{0xf0, ""}, {0x9f, ""}, {0x9a, ""}, {0x80, "🚀"}}, ""},
		{"ascii", false, []step{{'a', "a"}, {'b', "b"}}, ""},
		{"invalid byte passes", false, []step{{0xff, "\xff"}, {'a', "a"}}, ""},
		{"broken sequence", false, []step{{0xe4, ""}, {0xb8, ""}, {'a', "\xe4\xb8a"}}, ""},
		{"lone continuation", false, []step{{0x80, "\x80"}}, ""},
		{"incomplete at end", false, []step{{'x', "x"}, {0xe4, ""}}, "\xe4"},
		{"control hidden", false, []step{{0xc3, ""}, {ctl, ""}, {0xa9, "é"}}, ""},
		{"control shown", true, []step{{ctl, "<c>"}, {0xc3, ""}, {0xa9, "é"}}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := tok.NewDecoder(c.special)
			for i, s := range c.steps {
				got, err := d.Add(s.id)
				if err != nil || got != s.want {
					t.Errorf("step %d: Add(%d) = %q, %v; want %q", i, s.id, got, err, s.want)
				}
			}
			if got := d.Flush(); got != c.flush {
				t.Errorf("Flush = %q, want %q", got, c.flush)
			}
			if got := d.Flush(); got != "" {
				t.Errorf("second Flush = %q", got)
			}
		})
	}
	if _, err := tok.NewDecoder(false).Add(-3); err == nil {
		t.Error("Add(-3): no error")
	}
}

func TestIncompleteTail(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{"", 0}, {"a", 0}, {"é", 0}, {"\xc3", 1}, {"a\xe4\xb8", 2}, {"\xf0\x9f\x9a", 3},
		{"\xf0\x9f\x9a\x80", 0}, {"\x80\x80\x80", 0}, {"\xff", 0}, {"\xe4a", 0}, {"\xc0", 0},
	} {
		if got := incompleteTail([]byte(c.in)); got != c.want {
			t.Errorf("incompleteTail(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}
