package tokenizer

import (
	"slices"
	"strings"
	"sync"
)

// workspace holds the scratch buffers of one Encode call.
type workspace struct {
	cps   []rune
	cls   []class
	ends  []int32
	tmp   []int32
	word  []byte
	enc   []byte
	syms  []symbol
	queue bigramQueue
	frags []fragment
	next  []fragment
	pairs [1 << 16 / 64]uint64 // byte pairs present in the text being partitioned
}

// Encode returns the token ids of text. With addSpecial, BOS and EOS are
// added as the vocabulary asks (AddBOS, AddEOS). With parseSpecial, the
// text of control tokens ("<|user|>", "[gMASK]", ...) becomes those tokens;
// without it, such text is tokenized as plain text. Invalid UTF-8 bytes
// are tokenized as U+FFFD, as llama.cpp does.
func (t *Tokenizer) Encode(text string, addSpecial, parseSpecial bool) []int32 {
	ws := t.scratch.Get().(*workspace)
	defer t.scratch.Put(ws)

	var out []int32
	if addSpecial && t.addBOS {
		out = append(out, t.bos)
	}
	for _, f := range t.partition(ws, text, parseSpecial) {
		if f.id != None {
			out = append(out, f.id)
			continue
		}
		out = t.encodeText(ws, f.text, out)
	}
	if addSpecial && t.addEOS {
		out = append(out, t.eos)
	}
	return out
}

// fragment is a piece of the input: raw text, or a special token (id != None).
type fragment struct {
	text string
	id   int32
}

// partition cuts special tokens out of text like llama.cpp's
// tokenizer_st_partition: for each special token, longest first, every
// occurrence in the remaining raw text becomes a token fragment.
func (t *Tokenizer) partition(ws *workspace, text string, parseSpecial bool) []fragment {
	frags := ws.frags[:0]
	if text != "" {
		frags = append(frags, fragment{text: text, id: None})
	}
	next := ws.next[:0]
	// A special token can only occur if its first two bytes do: mark the
	// byte pairs of text once instead of searching for every token.
	for i := 0; i+1 < len(text); i++ {
		k := uint16(text[i])<<8 | uint16(text[i+1])
		ws.pairs[k/64] |= 1 << (k % 64)
	}
	defer func() { // clear exactly the bits set
		for i := 0; i+1 < len(text); i++ {
			ws.pairs[(uint16(text[i])<<8|uint16(text[i+1]))/64] = 0
		}
	}()
	for _, id := range t.special {
		if !parseSpecial && t.types[id] != TypeUserDefined {
			continue // control and unknown tokens only when parsing specials
		}
		tok := t.tokens[id]
		if len(tok) >= 2 {
			if k := uint16(tok[0])<<8 | uint16(tok[1]); ws.pairs[k/64]&(1<<(k%64)) == 0 {
				continue
			}
		}
		if !strings.Contains(text, tok) {
			continue
		}
		next = next[:0]
		for _, f := range frags {
			if f.id != None {
				next = append(next, f)
				continue
			}
			s := f.text
			for {
				i := strings.Index(s, tok)
				if i < 0 {
					break
				}
				if i > 0 {
					next = append(next, fragment{text: s[:i], id: None})
				}
				next = append(next, fragment{id: id})
				s = s[i+len(tok):]
			}
			if s != "" {
				next = append(next, fragment{text: s, id: None})
			}
		}
		frags, next = next, frags
	}
	ws.frags, ws.next = frags, next
	return frags
}

// encodeText pre-tokenizes raw text into words and appends their BPE ids.
func (t *Tokenizer) encodeText(ws *workspace, text string, out []int32) []int32 {
	ws.cps = decodeCodepoints(ws.cps[:0], text)
	cps := ws.cps
	if cap(ws.cls) < len(cps) {
		ws.cls = make([]class, len(cps), 2*len(cps))
	}
	cls := ws.cls[:len(cps)]
	for i, r := range cps {
		cls[i] = classify(r)
	}
	var words []int32
	words, ws.tmp = t.pre.split(cps, cls, ws.ends, ws.tmp)
	ws.ends = words
	lo := 0
	for _, e := range words {
		w := ws.word[:0]
		for _, r := range cps[lo:e] {
			w = appendCodepoint(w, r)
		}
		ws.word = w
		out = t.encodeWord(ws, w, out)
		lo = int(e)
	}
	return out
}

// symbol is one BPE symbol of a word being merged.
type symbol struct {
	id         int32
	prev, next int32 // neighbours, -1 at the ends
	dead       bool  // merged into its left neighbour
}

// bigram is a candidate merge of symbols left and right (then holding ids
// lid and rid) into id, at rank.
type bigram struct {
	rank, left, right int32
	lid, rid, id      int32
}

// bigramQueue is a binary min-heap by (rank, left).
type bigramQueue []bigram

func (q bigramQueue) less(i, j int) bool {
	return q[i].rank < q[j].rank || q[i].rank == q[j].rank && q[i].left < q[j].left
}

func (q *bigramQueue) push(b bigram) {
	*q = append(*q, b)
	h := *q
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (q *bigramQueue) pop() bigram {
	h := *q
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*q = h
	return top
}

// wordCache remembers the tokens of recent words: natural text repeats
// words, and a lookup is much cheaper than merging. It is cleared when it
// reaches maxCachedWords entries.
type wordCache struct {
	mu sync.RWMutex
	m  map[string][]int32
}

const (
	maxCachedWords   = 1 << 16
	maxCachedWordLen = 64
)

// encodeWord appends the BPE tokens of one word (raw bytes).
func (t *Tokenizer) encodeWord(ws *workspace, word []byte, out []int32) []int32 {
	if len(word) == 0 {
		return out
	}
	if len(word) > maxCachedWordLen {
		return t.mergeWord(ws, word, out)
	}
	c := &t.cache
	c.mu.RLock()
	ids, ok := c.m[string(word)]
	c.mu.RUnlock()
	if ok {
		return append(out, ids...)
	}
	n := len(out)
	out = t.mergeWord(ws, word, out)
	ids = slices.Clone(out[n:])
	c.mu.Lock()
	if len(c.m) >= maxCachedWords || c.m == nil {
		c.m = make(map[string][]int32)
	}
	c.m[string(word)] = ids
	c.mu.Unlock()
	return out
}

// mergeWord appends the BPE tokens of one word (raw bytes), merging.
func (t *Tokenizer) mergeWord(ws *workspace, word []byte, out []int32) []int32 {
	if t.ignoreMerges {
		enc := ws.enc[:0]
		for _, b := range word {
			enc = appendCodepoint(enc, byteRunes[b])
		}
		ws.enc = enc
		if id, ok := t.ids[string(enc)]; ok {
			return append(out, id)
		}
	}
	syms := ws.syms[:0]
	for i, b := range word {
		syms = append(syms, symbol{id: t.byteSym[b], prev: int32(i - 1), next: int32(i + 1)})
	}
	syms[len(syms)-1].next = -1
	q := ws.queue[:0]
	try := func(l, r int32) {
		if l < 0 || r < 0 {
			return
		}
		lid, rid := syms[l].id, syms[r].id
		if m, ok := t.merges[pairKey(lid, rid)]; ok {
			q.push(bigram{rank: m.rank, left: l, right: r, lid: lid, rid: rid, id: m.id})
		}
	}
	for i := 1; i < len(syms); i++ {
		try(int32(i-1), int32(i))
	}
	for len(q) > 0 {
		b := q.pop()
		l, r := &syms[b.left], &syms[b.right]
		if l.dead || r.dead || l.id != b.lid || r.id != b.rid || l.next != b.right {
			continue // stale
		}
		l.id = b.id
		r.dead = true
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = b.left
		}
		try(l.prev, b.left)
		try(b.left, l.next)
	}
	ws.syms, ws.queue = syms, q
	for i := int32(0); i >= 0; i = syms[i].next {
		id := syms[i].id
		if int(id) < len(t.tokens) {
			out = append(out, id)
			continue
		}
		// Not a token: llama.cpp falls back to the tokens of the single
		// bytes of the symbol's text, skipping those that do not exist.
		s := t.symbolText(id)
		for j := 0; j < len(s); j++ {
			if id, ok := t.ids[s[j:j+1]]; ok {
				out = append(out, id)
			}
		}
	}
	return out
}
