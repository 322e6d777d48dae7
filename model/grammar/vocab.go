package grammar

import (
	"bytes"
	"fmt"
	"slices"
)

// Vocab is a model's vocabulary as the matcher sees it: each token's bytes
// and which tokens end a generation. It is immutable and shared by the
// matchers of every request.
type Vocab struct {
	n      int
	pieces []string
	eog    []bool
	eogIDs []int32
	trie   trie
}

// trie is a byte trie of the token pieces in flat arrays: node n's edges
// are edges[edgeOff[n]:edgeOff[n+1]] and the tokens that end there
// toks[tokOff[n]:tokOff[n+1]]. Node 0 is the root.
type trie struct {
	edgeOff []int32
	edges   []trieEdge
	tokOff  []int32
	toks    []int32
}

type trieEdge struct {
	b    byte
	node int32
}

// NewVocab indexes a vocabulary: pieces[id] is the text token id stands
// for (empty for a control token, which grammar-constrained text never
// contains), eog the end-of-generation tokens, allowed once the text is
// complete.
func NewVocab(pieces []string, eog []int32) (*Vocab, error) {
	v := &Vocab{n: len(pieces), pieces: pieces, eog: make([]bool, len(pieces))}
	for _, id := range eog {
		if id < 0 || int(id) >= len(pieces) {
			return nil, fmt.Errorf("grammar: end-of-generation token %d out of range [0, %d)", id, len(pieces))
		}
		if !v.eog[id] {
			v.eog[id] = true
			v.eogIDs = append(v.eogIDs, id)
		}
	}
	var ids []int32
	for id, p := range pieces {
		if p != "" && !v.eog[id] {
			ids = append(ids, int32(id))
		}
	}
	slices.SortFunc(ids, func(a, b int32) int { return bytes.Compare([]byte(pieces[a]), []byte(pieces[b])) })
	t := &v.trie
	// Nodes are numbered in the order build visits them; a node's edges
	// and tokens are appended when it is visited, so the offsets of node
	// n+1 close node n's lists.
	type work struct {
		lo, hi, depth int
	}
	var build func(w work)
	build = func(w work) {
		t.edgeOff = append(t.edgeOff, int32(len(t.edges)))
		t.tokOff = append(t.tokOff, int32(len(t.toks)))
		lo := w.lo
		for lo < w.hi && len(pieces[ids[lo]]) == w.depth {
			t.toks = append(t.toks, ids[lo])
			lo++
		}
		// The children: one per distinct byte at depth.
		type child struct {
			b      byte
			lo, hi int
		}
		var kids []child
		for i := lo; i < w.hi; {
			b := pieces[ids[i]][w.depth]
			j := i
			for j < w.hi && pieces[ids[j]][w.depth] == b {
				j++
			}
			kids = append(kids, child{b, i, j})
			i = j
		}
		first := len(t.edges)
		for _, k := range kids {
			t.edges = append(t.edges, trieEdge{b: k.b})
		}
		// Reserve this node's edges before its children add theirs.
		_ = first
		for i, k := range kids {
			t.edges[first+i].node = int32(len(t.edgeOff))
			build(work{k.lo, k.hi, w.depth + 1})
		}
	}
	build(work{0, len(ids), 0})
	t.edgeOff = append(t.edgeOff, int32(len(t.edges)))
	t.tokOff = append(t.tokOff, int32(len(t.toks)))
	return v, nil
}

// Size returns the number of tokens.
func (v *Vocab) Size() int { return v.n }
