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
		valid   bool // NewValidDecoder
		steps   []step
		flush   string
	}{
		{"rocket", false, false, []step{{0xf0, ""}, {0x9f, ""}, {0x9a, ""}, {0x80, "🚀"}}, ""},
		{"ascii", false, false, []step{{'a', "a"}, {'b', "b"}}, ""},
		{"invalid byte passes", false, false, []step{{0xff, "\xff"}, {'a', "a"}}, ""},
		{"broken sequence", false, false, []step{{0xe4, ""}, {0xb8, ""}, {'a', "\xe4\xb8a"}}, ""},
		{"lone continuation", false, false, []step{{0x80, "\x80"}}, ""},
		{"incomplete at end", false, false, []step{{'x', "x"}, {0xe4, ""}}, "\xe4"},
		{"control hidden", false, false, []step{{0xc3, ""}, {ctl, ""}, {0xa9, "é"}}, ""},
		{"control shown", true, false, []step{{ctl, "<c>"}, {0xc3, ""}, {0xa9, "é"}}, ""},
		{"valid: rocket", false, true, []step{{0xf0, ""}, {0x9f, ""}, {0x9a, ""}, {0x80, "🚀"}}, ""},
		{"valid: invalid byte", false, true, []step{{0xff, "\uFFFD"}, {'a', "a"}}, ""},
		{"valid: invalid bytes", false, true, []step{{0xff, "\uFFFD"}, {0xfe, "\uFFFD"}}, ""},
		{"valid: broken sequence", false, true, []step{{0xe4, ""}, {0xb8, ""}, {'a', "\uFFFD\uFFFDa"}}, ""},
		{"valid: lone lead byte", false, true, []step{{0xc3, ""}, {'b', "\uFFFDb"}}, ""},
		{"valid: lone continuation", false, true, []step{{'x', "x"}, {0x80, "\uFFFD"}}, ""},
		{"valid: overlong", false, true, []step{{0xc0, "\uFFFD"}, {0xaf, "\uFFFD"}}, ""},
		{"valid: surrogate", false, true, []step{{0xed, ""}, {0xa0, "\uFFFD\uFFFD"}, {0x80, "\uFFFD"}}, ""},
		{"valid: incomplete at end", false, true, []step{{'x', "x"}, {0xe4, ""}, {0xb8, ""}}, "\uFFFD\uFFFD"},
		{"valid: lead byte before a whole character", false, true, []step{{0xe4, ""}, {0xc3, "\uFFFD"}, {0xa9, "é"}}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := tok.NewDecoder(c.special)
			if c.valid {
				d = tok.NewValidDecoder(c.special)
			}
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

// TestValidDecoderCuts: wherever a byte stream is cut into tokens, the
// valid Decoder's output is valid UTF-8 and equals Go's decoding of the
// whole stream (every invalid byte one U+FFFD).
func TestValidDecoderCuts(t *testing.T) {
	tok := tinyVocab(t, "gpt-2", nil, nil, nil)
	for _, stream := range []string{
		"a\xc3\xa9b", "\xc3\xc3\xc3", "\xe4\xb8\xc3\xa9", "\xf0\x9f\x9a\x80\xf0\x9f", "\xed\xa0\x80x",
		"\xc0\xafz", "\x80\x80\xe4\xb8\xad", "\xff\xfe\xf0", "é\xa9\xa9€",
	} {
		want := string([]rune(stream))
		// Every way to cut the stream into single-byte tokens is the same
		// token sequence; vary where Add returns instead by flushing never
		// and checking each prefix's output is a prefix of want.
		d := tok.NewValidDecoder(false)
		var b strings.Builder
		for i := range len(stream) {
			out, err := d.Add(int32(stream[i]))
			if err != nil {
				t.Fatal(err)
			}
			if !utf8.ValidString(out) {
				t.Errorf("%q: output %q is not valid UTF-8", stream, out)
			}
			b.WriteString(out)
			if !strings.HasPrefix(want, b.String()) {
				t.Errorf("%q: after byte %d the output %q is not a prefix of %q", stream, i, b.String(), want)
			}
		}
		b.WriteString(d.Flush())
		if b.String() != want {
			t.Errorf("%q: streamed %q, want %q", stream, b.String(), want)
		}
	}
}
