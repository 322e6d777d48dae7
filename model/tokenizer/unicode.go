package tokenizer

import (
	"sync"
	"unicode"
	"unicode/utf8"
)

// Codepoint classes, the \p{...} categories and \s of the pre-tokenizer
// regexes. llama.cpp derives them from Python's regex module (Unicode
// general categories; \s is the White_Space property); Go's unicode tables
// give the same sets up to the Unicode version.
type class uint8

const (
	clsLetter class = 1 << iota // \p{L}
	clsNumber                   // \p{N}
	clsSpace                    // \s (White_Space)
	clsPunct                    // \p{P}
	clsSymbol                   // \p{S}
	clsMark                     // \p{M}
)

// asciiClass holds the classes of the 128 ASCII codepoints.
var asciiClass = func() (t [128]class) {
	for r := rune(0); r < 128; r++ {
		t[r] = classifySlow(r)
	}
	return t
}()

func classifySlow(r rune) class {
	var c class
	switch {
	case unicode.IsLetter(r):
		c |= clsLetter
	case unicode.IsNumber(r):
		c |= clsNumber
	case unicode.IsPunct(r):
		c |= clsPunct
	case unicode.IsSymbol(r):
		c |= clsSymbol
	case unicode.IsMark(r):
		c |= clsMark
	}
	if r >= 0 && r <= unicode.MaxRune && unicode.Is(unicode.White_Space, r) {
		c |= clsSpace
	}
	return c
}

// bmpClass holds the classes of the Basic Multilingual Plane, built on
// first use (64 KiB).
var bmpClass = sync.OnceValue(func() *[0x10000]class {
	t := new([0x10000]class)
	for r := range rune(0x10000) {
		t[r] = classifySlow(r)
	}
	return t
})

// classify returns the classes of codepoint r.
func classify(r rune) class {
	switch {
	case r >= 0 && r < 128:
		return asciiClass[r]
	case r >= 0 && r < 0x10000:
		return bmpClass()[r]
	}
	return classifySlow(r)
}

// decodeCodepoints appends the codepoints of s to dst the way llama.cpp
// decodes UTF-8 (unicode_cpts_from_utf8): a lead byte followed by the
// right number of continuation bytes is decoded without further checks
// (overlong forms and surrogates pass), anything else yields U+FFFD and
// consumes one byte. For valid UTF-8 this is ordinary decoding.
func decodeCodepoints(dst []rune, s string) []rune {
	if utf8.ValidString(s) {
		for _, r := range s {
			dst = append(dst, r)
		}
		return dst
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c < 0x80:
			dst = append(dst, rune(c))
			i++
		case c&0x40 == 0:
			dst = append(dst, utf8.RuneError)
			i++
		case c&0x20 == 0:
			if i+1 < len(s) && isCont(s[i+1]) {
				dst = append(dst, rune(c&0x1f)<<6|rune(s[i+1]&0x3f))
				i += 2
			} else {
				dst = append(dst, utf8.RuneError)
				i++
			}
		case c&0x10 == 0:
			if i+2 < len(s) && isCont(s[i+1]) && isCont(s[i+2]) {
				dst = append(dst, rune(c&0x0f)<<12|rune(s[i+1]&0x3f)<<6|rune(s[i+2]&0x3f))
				i += 3
			} else {
				dst = append(dst, utf8.RuneError)
				i++
			}
		case c&0x08 == 0:
			if i+3 < len(s) && isCont(s[i+1]) && isCont(s[i+2]) && isCont(s[i+3]) {
				r := rune(c&0x07)<<18 | rune(s[i+1]&0x3f)<<12 | rune(s[i+2]&0x3f)<<6 | rune(s[i+3]&0x3f)
				if r > unicode.MaxRune {
					r = utf8.RuneError // llama.cpp cannot re-encode these either
				}
				dst = append(dst, r)
				i += 4
			} else {
				dst = append(dst, utf8.RuneError)
				i++
			}
		default:
			dst = append(dst, utf8.RuneError)
			i++
		}
	}
	return dst
}

func isCont(b byte) bool { return b&0xc0 == 0x80 }

// appendCodepoint appends the UTF-8 encoding of r, surrogates included (as
// llama.cpp's unicode_cpt_to_utf8 does; utf8.AppendRune would replace them).
func appendCodepoint(dst []byte, r rune) []byte {
	switch {
	case r < 0x80:
		return append(dst, byte(r))
	case r < 0x800:
		return append(dst, 0xc0|byte(r>>6), 0x80|byte(r)&0x3f)
	case r < 0x10000:
		return append(dst, 0xe0|byte(r>>12), 0x80|byte(r>>6)&0x3f, 0x80|byte(r)&0x3f)
	default:
		return append(dst, 0xf0|byte(r>>18), 0x80|byte(r>>12)&0x3f, 0x80|byte(r>>6)&0x3f, 0x80|byte(r)&0x3f)
	}
}

// byteRunes is GPT-2's byte-to-unicode table: printable bytes map to
// themselves, the others (controls, space, 0x7f-0xa0, 0xad) to U+0100
// upwards in byte order.
var byteRunes = func() (t [256]rune) {
	n := rune(0)
	for b := 0; b < 256; b++ {
		switch {
		case b >= 0x21 && b <= 0x7e, b >= 0xa1 && b <= 0xac, b >= 0xae:
			t[b] = rune(b)
		default:
			t[b] = 256 + n
			n++
		}
	}
	return t
}()

// runeByte inverts byteRunes; ok is false for a rune outside the table.
func runeByte(r rune) (b byte, ok bool) {
	switch {
	case r >= 0x21 && r <= 0x7e, r >= 0xa1 && r <= 0xac, r >= 0xae && r <= 0xff:
		return byte(r), true
	case r >= 256 && r < 256+68:
		return runeBytesHigh[r-256], true
	}
	return 0, false
}

// runeBytesHigh maps U+0100+i back to the i-th non-printable byte.
var runeBytesHigh = func() (t [68]byte) {
	for b := 0; b < 256; b++ {
		if r := byteRunes[b]; r >= 256 {
			t[r-256] = byte(b)
		}
	}
	return t
}()
