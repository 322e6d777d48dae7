package tokenizer

import (
	"fmt"
	"unicode/utf8"
)

// Piece returns the bytes token id stands for, as llama.cpp's
// token_to_piece: a normal token's bytes; the text of a user-defined
// token; the text of a control or unknown token only if special is set
// (else ""); "" for unused, byte-type and out-of-range ids. A piece may
// hold part of a UTF-8 character.
func (t *Tokenizer) Piece(id int32, special bool) string {
	if !t.valid(id) {
		return ""
	}
	if !special && (t.types[id] == TypeControl || t.types[id] == TypeUnknown) {
		return ""
	}
	return t.pieces[id]
}

// Decode returns the concatenated pieces of ids (see Piece). For a valid
// UTF-8 string s, Decode(Encode(s, false, false), true) == s. An id out
// of range is an error.
func (t *Tokenizer) Decode(ids []int32, special bool) (string, error) {
	n := 0
	for _, id := range ids {
		if !t.valid(id) {
			return "", fmt.Errorf("tokenizer: token id %d out of range [0, %d)", id, len(t.tokens))
		}
		n += len(t.pieces[id])
	}
	b := make([]byte, 0, n)
	for _, id := range ids {
		b = append(b, t.Piece(id, special)...)
	}
	return string(b), nil
}

// Decoder turns a stream of token ids into text for display: a UTF-8
// character whose bytes are spread over several tokens is held back until
// its last byte arrives. What it does with bytes that can never form a
// character depends on how it was made: NewDecoder passes them through
// unchanged, so the concatenated output always equals Decode of all the ids
// (what a terminal printer wants, as llama-cli prints raw bytes);
// NewValidDecoder replaces each of them with one U+FFFD, as Go decodes a
// string (for range, []rune), so every string it returns is valid UTF-8
// (what JSON wants, as llama.cpp's server does) and the concatenated
// output equals that decoding of Decode of all the ids, wherever the
// stream was cut. A Decoder is not safe for concurrent use.
type Decoder struct {
	t       *Tokenizer
	special bool
	valid   bool // replace invalid bytes with U+FFFD
	pending []byte
}

// NewDecoder returns a Decoder that passes invalid UTF-8 through; special
// renders control tokens as their text (see Piece).
func (t *Tokenizer) NewDecoder(special bool) *Decoder {
	return &Decoder{t: t, special: special}
}

// NewValidDecoder returns a Decoder whose output is always valid UTF-8:
// each byte that cannot be part of a character becomes one U+FFFD.
// special renders control tokens as their text (see Piece).
func (t *Tokenizer) NewValidDecoder(special bool) *Decoder {
	return &Decoder{t: t, special: special, valid: true}
}

// Add appends token id and returns the text that is now complete, possibly
// "" while a character is incomplete.
func (d *Decoder) Add(id int32) (string, error) {
	if !d.t.valid(id) {
		return "", fmt.Errorf("tokenizer: token id %d out of range [0, %d)", id, len(d.t.tokens))
	}
	d.pending = append(d.pending, d.t.Piece(id, d.special)...)
	keep := incompleteTail(d.pending)
	out := d.text(d.pending[:len(d.pending)-keep])
	d.pending = append(d.pending[:0], d.pending[len(d.pending)-keep:]...)
	return out, nil
}

// Flush returns the bytes still held back (an incomplete character at the
// end of the stream; one U+FFFD for a valid Decoder) and resets the
// Decoder.
func (d *Decoder) Flush() string {
	s := d.text(d.pending)
	d.pending = d.pending[:0]
	return s
}

// text returns b as a string, invalid bytes replaced if d is a valid
// Decoder.
func (d *Decoder) text(b []byte) string {
	if d.valid && !utf8.Valid(b) {
		return string([]rune(string(b))) // each invalid byte decodes as U+FFFD
	}
	return string(b)
}

// incompleteTail returns the length of the unfinished UTF-8 sequence that
// ends b: a lead byte followed by fewer continuation bytes than it needs.
func incompleteTail(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax+1; i-- {
		c := b[i]
		switch {
		case c < 0x80:
			return 0
		case c >= 0xc0:
			if utf8.FullRune(b[i:]) {
				return 0
			}
			return len(b) - i
		}
		// a continuation byte: look further back for its lead byte
	}
	return 0
}
