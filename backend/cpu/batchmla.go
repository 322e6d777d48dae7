package cpu

import (
	"fmt"

	"github.com/glmrun/glmrun/backend"
)

// AttentionDecodeBatch is AttentionDecode for one query in each of n
// sequences (the continuous-batching decode step): q [n, Heads, dn+dr],
// query i at position pos[i] of the sequence whose latent rows
// [pos[i]+1, kr+dr] are latents[i] and whose selection sel[i] is nil or
// [1, TopK]; kqv receives [n, Heads·dv]. Per head, the absorbed products
// with attn_k_b and attn_v_b run over the n queries at once (each weight
// slice read once per step), and only the attention over each latent is
// per sequence. Row i equals AttentionDecode of query i alone: both
// products give every row what they give it alone.
func (d *Device) AttentionDecodeBatch(kqvB, qB backend.Buffer, latents []backend.Buffer, kbW, vbW backend.Weight, sel []backend.IDs, pos []int, p backend.MLAParams) {
	n := len(latents)
	q, kqv := F32(qB), F32(kqvB)
	kb, vb := Mat(kbW), Mat(vbW)
	if len(sel) != n || len(pos) != n {
		panic(fmt.Sprintf("cpu: AttentionDecodeBatch: %d latents, %d selections, %d positions", n, len(sel), len(pos)))
	}
	H, dn, dr, dv, kr := p.Heads, p.DNope, p.DRope, p.DV, p.KVRank
	dq := dn + dr
	lats := make([][]float32, n)
	sels := make([][]int32, n)
	for i := range n {
		lats[i], sels[i] = F32(latents[i]), Int32(sel[i])
		checkMLA("AttentionDecodeBatch", q[i*H*dq:], lats[i], kqv[i*H*dv:], kb, vb, sels[i], 1, pos[i], p)
	}
	if n == 0 {
		return
	}
	if d.cpu.fast {
		c := d.cpu
		c.mu.Lock()
		defer c.mu.Unlock()
		c.pool.do(&batchAttnTask{c: c, q: q, kqv: kqv, lats: lats, sels: sels, pos: pos, kb: kb, vb: vb, p: p}, H)
		return
	}

	// Exact path: AttentionDecode's loop with the queries of all
	// sequences as its T rows, each over its own latent.
	w := kr + dr
	s := d.getScratch()
	defer d.putScratch(s)
	s.qh = grow(s.qh, n*dn)
	s.qabs = grow(s.qabs, n*kr)
	s.oabs = grow(s.oabs, n*kr)
	s.vals = grow(s.vals, n*dv)
	maxKV := 0
	for _, ps := range pos {
		maxKV = max(maxKV, ps+1)
	}
	s.scores = grow(s.scores, maxKV)
	for h := 0; h < H; h++ {
		for t := 0; t < n; t++ {
			copy(s.qh[t*dn:(t+1)*dn], q[(t*H+h)*dq:(t*H+h)*dq+dn])
		}
		d.cpu.MatMul(s.qabs, s.qh, n, kb.Slice(h*kr, kr))
		for t := 0; t < n; t++ {
			lat := lats[t]
			qabs := s.qabs[t*kr : (t+1)*kr]
			qpe := q[(t*H+h)*dq+dn : (t*H+h+1)*dq]
			keys := selRow(sels[t], 0, p.TopK)
			nk := pos[t] + 1
			sc := s.scores[:nk]
			if keys != nil {
				sc = s.scores[:len(keys)]
			}
			for i := range sc {
				k := i
				if keys != nil {
					k = int(keys[i])
				}
				row := lat[k*w : (k+1)*w]
				sc[i] = p.Tau * (Dot(qabs, row[:kr]) + Dot(qpe, row[kr:]))
			}
			attend(s.oabs[t*kr:(t+1)*kr], sc, keys, nk, func(k int) []float32 {
				return lat[k*w : k*w+kr]
			})
		}
		d.cpu.MatMul(s.vals, s.oabs, n, vb.Slice(h*dv, dv))
		for t := 0; t < n; t++ {
			copy(kqv[(t*H+h)*dv:(t*H+h+1)*dv], s.vals[t*dv:(t+1)*dv])
		}
	}
}

// batchAttnTask is attnTask for one query in each of several sequences:
// chunk h is head h, its two products over all the queries, the
// attention of each over its own latent (attendOnline, as attnTask runs
// a single query).
type batchAttnTask struct {
	c      *CPU
	q, kqv []float32
	lats   [][]float32
	sels   [][]int32
	pos    []int
	kb, vb backend.Matrix
	p      backend.MLAParams
}

func (a *batchAttnTask) run(wk, h int) {
	ws := &a.c.ws[wk]
	p := a.p
	H, dn, dr, dv, kr := p.Heads, p.DNope, p.DRope, p.DV, p.KVRank
	dq, n := dn+dr, len(a.lats)
	ws.qh = grow(ws.qh, n*dn)
	for t := 0; t < n; t++ {
		copy(ws.qh[t*dn:(t+1)*dn], a.q[(t*H+h)*dq:(t*H+h)*dq+dn])
	}
	ws.qabs = grow(ws.qabs, n*kr)
	a.c.matMulSerial(ws, ws.qabs, ws.qh, n, a.kb.Slice(h*kr, kr))
	ws.oabs = grow(ws.oabs, n*kr)
	ws.scores = grow(ws.scores, keyTile)
	ws.probs = grow(ws.probs, kr+dr)
	for t := 0; t < n; t++ {
		keys := selRow(a.sels[t], 0, p.TopK)
		nk := a.pos[t] + 1
		if keys != nil {
			nk = len(keys)
		}
		qpe := a.q[(t*H+h)*dq+dn : (t*H+h+1)*dq]
		attendOnline(ws.oabs[t*kr:(t+1)*kr], ws.qabs[t*kr:(t+1)*kr], qpe, a.lats[t], kr, dr, keys, nk, p.Tau, ws.scores, ws.probs)
	}
	ws.vals = grow(ws.vals, n*dv)
	a.c.matMulSerial(ws, ws.vals, ws.oabs, n, a.vb.Slice(h*dv, dv))
	for t := 0; t < n; t++ {
		copy(a.kqv[(t*H+h)*dv:(t*H+h+1)*dv], ws.vals[t*dv:(t+1)*dv])
	}
}
