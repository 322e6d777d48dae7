package cpu

import "github.com/glmrun/glmrun/backend"

// indexKeyBlock is the number of keys one chunk of a single query's
// indexer scores covers.
const indexKeyBlock = 512

// indexTask is the fast device's DSA lightning indexer (docs/MATH.md
// section 6.2). A key's score, Σ_h w_h·relu(q_h·k), is computed by
// indexScores whatever the chunking, so a query's selection depends only
// on its own query and keys: a prefill selects what decoding the same
// tokens one by one does. One query (decode) is split over blocks of
// keys and ranked by the caller; several (prefill) take a query per chunk,
// each scored and ranked by its worker, so no T × T score matrix exists.
type indexTask struct {
	c         *CPU
	sel       []int32
	q, w      []float32
	keys      rows
	scores    []float32 // the one query's scores (single-query form)
	T, pos0   int
	p         backend.IndexerParams
	perKeySet bool // single-query form: chunks are key blocks
}

func (a *indexTask) run(wk, chunk int) {
	Ih, Id := a.p.Heads, a.p.Dim
	if a.perKeySet {
		k0 := chunk * indexKeyBlock
		k1 := min(k0+indexKeyBlock, a.pos0+1)
		indexScores(a.scores[k0:k1], a.q[:Ih*Id], a.w[:Ih], a.keys, k0, Ih, Id, &a.c.ws[wk])
		return
	}
	t := chunk
	n := a.pos0 + t + 1
	row := a.sel[t*a.p.TopK : (t+1)*a.p.TopK]
	if n <= a.p.TopK {
		allKeys(row, n)
		return
	}
	ws := &a.c.ws[wk]
	ws.scores = grow(ws.scores, n)
	indexScores(ws.scores, a.q[t*Ih*Id:(t+1)*Ih*Id], a.w[t*Ih:(t+1)*Ih], a.keys, 0, Ih, Id, ws)
	topK(row[:0], ws.scores, a.p.TopK, &ws.order)
}

// allKeys fills a selection row with keys 0 … n−1 followed by −1.
func allKeys(row []int32, n int) {
	for i := range row {
		row[i] = -1
		if i < n {
			row[i] = int32(i)
		}
	}
}

// indexScores writes to sc[i] the indexer score Σ_h w[h]·relu(q_h·key)
// of key k0+i of keys for one query q [heads, dim], summed over the heads
// in order. The dot products are taken four keys and four heads at a
// time (dot4x4), the keys past a multiple of four four heads at a time
// (dot4), and heads past a multiple of four one by one. Keys stored in a
// cache type are converted to float32 four at a time in ws.
func indexScores(sc, q, w []float32, keys rows, k0, heads, dim int, ws *workerScratch) {
	h4 := heads &^ 3
	tmp := grow(ws.probs, 4*dim)
	ws.probs = tmp
	k := 0
	var v16 [16]float32
	var idx, offs [4]int32
	for ; k+4 <= len(sc); k += 4 {
		for j := range idx {
			idx[j] = int32(k0 + k + j)
		}
		base := keys.tile(offs[:], idx[:], tmp)
		var sum [4]float32
		for h := 0; h < h4; h += 4 {
			dot4x4(&v16, q[h*dim:], dim, base, &offs, dim)
			for j, x := range v16 {
				sum[j&3] += w[h+j>>2] * max(x, 0)
			}
		}
		for j := range 4 {
			sc[k+j] = sum[j] + indexTail(q, w, base[offs[j]:int(offs[j])+dim], h4, heads, dim)
		}
	}
	var v [4]float32
	for ; k < len(sc); k++ {
		key := keys.row(k0+k, tmp)
		var sum float32
		for h := 0; h < h4; h += 4 {
			dot4(&v, q[h*dim:], dim, key, dim)
			for j, x := range v {
				sum += w[h+j] * max(x, 0)
			}
		}
		sc[k] = sum + indexTail(q, w, key, h4, heads, dim)
	}
}

// indexTail is the score of key over heads [h0, heads), one dot product
// at a time.
func indexTail(q, w, key []float32, h0, heads, dim int) float32 {
	var sum float32
	for h := h0; h < heads; h++ {
		sum += w[h] * max(dot1(q[h*dim:(h+1)*dim], key, dim), 0)
	}
	return sum
}

// indexerFast runs indexTask: see its comment.
func (d *Device) indexerFast(sel []int32, q, w []float32, keys rows, T, pos0 int, p backend.IndexerParams) {
	c := d.cpu
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &c.it
	*t = indexTask{c: c, sel: sel, q: q, w: w, keys: keys, T: T, pos0: pos0, p: p}
	defer func() { *t = indexTask{} }()
	if T == 1 && pos0+1 > p.TopK {
		s := d.getScratch()
		defer d.putScratch(s)
		n := pos0 + 1
		s.scores = grow(s.scores, n)
		t.scores, t.perKeySet = s.scores, true
		c.pool.do(t, (n+indexKeyBlock-1)/indexKeyBlock)
		topK(sel[:0], s.scores, p.TopK, &s.order)
		return
	}
	c.pool.do(t, T)
}
