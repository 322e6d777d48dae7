package grammar

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// byteVocab is one token per byte value plus an end token (256).
func byteVocab(t *testing.T) *Vocab {
	t.Helper()
	pieces := make([]string, 257)
	for i := range 256 {
		pieces[i] = string([]byte{byte(i)})
	}
	v, err := NewVocab(pieces, []int32{256})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// matchText feeds text byte by byte and reports whether all of it was
// accepted and whether it is then a complete sentence.
func matchText(t *testing.T, g *Grammar, v *Vocab, text string) (fits, complete bool) {
	t.Helper()
	m, err := g.NewMatcher(v)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []byte(text) {
		if err := m.Accept(int32(b)); err != nil {
			return false, false
		}
	}
	return true, m.Accepting()
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`rot ::= "a"`, "no rule named root"},
		{`root ::= a`, `rule "a" is used but not defined`},
		{`root ::= root "a" | "b"`, `rule "root" is left-recursive`},
		{"root ::= a\na ::= b? root\nb ::= \"x\"", `left-recursive`},
		{`root ::= ("a"?)*`, `left-recursive`},
		{`root ::= "a`, "unterminated string literal"},
		{`root ::= [a-`, "unterminated character class"},
		{`root ::= [z-a]`, "is empty"},
		{`root ::= "\q"`, `unknown escape \q`},
		{`root ::= "\x4"`, `bad \x escape`},
		{`root ::= ("a"`, "missing )"},
		{`root ::= "a")`, "unexpected )"},
		{`root ::= "a"{3,1}`, "is empty"},
		{`root ::= "a"{99999}`, "is above"},
		{`root ::= "a"{2`, "missing }"},
		{`root "a"`, "expected ::="},
		{"root ::= \"a\"\nroot ::= \"b\"", "defined twice"},
		{`::= "a"`, "expected a rule name"},
		{`root ::= @`, `unexpected '@'`},
		{`root ::= <[12`, "unterminated token reference"},
		{`root ::= <[x]>`, `bad token id "x"`},
		{`root ::= <[-1]>`, "bad token id"},
		{`root ::= <[9999999999]>`, "bad token id"},
	} {
		_, err := Parse(tc.src)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", tc.src, err, tc.want)
		}
	}
}

func TestMatch(t *testing.T) {
	v := byteVocab(t)
	for _, tc := range []struct {
		src            string
		text           string
		fits, complete bool
	}{
		{`root ::= "abc"`, "abc", true, true},
		{`root ::= "abc"`, "ab", true, false},
		{`root ::= "abc"`, "abd", false, false},
		{`root ::= "a" | "b" "c"`, "bc", true, true},
		{`root ::= [a-c]+`, "abcabc", true, true},
		{`root ::= [a-c]+`, "", true, false},
		{`root ::= [^a-c]*`, "xyz", true, true},
		{`root ::= [^a-c]*`, "xa", false, false},
		{`root ::= "x"{2,3}`, "xx", true, true},
		{`root ::= "x"{2,3}`, "xxxx", false, false},
		{`root ::= "x"{2,}`, "xxxxxxx", true, true},
		{`root ::= "x"{2}`, "x", true, false},
		{`root ::= ("ab" | "cd")* "!"`, "abcdab!", true, true},
		{`root ::= ("ab" | "cd")* "!"`, "abc!", false, false},
		{"# comment\nroot ::= item ( \",\" item )*\nitem ::= [0-9]+ # digits\n", "1,22,333", true, true},
		{`root ::= "é" [α-ω]`, "éβ", true, true},
		{`root ::= "é" [α-ω]`, "éa", false, false},
		{`root ::= .`, "字", true, true},
		{`root ::= "\x41\u00e9\n"`, "Aé\n", true, true},
		{"root ::= a\na ::= \"(\" a? \")\"", "((()))", true, true},
		{"root ::= a\na ::= \"(\" a? \")\"", "(()", true, false},
		{`root ::= "a"?`, "", true, true},
		{`root ::= [\]\-]`, "]", true, true},
	} {
		g, err := Parse(tc.src)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.src, err)
		}
		fits, complete := matchText(t, g, v, tc.text)
		if fits != tc.fits || complete != tc.complete {
			t.Errorf("%q on %q: fits %v complete %v, want %v %v", tc.src, tc.text, fits, complete, tc.fits, tc.complete)
		}
	}
}

func TestMatcherMisuse(t *testing.T) {
	v := byteVocab(t)
	g, err := Parse(`root ::= "ab"`)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := g.NewMatcher(v)
	if err := m.Accept(256); err == nil {
		t.Error("an end token before the text is complete was accepted")
	}
	if err := m.Accept(999); err == nil {
		t.Error("an out-of-range token was accepted")
	}
	if err := m.Accept('b'); err == nil {
		t.Error("a token the grammar does not allow was accepted")
	}
	for _, b := range "ab" {
		if err := m.Accept(int32(b)); err != nil {
			t.Fatal(err)
		}
	}
	if !m.Finished() {
		t.Error("not finished after the whole sentence")
	}
	if err := m.Accept(256); err != nil {
		t.Fatal(err)
	}
	if err := m.Accept('a'); err == nil {
		t.Error("a token after the end was accepted")
	}
	if err := m.Apply(make([]float32, 3)); err == nil {
		t.Error("Apply on a short logit row did not fail")
	}
	if _, err := NewVocab([]string{"a"}, []int32{5}); err == nil {
		t.Error("an out-of-range end token was accepted by NewVocab")
	}
}

// randomVocab makes multi-byte tokens, some splitting UTF-8 characters,
// and a few control tokens (empty pieces).
func randomVocab(t *testing.T, r *rand.Rand, n int) *Vocab {
	t.Helper()
	alphabet := []string{"a", "b", "c", "{", "}", "[", "]", `"`, `\`, ":", ",", " ", "\n", "0", "1", "7", "-", ".", "e",
		"t", "r", "u", "f", "l", "s", "n", "é", "字", "\xe5", "\xad", "\x97", "\xff"}
	pieces := []string{""}
	for len(pieces) < n {
		var b strings.Builder
		for range 1 + r.IntN(5) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		pieces = append(pieces, b.String())
	}
	v, err := NewVocab(pieces, []int32{0})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// bruteAllowed checks every token on its own, as the trie walk must agree.
func bruteAllowed(m *Matcher, id int32) bool {
	if m.v.eog[id] {
		return m.Accepting()
	}
	piece := m.v.pieces[id]
	if piece == "" {
		return false
	}
	st, p := m.st, m.p
	for _, b := range []byte(piece) {
		st, p, _ = m.a.feed(st, p, b)
		if st == m.a.dead {
			return false
		}
	}
	return m.a.completable(st, p)
}

// TestMaskMatchesPerToken walks random generations and compares the trie
// walk's mask with a token-by-token check at every step.
func TestMaskMatchesPerToken(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	v := randomVocab(t, r, 3000)
	for _, src := range []string{JSONGrammar, `root ::= ("é" | "字" | [a-c])* "."`} {
		g, err := Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		for run := range 20 {
			m, err := g.NewMatcher(v)
			if err != nil {
				t.Fatal(err)
			}
			for step := range 60 {
				mask, err := m.Allowed()
				if err != nil {
					t.Fatal(err)
				}
				var allowed []int32
				for id := range int32(v.Size()) {
					got := mask[id/64]&(1<<(id%64)) != 0
					if want := bruteAllowed(m, id); got != want {
						t.Fatalf("run %d step %d: token %d (%q) allowed %v by the mask, %v by itself", run, step, id, v.pieces[id], got, want)
					}
					if got {
						allowed = append(allowed, id)
					}
				}
				if len(allowed) == 0 {
					t.Fatalf("run %d step %d: no token allowed", run, step)
				}
				id := allowed[r.IntN(len(allowed))]
				if err := m.Accept(id); err != nil {
					t.Fatalf("run %d step %d: Accept of an allowed token: %v", run, step, err)
				}
				if m.Finished() {
					break
				}
			}
		}
	}
}

// TestTokenReferences: <[N]> matches token N whatever its text, control
// tokens (no text) included; "." and negated classes never match a token.
func TestTokenReferences(t *testing.T) {
	// 0-2: text, 3 and 4: control tokens without text, 5: end.
	pieces := []string{"a", "b", "ab", "", "", ""}
	v, err := NewVocab(pieces, []int32{5})
	if err != nil {
		t.Fatal(err)
	}
	allowed := func(m *Matcher) []int32 {
		mask, err := m.Allowed()
		if err != nil {
			t.Fatal(err)
		}
		var ids []int32
		for id := range int32(len(pieces)) {
			if mask[id/64]&(1<<(id%64)) != 0 {
				ids = append(ids, id)
			}
		}
		return ids
	}
	for _, tc := range []struct {
		src    string
		tokens []int32
		fits   bool
		next   []int32 // allowed after tokens, when they fit
		done   bool    // Finished after them
	}{
		{`root ::= <[3]> "a"+ <[4]>`, nil, true, []int32{3}, false},
		{`root ::= <[3]> "a"+ <[4]>`, []int32{3}, true, []int32{0}, false},
		{`root ::= <[3]> "a"+ <[4]>`, []int32{3, 0}, true, []int32{0, 4}, false},
		{`root ::= <[3]> "a"+ <[4]>`, []int32{3, 0, 4}, true, []int32{5}, true},
		{`root ::= <[3]> "a"+ <[4]>`, []int32{4}, false, nil, false},
		{`root ::= <[3]> "a"+ <[4]>`, []int32{3, 2}, false, nil, false},
		{`root ::= .* <[4]>`, []int32{0, 1, 2}, true, []int32{0, 1, 2, 4}, false},
		{`root ::= .*`, []int32{3}, false, nil, false},
		{`root ::= [^a]*`, []int32{1, 3}, false, nil, false},
		{`root ::= <[2]> | "b"`, []int32{2}, true, []int32{5}, true}, // a text token by id
	} {
		g, err := Parse(tc.src)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.src, err)
		}
		m, err := g.NewMatcher(v)
		if err != nil {
			t.Fatal(err)
		}
		fits := true
		for _, id := range tc.tokens {
			if err := m.Accept(id); err != nil {
				fits = false
				break
			}
		}
		if fits != tc.fits {
			t.Errorf("%q after %v: fits %v, want %v", tc.src, tc.tokens, fits, tc.fits)
			continue
		}
		if !fits {
			continue
		}
		if got := allowed(m); !slices.Equal(got, tc.next) {
			t.Errorf("%q after %v: allowed %v, want %v", tc.src, tc.tokens, got, tc.next)
		}
		if m.Finished() != tc.done {
			t.Errorf("%q after %v: Finished %v, want %v", tc.src, tc.tokens, m.Finished(), tc.done)
		}
	}
}
