package grammar

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// elemKind says what one element of an alternative matches.
type elemKind uint8

const (
	elemEnd   elemKind = iota // the end of an alternative
	elemChars                 // one code point in (or, negated, outside) ranges
	elemRule                  // a sentence of another rule
)

// cpRange is an inclusive range of code points.
type cpRange struct{ lo, hi rune }

type elem struct {
	kind   elemKind
	neg    bool
	rule   int32
	ranges []cpRange
}

// tokenBase is the code point that stands for token 0 in a grammar: a
// token reference <[N]> is the one-point range tokenBase+N. Text never
// decodes beyond U+10FFFF, so only the token itself matches it, and
// negated classes and "." never do.
const tokenBase rune = utf8.MaxRune + 1

// maxTokenID bounds the ids of token references, keeping tokenBase+N an
// int32.
const maxTokenID = 1 << 30

func (e *elem) matches(c rune) bool {
	if c >= tokenBase && e.neg {
		return false
	}
	in := false
	for _, r := range e.ranges {
		if c >= r.lo && c <= r.hi {
			in = true
			break
		}
	}
	return in != e.neg
}

// overlaps reports whether some code point in [lo, hi] matches e.
func (e *elem) overlaps(lo, hi rune) bool {
	if !e.neg {
		for _, r := range e.ranges {
			if r.lo <= hi && r.hi >= lo {
				return true
			}
		}
		return false
	}
	// Negated: some point of [lo, hi] lies outside every range.
	c := lo
	for c <= hi {
		moved := false
		for _, r := range e.ranges {
			if c >= r.lo && c <= r.hi {
				c = r.hi + 1
				moved = true
			}
		}
		if !moved {
			return true
		}
	}
	return false
}

// Grammar is a compiled GBNF grammar. It is immutable and may be shared;
// each generation follows it with its own Matcher.
type Grammar struct {
	elems []elem
	alts  [][]int32 // per rule: where each alternative starts in elems
	names []string
	root  int32
	// tokens says the grammar has token references (<[N]>): only then
	// does a matcher look for them.
	tokens bool
}

// Rules returns the number of rules, those the text defines and those the
// compiler made for groups and repetitions.
func (g *Grammar) Rules() int { return len(g.alts) }

// maxRepeat bounds x{m,n}: a larger count is a mistake or an attempt to
// make the compiled grammar huge.
const maxRepeat = 10000

// Parse compiles GBNF text: rules "name ::= expression", where an
// expression is alternatives (|) of sequences of string literals ("..."),
// character classes ([a-z0-9_], [^"\\]), . (any character), rule names,
// groups in parentheses and the repetitions *, +, ?, {m}, {m,}, {m,n};
// # starts a comment. Escapes in literals and classes: \n \r \t \\ \" \[
// \] \- \xHH \uHHHH \UHHHHHHHH. The rule named root is the start. An
// undefined or left-recursive rule is an error.
func Parse(src string) (*Grammar, error) {
	p := &parser{src: src, ids: map[string]int32{}}
	if err := p.parse(); err != nil {
		return nil, err
	}
	g := p.g
	root, ok := p.ids["root"]
	if !ok || !p.defined[root] {
		return nil, fmt.Errorf("grammar: no rule named root")
	}
	g.root = root
	for id, name := range g.names {
		if !p.defined[int32(id)] {
			return nil, fmt.Errorf("grammar: rule %q is used but not defined", name)
		}
	}
	if err := g.checkLeftRecursion(); err != nil {
		return nil, err
	}
	return g, nil
}

type parser struct {
	src     string
	pos     int
	g       *Grammar
	ids     map[string]int32
	defined map[int32]bool
}

func (p *parser) errorf(format string, args ...any) error {
	line := 1 + strings.Count(p.src[:p.pos], "\n")
	col := p.pos - strings.LastIndexByte(p.src[:p.pos], '\n')
	return fmt.Errorf("grammar: line %d, column %d: %s", line, col, fmt.Sprintf(format, args...))
}

func (p *parser) parse() error {
	p.g = &Grammar{}
	p.defined = map[int32]bool{}
	for {
		p.skipSpace()
		if p.pos >= len(p.src) {
			return nil
		}
		name := p.name()
		if name == "" {
			return p.errorf("expected a rule name")
		}
		p.skipSpace()
		if !strings.HasPrefix(p.src[p.pos:], "::=") {
			return p.errorf("expected ::= after %q", name)
		}
		p.pos += 3
		id := p.ruleID(name)
		if p.defined[id] {
			return p.errorf("rule %q is defined twice", name)
		}
		p.defined[id] = true
		alts, err := p.alternatives(0)
		if err != nil {
			return err
		}
		p.setRule(id, alts)
	}
}

func (p *parser) ruleID(name string) int32 {
	if id, ok := p.ids[name]; ok {
		return id
	}
	id := int32(len(p.g.names))
	p.ids[name] = id
	p.g.names = append(p.g.names, name)
	p.g.alts = append(p.g.alts, nil)
	return id
}

// newRule makes an unnamed rule for a group or a repetition.
func (p *parser) newRule(alts [][]elem) int32 {
	id := int32(len(p.g.names))
	p.g.names = append(p.g.names, fmt.Sprintf("_%d", id))
	p.g.alts = append(p.g.alts, nil)
	p.defined[id] = true
	p.setRule(id, alts)
	return id
}

func (p *parser) setRule(id int32, alts [][]elem) {
	starts := make([]int32, len(alts))
	for i, a := range alts {
		starts[i] = int32(len(p.g.elems))
		p.g.elems = append(p.g.elems, a...)
		p.g.elems = append(p.g.elems, elem{kind: elemEnd})
	}
	p.g.alts[id] = starts
}

func (p *parser) skipSpace() {
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			p.pos++
		case c == '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' {
				p.pos++
			}
		default:
			return
		}
	}
}

func isNameByte(c byte) bool {
	return c == '-' || c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func (p *parser) name() string {
	s := p.pos
	for p.pos < len(p.src) && isNameByte(p.src[p.pos]) {
		p.pos++
	}
	return p.src[s:p.pos]
}

// ruleStartsHere reports whether the text at pos is "name ::=", the start
// of the next rule, which ends the current one.
func (p *parser) ruleStartsHere() bool {
	i := p.pos
	for i < len(p.src) && isNameByte(p.src[i]) {
		i++
	}
	if i == p.pos {
		return false
	}
	for i < len(p.src) && (p.src[i] == ' ' || p.src[i] == '\t' || p.src[i] == '\n' || p.src[i] == '\r') {
		i++
	}
	return strings.HasPrefix(p.src[i:], "::=")
}

// alternatives parses a | b | c up to the end of the rule (depth 0) or
// the closing parenthesis of a group.
func (p *parser) alternatives(depth int) ([][]elem, error) {
	var alts [][]elem
	for {
		seq, err := p.sequence(depth)
		if err != nil {
			return nil, err
		}
		alts = append(alts, seq)
		p.skipSpace()
		if p.pos < len(p.src) && p.src[p.pos] == '|' {
			p.pos++
			continue
		}
		return alts, nil
	}
}

func (p *parser) sequence(depth int) ([]elem, error) {
	var seq []elem
	for {
		p.skipSpace()
		if p.pos >= len(p.src) {
			if depth > 0 {
				return nil, p.errorf("missing )")
			}
			return seq, nil
		}
		c := p.src[p.pos]
		if c == '|' || c == ')' {
			if c == ')' && depth == 0 {
				return nil, p.errorf("unexpected )")
			}
			return seq, nil
		}
		if depth == 0 && p.ruleStartsHere() {
			return seq, nil
		}
		item, err := p.item(depth)
		if err != nil {
			return nil, err
		}
		item, err = p.repetition(item)
		if err != nil {
			return nil, err
		}
		seq = append(seq, item...)
	}
}

// item parses one literal, class, rule name or group: a fragment of one
// or more elements.
func (p *parser) item(depth int) ([]elem, error) {
	c := p.src[p.pos]
	switch {
	case c == '"':
		p.pos++
		var out []elem
		for {
			if p.pos >= len(p.src) {
				return nil, p.errorf("unterminated string literal")
			}
			if p.src[p.pos] == '"' {
				p.pos++
				return out, nil
			}
			r, err := p.char()
			if err != nil {
				return nil, err
			}
			out = append(out, elem{kind: elemChars, ranges: []cpRange{{r, r}}})
		}
	case c == '[':
		p.pos++
		e := elem{kind: elemChars}
		if p.pos < len(p.src) && p.src[p.pos] == '^' {
			e.neg = true
			p.pos++
		}
		for {
			if p.pos >= len(p.src) {
				return nil, p.errorf("unterminated character class")
			}
			if p.src[p.pos] == ']' {
				p.pos++
				break
			}
			lo, err := p.char()
			if err != nil {
				return nil, err
			}
			hi := lo
			if p.pos+1 < len(p.src) && p.src[p.pos] == '-' && p.src[p.pos+1] != ']' {
				p.pos++
				if hi, err = p.char(); err != nil {
					return nil, err
				}
				if hi < lo {
					return nil, p.errorf("character range %q-%q is empty", lo, hi)
				}
			}
			e.ranges = append(e.ranges, cpRange{lo, hi})
		}
		return []elem{e}, nil
	case c == '.':
		p.pos++
		return []elem{{kind: elemChars, neg: true}}, nil
	case c == '<' && p.pos+1 < len(p.src) && p.src[p.pos+1] == '[':
		// <[N]>: the token with id N, whatever its text (a control token
		// has none), as llama.cpp's GBNF writes it.
		end := strings.Index(p.src[p.pos:], "]>")
		if end < 0 {
			return nil, p.errorf("unterminated token reference")
		}
		digits := p.src[p.pos+2 : p.pos+end]
		id, err := strconv.ParseUint(digits, 10, 32)
		if err != nil || id >= maxTokenID {
			return nil, p.errorf("bad token id %q in <[...]>", digits)
		}
		p.pos += end + 2
		p.g.tokens = true
		t := tokenBase + rune(id)
		return []elem{{kind: elemChars, ranges: []cpRange{{t, t}}}}, nil
	case c == '(':
		p.pos++
		alts, err := p.alternatives(depth + 1)
		if err != nil {
			return nil, err
		}
		if p.pos >= len(p.src) || p.src[p.pos] != ')' {
			return nil, p.errorf("missing )")
		}
		p.pos++
		return []elem{{kind: elemRule, rule: p.newRule(alts)}}, nil
	case isNameByte(c):
		name := p.name()
		return []elem{{kind: elemRule, rule: p.ruleID(name)}}, nil
	}
	return nil, p.errorf("unexpected %q", c)
}

// char reads one possibly escaped code point of a literal or class.
func (p *parser) char() (rune, error) {
	if p.src[p.pos] != '\\' {
		r, n := utf8.DecodeRuneInString(p.src[p.pos:])
		if r == utf8.RuneError && n <= 1 {
			return 0, p.errorf("invalid UTF-8")
		}
		p.pos += n
		return r, nil
	}
	if p.pos+1 >= len(p.src) {
		return 0, p.errorf("dangling \\")
	}
	c := p.src[p.pos+1]
	p.pos += 2
	hex := 0
	switch c {
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case '\\', '"', '[', ']', '-', '/', '^', '.':
		return rune(c), nil
	case 'x':
		hex = 2
	case 'u':
		hex = 4
	case 'U':
		hex = 8
	default:
		return 0, p.errorf("unknown escape \\%c", c)
	}
	if p.pos+hex > len(p.src) {
		return 0, p.errorf("short \\%c escape", c)
	}
	v, err := strconv.ParseUint(p.src[p.pos:p.pos+hex], 16, 32)
	if err != nil || v > utf8.MaxRune {
		return 0, p.errorf("bad \\%c escape %q", c, p.src[p.pos:p.pos+hex])
	}
	p.pos += hex
	return rune(v), nil
}

// repetition applies a following *, +, ?, or {m,n} to item.
func (p *parser) repetition(item []elem) ([]elem, error) {
	if p.pos >= len(p.src) {
		return item, nil
	}
	min, max := -1, -1 // max -1: unbounded
	switch p.src[p.pos] {
	case '*':
		p.pos++
		min = 0
	case '+':
		p.pos++
		min = 1
	case '?':
		p.pos++
		min, max = 0, 1
	case '{':
		p.pos++
		var err error
		if min, err = p.count(); err != nil {
			return nil, err
		}
		max = min
		if p.pos < len(p.src) && p.src[p.pos] == ',' {
			p.pos++
			max = -1
			if p.pos < len(p.src) && p.src[p.pos] != '}' {
				if max, err = p.count(); err != nil {
					return nil, err
				}
				if max < min {
					return nil, p.errorf("repetition {%d,%d} is empty", min, max)
				}
			}
		}
		if p.pos >= len(p.src) || p.src[p.pos] != '}' {
			return nil, p.errorf("missing } in a repetition")
		}
		p.pos++
	default:
		return item, nil
	}
	// The repeated unit as one element.
	unit := item[0]
	if len(item) > 1 {
		unit = elem{kind: elemRule, rule: p.newRule([][]elem{item})}
	}
	var out []elem
	for range min {
		out = append(out, unit)
	}
	switch {
	case max < 0:
		// star ::= unit star | ε
		id := p.newRule(nil)
		p.setRule(id, [][]elem{{unit, {kind: elemRule, rule: id}}, {}})
		out = append(out, elem{kind: elemRule, rule: id})
	case max > min:
		// opt_k ::= unit opt_{k-1} | ε, nested max-min deep.
		var inner int32 = -1
		for range max - min {
			alt := []elem{unit}
			if inner >= 0 {
				alt = append(alt, elem{kind: elemRule, rule: inner})
			}
			inner = p.newRule([][]elem{alt, {}})
		}
		out = append(out, elem{kind: elemRule, rule: inner})
	}
	return out, nil
}

func (p *parser) count() (int, error) {
	p.skipSpace()
	s := p.pos
	for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' {
		p.pos++
	}
	n, err := strconv.Atoi(p.src[s:p.pos])
	if err != nil {
		return 0, p.errorf("expected a repetition count")
	}
	if n > maxRepeat {
		return 0, p.errorf("repetition count %d is above %d", n, maxRepeat)
	}
	p.skipSpace()
	return n, nil
}

// checkLeftRecursion rejects a rule that can reach itself without
// consuming a character: the matcher would expand it forever.
func (g *Grammar) checkLeftRecursion() error {
	n := len(g.alts)
	nullable := make([]bool, n)
	for changed := true; changed; {
		changed = false
		for r := range n {
			if nullable[r] {
				continue
			}
			for _, a := range g.alts[r] {
				ok := true
				for i := a; g.elems[i].kind != elemEnd; i++ {
					e := &g.elems[i]
					if e.kind == elemChars || !nullable[e.rule] {
						ok = false
						break
					}
				}
				if ok {
					nullable[r] = true
					changed = true
					break
				}
			}
		}
	}
	// left[r]: the rules r can start with.
	left := make([][]int32, n)
	for r := range n {
		for _, a := range g.alts[r] {
			for i := a; g.elems[i].kind == elemRule; i++ {
				left[r] = append(left[r], g.elems[i].rule)
				if !nullable[g.elems[i].rule] {
					break
				}
			}
		}
	}
	const (
		white = iota
		grey
		black
	)
	color := make([]uint8, n)
	var visit func(r int32) error
	visit = func(r int32) error {
		color[r] = grey
		for _, s := range left[r] {
			switch color[s] {
			case grey:
				return fmt.Errorf("grammar: rule %q is left-recursive", g.display(s))
			case white:
				if err := visit(s); err != nil {
					return err
				}
			}
		}
		color[r] = black
		return nil
	}
	for r := range n {
		if color[r] == white {
			if err := visit(int32(r)); err != nil {
				return err
			}
		}
	}
	return nil
}

// display names a rule for an error: a generated rule by the rule whose
// text made it is not tracked, so its generated name is shown.
func (g *Grammar) display(r int32) string { return g.names[r] }
