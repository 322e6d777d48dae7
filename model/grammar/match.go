package grammar

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
)

// stack is one parse stack: the element to match next (pos, never an
// elemEnd) and below it what follows once that element's rule is done.
// Stacks are interned, so equal stacks are the same pointer.
type stack struct {
	pos  int32
	next *stack
	id   uint32
}

// state is an interned set of stacks: where the parse may be after the
// text so far. accepting says the text is a complete sentence.
type state struct {
	stacks    []*stack // sorted by id
	accepting bool
	id        uint32
	step      map[rune]*state // memoized transitions; dead for no stack
}

type stackKey struct {
	pos  int32
	next *stack
}

// automaton holds the interned stacks and states of one grammar for one
// matcher.
type automaton struct {
	g      *Grammar
	stacks map[stackKey]*stack
	states map[string]*state
	dead   *state
	// scratch for closure
	seen map[stackKey]bool
	buf  []*stack
	key  []byte
}

// maxStates bounds the interned states of one matcher: an ambiguous
// grammar can otherwise grow them without limit.
const maxStates = 1 << 20

var errTooManyStates = errors.New("grammar: the grammar is too ambiguous (over a million parser states)")

func newAutomaton(g *Grammar) *automaton {
	a := &automaton{g: g, stacks: map[stackKey]*stack{}, states: map[string]*state{}, seen: map[stackKey]bool{}}
	a.dead = &state{step: map[rune]*state{}}
	return a
}

func (a *automaton) intern(pos int32, next *stack) *stack {
	k := stackKey{pos, next}
	if s, ok := a.stacks[k]; ok {
		return s
	}
	s := &stack{pos: pos, next: next, id: uint32(len(a.stacks))}
	a.stacks[k] = s
	return s
}

// closure adds to a.buf every stack whose top is a character element,
// reached from "match pos, then next" by expanding rule references and
// popping finished alternatives; it reports whether the text may end here.
func (a *automaton) closure(pos int32, next *stack) (accepting bool) {
	k := stackKey{pos, next}
	if a.seen[k] {
		return false
	}
	a.seen[k] = true
	e := &a.g.elems[pos]
	switch e.kind {
	case elemEnd:
		if next == nil {
			return true
		}
		return a.closure(next.pos, next.next)
	case elemRule:
		// A reference that ends its alternative continues with next
		// directly: right recursion (x*) then keeps the stacks from
		// growing, and states repeat.
		cont := next
		if a.g.elems[pos+1].kind != elemEnd {
			cont = a.intern(pos+1, next)
		}
		acc := false
		for _, start := range a.g.alts[e.rule] {
			if a.closure(start, cont) {
				acc = true
			}
		}
		return acc
	default:
		a.buf = append(a.buf, a.intern(pos, next))
		return false
	}
}

// makeState interns the set in a.buf.
func (a *automaton) makeState(accepting bool) (*state, error) {
	slices.SortFunc(a.buf, func(x, y *stack) int { return int(x.id) - int(y.id) })
	a.buf = slices.Compact(a.buf)
	if len(a.buf) == 0 && !accepting {
		return a.dead, nil
	}
	a.key = a.key[:0]
	if accepting {
		a.key = append(a.key, 1)
	} else {
		a.key = append(a.key, 0)
	}
	for _, s := range a.buf {
		a.key = binary.LittleEndian.AppendUint32(a.key, s.id)
	}
	if st, ok := a.states[string(a.key)]; ok {
		return st, nil
	}
	if len(a.states) >= maxStates || len(a.stacks) >= 4*maxStates {
		return nil, errTooManyStates
	}
	st := &state{stacks: slices.Clone(a.buf), accepting: accepting, id: uint32(len(a.states)), step: map[rune]*state{}}
	a.states[string(a.key)] = st
	return st, nil
}

func (a *automaton) reset() {
	clear(a.seen)
	a.buf = a.buf[:0]
}

func (a *automaton) start() (*state, error) {
	a.reset()
	acc := false
	for _, s := range a.g.alts[a.g.root] {
		if a.closure(s, nil) {
			acc = true
		}
	}
	return a.makeState(acc)
}

// advance is st after the code point c: dead when no stack takes it.
func (a *automaton) advance(st *state, c rune) (*state, error) {
	if n, ok := st.step[c]; ok {
		return n, nil
	}
	a.reset()
	acc := false
	for _, s := range st.stacks {
		if a.g.elems[s.pos].matches(c) {
			if a.closure(s.pos+1, s.next) {
				acc = true
			}
		}
	}
	n, err := a.makeState(acc)
	if err != nil {
		return nil, err
	}
	st.step[c] = n
	return n, nil
}

// pending is an incomplete UTF-8 sequence: the bits so far and how many
// continuation bytes are still to come.
type pending struct {
	cp   rune
	need uint8
	have uint8 // bytes seen, lead included
}

// feed moves (st, p) past byte b.
func (a *automaton) feed(st *state, p pending, b byte) (*state, pending, error) {
	if p.need == 0 {
		switch {
		case b < 0x80:
			n, err := a.advance(st, rune(b))
			return n, pending{}, err
		case b&0xE0 == 0xC0 && b >= 0xC2:
			return st, pending{cp: rune(b & 0x1F), need: 1, have: 1}, nil
		case b&0xF0 == 0xE0:
			return st, pending{cp: rune(b & 0x0F), need: 2, have: 1}, nil
		case b&0xF8 == 0xF0 && b <= 0xF4:
			return st, pending{cp: rune(b & 0x07), need: 3, have: 1}, nil
		}
		return a.dead, pending{}, nil
	}
	if b&0xC0 != 0x80 {
		return a.dead, pending{}, nil
	}
	p.cp = p.cp<<6 | rune(b&0x3F)
	p.need--
	p.have++
	if p.need > 0 {
		return st, p, nil
	}
	c := p.cp
	if c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF) || (p.have == 3 && c < 0x800) || (p.have == 4 && c < 0x10000) {
		return a.dead, pending{}, nil
	}
	n, err := a.advance(st, c)
	return n, pending{}, err
}

// completable reports whether some code point that starts with p's bytes
// could be matched from st.
func (a *automaton) completable(st *state, p pending) bool {
	if p.need == 0 {
		return st != a.dead
	}
	lo := p.cp << (6 * p.need)
	hi := lo | (1<<(6*p.need) - 1)
	// Only the code points a sequence of this length may encode: no
	// overlong forms, nothing past U+10FFFF, no surrogates.
	switch p.have + p.need {
	case 2:
		lo, hi = max(lo, 0x80), min(hi, 0x7FF)
	case 3:
		lo, hi = max(lo, 0x800), min(hi, 0xFFFF)
		if lo >= 0xD800 && hi <= 0xDFFF {
			return false
		}
	case 4:
		lo, hi = max(lo, 0x10000), min(hi, 0x10FFFF)
	}
	if lo > hi {
		return false
	}
	for _, s := range st.stacks {
		if a.g.elems[s.pos].overlaps(lo, hi) {
			return true
		}
	}
	return false
}

// Matcher follows one generation through a grammar: which tokens may come
// next, and where the text stands after each accepted token. It is not
// safe for concurrent use.
type Matcher struct {
	a     *automaton
	v     *Vocab
	st    *state
	p     pending
	ended bool
	masks map[maskKey][]uint64
}

type maskKey struct {
	st *state
	p  pending
}

// maxMasks bounds the cached masks of one matcher.
const maxMasks = 512

// NewMatcher starts a generation at the beginning of g's root rule, over
// vocabulary v.
func (g *Grammar) NewMatcher(v *Vocab) (*Matcher, error) {
	a := newAutomaton(g)
	st, err := a.start()
	if err != nil {
		return nil, err
	}
	return &Matcher{a: a, v: v, st: st, masks: map[maskKey][]uint64{}}, nil
}

// Accepting reports whether the text so far is a complete sentence (an
// end-of-generation token is allowed).
func (m *Matcher) Accepting() bool { return m.st.accepting && m.p.need == 0 }

// Finished reports whether nothing but the end may follow: the text is
// complete and no character can extend it, or an end token was accepted.
func (m *Matcher) Finished() bool {
	return m.ended || (m.Accepting() && len(m.st.stacks) == 0)
}

// Accept moves past token id. A token the grammar does not allow is an
// error and leaves the matcher where it was.
func (m *Matcher) Accept(id int32) error {
	if m.ended {
		return fmt.Errorf("grammar: token %d after the end of the text", id)
	}
	if id < 0 || int(id) >= m.v.n {
		return fmt.Errorf("grammar: token id %d out of range [0, %d)", id, m.v.n)
	}
	if m.p.need == 0 && m.a.g.tokens {
		// A token reference (<[id]>) in the grammar takes the token
		// whatever its text.
		st, err := m.a.advance(m.st, tokenBase+id)
		if err != nil {
			return err
		}
		if st != m.a.dead {
			m.st = st
			return nil
		}
	}
	if m.v.eog[id] {
		if !m.Accepting() {
			return fmt.Errorf("grammar: end-of-generation token %d before the text is complete", id)
		}
		m.ended = true
		return nil
	}
	piece := m.v.pieces[id]
	if len(piece) == 0 {
		return fmt.Errorf("grammar: token %d has no text the grammar could match", id)
	}
	st, p := m.st, m.p
	for _, b := range []byte(piece) {
		var err error
		if st, p, err = m.a.feed(st, p, b); err != nil {
			return err
		}
		if st == m.a.dead {
			return fmt.Errorf("grammar: token %d (%q) does not fit the grammar here", id, piece)
		}
	}
	if !m.a.completable(st, p) {
		return fmt.Errorf("grammar: token %d (%q) does not fit the grammar here", id, piece)
	}
	m.st, m.p = st, p
	return nil
}

// Allowed returns the set of tokens that may come next as a bit set (bit
// id%64 of word id/64). The slice is the matcher's; it stays valid until
// the next call.
func (m *Matcher) Allowed() ([]uint64, error) {
	if m.ended {
		return make([]uint64, (m.v.n+63)/64), nil
	}
	k := maskKey{m.st, m.p}
	if mask, ok := m.masks[k]; ok {
		return mask, nil
	}
	mask := make([]uint64, (m.v.n+63)/64)
	if err := m.walk(0, m.st, m.p, mask); err != nil {
		return nil, err
	}
	if m.p.need == 0 && m.a.g.tokens {
		m.markTokens(mask)
	}
	if m.Accepting() {
		for _, id := range m.v.eogIDs {
			mask[id/64] |= 1 << (id % 64)
		}
	}
	if len(m.masks) >= maxMasks {
		clear(m.masks)
	}
	m.masks[k] = mask
	return mask, nil
}

// markTokens marks the tokens the grammar names by id (<[N]>) at the
// current state.
func (m *Matcher) markTokens(mask []uint64) {
	for _, s := range m.st.stacks {
		e := &m.a.g.elems[s.pos]
		if e.neg {
			continue
		}
		for _, r := range e.ranges {
			if r.hi < tokenBase {
				continue
			}
			for id := int(max(r.lo, tokenBase) - tokenBase); id <= int(r.hi-tokenBase) && id < m.v.n; id++ {
				mask[id/64] |= 1 << (id % 64)
			}
		}
	}
}

// walk marks the tokens under trie node n that can be matched from (st, p).
func (m *Matcher) walk(n int32, st *state, p pending, mask []uint64) error {
	t := &m.v.trie
	if n != 0 {
		if !m.a.completable(st, p) {
			return nil // no token below can fit either
		}
		for _, id := range t.toks[t.tokOff[n]:t.tokOff[n+1]] {
			mask[id/64] |= 1 << (id % 64)
		}
	}
	for _, e := range t.edges[t.edgeOff[n]:t.edgeOff[n+1]] {
		nst, np, err := m.a.feed(st, p, e.b)
		if err != nil {
			return err
		}
		if nst == m.a.dead {
			continue
		}
		if err := m.walk(e.node, nst, np, mask); err != nil {
			return err
		}
	}
	return nil
}

// Apply sets the logits of the tokens that may not come next to -Inf.
func (m *Matcher) Apply(logits []float32) error {
	if len(logits) < m.v.n {
		return fmt.Errorf("grammar: %d logits for a vocabulary of %d", len(logits), m.v.n)
	}
	mask, err := m.Allowed()
	if err != nil {
		return err
	}
	ninf := float32(math.Inf(-1))
	for i := range logits {
		if i >= m.v.n || mask[i/64]&(1<<(i%64)) == 0 {
			logits[i] = ninf
		}
	}
	return nil
}
