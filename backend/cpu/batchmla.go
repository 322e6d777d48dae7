package cpu

import (
	"fmt"
	"math"

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
	c := d.cpu
	c.mu.Lock()
	defer c.mu.Unlock()
	s := d.getScratch()
	defer d.putScratch(s)
	s.qabs = grow(s.qabs, n*H*(kr+dr))
	s.oabs = grow(s.oabs, n*H*kr)
	t := &batchAttnTask{c: c, q: q, kqv: kqv, lats: lats, sels: sels, pos: pos, kb: kb, vb: vb, p: p,
		qcat: s.qabs, ocat: s.oabs, groups: (H + 3) / 4}
	c.pool.do(t, H) // q̃ for every head
	t.phase = 1
	c.pool.do(t, n*t.groups) // attention, per sequence and group of heads
	t.phase = 2
	c.pool.do(t, H) // W_UV for every head
}

// batchAttnTask is AttentionDecodeBatch in three phases (one pool
// operation each):
//
//  0. chunk h: q̃ = W_UK_hᵀ q_nope for the n queries of head h (one
//     product), written with q_pe as row [q̃ ‖ q_pe] of qcat [n, H, kr+dr];
//  1. chunk (i, g): sequence i's attention over its latent for heads
//     4g … 4g+3 together (MLA's latent is one KV head that every query
//     head reads: each latent row is loaded once for four heads), into
//     ocat [n, H, kr];
//  2. chunk h: o = W_UV_h ô for the n queries of head h (one product).
//
// The products are MatMul's, exact or fast, on one worker. On the fast
// path the scores, the online softmax and the weighted sums are those of
// attendOnline, which the single-sequence path runs per head (dot4 and
// axpy4 give each row what dot1 and axpy give it); on the exact path they
// are AttentionDecode's, head by head.
type batchAttnTask struct {
	c          *CPU
	phase      int
	q, kqv     []float32
	lats       [][]float32
	sels       [][]int32
	pos        []int
	kb, vb     backend.Matrix
	p          backend.MLAParams
	qcat, ocat []float32
	groups     int
}

func (a *batchAttnTask) run(wk, chunk int) {
	ws := &a.c.ws[wk]
	p := a.p
	H, dn, dr, dv, kr := p.Heads, p.DNope, p.DRope, p.DV, p.KVRank
	dq, w, n := dn+dr, kr+dr, len(a.lats)
	switch a.phase {
	case 0:
		h := chunk
		ws.qh = grow(ws.qh, n*dn)
		for t := 0; t < n; t++ {
			copy(ws.qh[t*dn:(t+1)*dn], a.q[(t*H+h)*dq:(t*H+h)*dq+dn])
		}
		ws.qabs = grow(ws.qabs, n*kr)
		a.c.matMulSerial(ws, ws.qabs, ws.qh, n, a.kb.Slice(h*kr, kr))
		for t := 0; t < n; t++ {
			row := a.qcat[(t*H+h)*w : (t*H+h+1)*w]
			copy(row, ws.qabs[t*kr:(t+1)*kr])
			copy(row[kr:], a.q[(t*H+h)*dq+dn:(t*H+h+1)*dq])
		}
	case 1:
		t, h0 := chunk/a.groups, chunk%a.groups*4
		keys := selRow(a.sels[t], 0, p.TopK)
		nk := a.pos[t] + 1
		if keys != nil {
			nk = len(keys)
		}
		if !a.c.fast {
			a.attendExact(ws, t, h0, keys, nk)
			return
		}
		h := h0
		if h0+4 <= H {
			if ws.scores4 == nil {
				ws.scores4 = new([keyTile][4]float32)
			}
			attendHeads4(a.ocat[(t*H+h0)*kr:], a.qcat[(t*H+h0)*w:], a.lats[t], kr, dr, keys, nk, p.Tau, ws.scores4)
			h += 4
		}
		ws.scores = grow(ws.scores, keyTile)
		ws.probs = grow(ws.probs, w)
		for ; h < H && h < h0+4; h++ {
			q := a.qcat[(t*H+h)*w : (t*H+h+1)*w]
			attendOnline(a.ocat[(t*H+h)*kr:(t*H+h+1)*kr], q[:kr], q[kr:], a.lats[t], kr, dr, keys, nk, p.Tau, ws.scores, ws.probs)
		}
	case 2:
		h := chunk
		ws.oabs = grow(ws.oabs, n*kr)
		for t := 0; t < n; t++ {
			copy(ws.oabs[t*kr:(t+1)*kr], a.ocat[(t*H+h)*kr:(t*H+h+1)*kr])
		}
		ws.vals = grow(ws.vals, n*dv)
		a.c.matMulSerial(ws, ws.vals, ws.oabs, n, a.vb.Slice(h*dv, dv))
		for t := 0; t < n; t++ {
			copy(a.kqv[(t*H+h)*dv:(t*H+h+1)*dv], ws.vals[t*dv:(t+1)*dv])
		}
	}
}

// attendExact is AttentionDecode's attention for sequence t and heads
// h0 … h0+3 (those below Heads): scores by Dot, softmax, weighted sum by
// Axpy, into ocat.
func (a *batchAttnTask) attendExact(ws *workerScratch, t, h0 int, keys []int32, nk int) {
	p := a.p
	H, kr, w := p.Heads, p.KVRank, p.KVRank+p.DRope
	lat := a.lats[t]
	ws.scores = grow(ws.scores, nk)
	for h := h0; h < H && h < h0+4; h++ {
		q := a.qcat[(t*H+h)*w : (t*H+h+1)*w]
		sc := ws.scores[:nk]
		for i := range sc {
			k := i
			if keys != nil {
				k = int(keys[i])
			}
			row := lat[k*w : (k+1)*w]
			sc[i] = p.Tau * (Dot(q[:kr], row[:kr]) + Dot(q[kr:], row[kr:]))
		}
		attend(a.ocat[(t*H+h)*kr:(t*H+h+1)*kr], sc, keys, a.pos[t]+1, func(k int) []float32 {
			return lat[k*w : k*w+kr]
		})
	}
}

// attendHeads4 is attendOnline for four queries of one sequence over the
// same keys: rows j < 4 of q ([q̃ ‖ q_pe], kr+dr apart) attend over n
// latent rows of lat (rows 0 … n−1, or keys[i] when keys is not nil) and
// write rows j of o (kr apart). Every latent row is read once for the
// four; each query's arithmetic is attendOnline's.
func attendHeads4(o, q, lat []float32, kr, dr int, keys []int32, n int, tau float32, sc *[keyTile][4]float32) {
	w := kr + dr
	clear(o[:4*kr])
	inf := float32(math.Inf(-1))
	m := [4]float32{inf, inf, inf, inf}
	var l [4]float32
	for k0 := 0; k0 < n; k0 += keyTile {
		nk := min(keyTile, n-k0)
		tileMax := [4]float32{inf, inf, inf, inf}
		for i := range nk {
			s := k0 + i
			if keys != nil {
				s = int(keys[s])
			}
			v := &sc[i]
			dot4(v, q, w, lat[s*w:(s+1)*w], w)
			for j := range 4 {
				v[j] *= tau
				tileMax[j] = max(tileMax[j], v[j])
			}
		}
		for j := range 4 {
			if tileMax[j] > m[j] {
				if l[j] > 0 {
					f := expNeg(m[j] - tileMax[j])
					Scale(o[j*kr:(j+1)*kr], f)
					l[j] *= f
				}
				m[j] = tileMax[j]
			}
		}
		// The weights e replace the scores; the tile's weighted sum runs
		// in one pass (axpyKeys4: the same fused multiply-adds per element,
		// key after key, as an axpy4 per key).
		var offs [keyTile]int32 // latent rows hold < 2³¹ values in all
		for i := range nk {
			s := k0 + i
			if keys != nil {
				s = int(keys[s])
			}
			for j := range 4 {
				e := expNeg(sc[i][j] - m[j])
				sc[i][j] = e
				l[j] += e
			}
			offs[i] = int32(s * w)
		}
		axpyKeys4(o, kr, sc[:nk], lat, offs[:nk], kr)
	}
	for j := range 4 {
		Scale(o[j*kr:(j+1)*kr], 1/l[j])
	}
}
