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
	H, dq, dv := p.Heads, p.DNope+p.DRope, p.DV
	s := d.getScratch()
	defer d.putScratch(s)
	lats, sels, _ := s.queries(n)
	for i := range n {
		lats[i], sels[i] = rowsOf(latents[i], p.KVRank+p.DRope), Int32(sel[i])
		checkMLA("AttentionDecodeBatch", q[i*H*dq:], lats[i].values(), kqv[i*H*dv:], kb, vb, sels[i], 1, pos[i], p)
	}
	d.attendQueries(kqv, q, lats, sels, pos, kb, vb, p)
	clear(lats) // the scratch outlives the caches: keep no reference to them
	clear(sels)
}

// attendQueryBlock is the most queries one batchAttnTask takes: its
// scratch holds q̃ and ô of every query and head (4·H·(2kr+dr) bytes a
// query, 288 KB at GLM-5's shapes), which a prompt's 512 queries would
// make 150 MB.
const attendQueryBlock = 64

// attendQueries runs batchAttnTask for n = len(lats) queries, at most
// attendQueryBlock at a time: query i at position pos[i] over latent rows
// lats[i] with selection sels[i] (nil: every row), q [n, Heads, dn+dr],
// kqv [n, Heads·dv].
func (d *Device) attendQueries(kqv, q []float32, lats []rows, sels [][]int32, pos []int, kb, vb backend.Matrix, p backend.MLAParams) {
	H, dq, dv := p.Heads, p.DNope+p.DRope, p.DV
	for i0 := 0; i0 < len(lats); i0 += attendQueryBlock {
		i1 := min(i0+attendQueryBlock, len(lats))
		d.attendQueryRange(kqv[i0*H*dv:i1*H*dv], q[i0*H*dq:i1*H*dq], lats[i0:i1], sels[i0:i1], pos[i0:i1], kb, vb, p)
	}
}

// attendQueryRange is attendQueries for one block of queries.
func (d *Device) attendQueryRange(kqv, q []float32, lats []rows, sels [][]int32, pos []int, kb, vb backend.Matrix, p backend.MLAParams) {
	n := len(lats)
	if n == 0 {
		return
	}
	H, dr, kr := p.Heads, p.DRope, p.KVRank
	c := d.cpu
	c.mu.Lock()
	defer c.mu.Unlock()
	s := d.getScratch()
	defer d.putScratch(s)
	s.qabs = grow(s.qabs, n*H*(kr+dr))
	s.oabs = grow(s.oabs, n*H*kr)
	t := &c.bat
	*t = batchAttnTask{c: c, q: q, kqv: kqv, lats: lats, sels: sels, pos: pos, kb: kb, vb: vb, p: p,
		qcat: s.qabs, ocat: s.oabs}
	defer func() { *t = batchAttnTask{} }()
	// Head groups as large as keep every worker busy: a group reads each
	// latent row once for all of its heads.
	t.groupHeads = min(H, max(4, (n*H/c.workers)&^3))
	t.groups = (H + t.groupHeads - 1) / t.groupHeads
	c.pool.do(t, H) // q̃ for every head
	t.phase = 1
	c.pool.do(t, n*t.groups) // attention, per query and group of heads
	t.phase = 2
	c.pool.do(t, H) // W_UV for every head
}

// batchAttnTask is AttentionDecodeBatch in three phases (one pool
// operation each):
//
//  0. chunk h: q̃ = W_UK_hᵀ q_nope for the n queries of head h (one
//     product), written with q_pe as row [q̃ ‖ q_pe] of qcat [n, H, kr+dr];
//  1. chunk (i, g): sequence i's attention over its latent for the
//     groupHeads heads of group g together (MLA's latent is one KV head
//     that every query head reads: attendHeads loads each latent row once
//     for all of them), into ocat [n, H, kr];
//  2. chunk h: o = W_UV_h ô for the n queries of head h (one product).
//
// The products are MatMul's, exact or fast, on one worker. On the fast
// path the scores, the online softmax and the weighted sums are those of
// attendOnline (dot4 and axpy4 give each row what dot1 and axpy give it;
// without batch invariance dot4x4 may round the scores differently), the
// same for a head whatever the grouping; on the exact path they are
// AttentionDecode's, head by head.
type batchAttnTask struct {
	c          *CPU
	phase      int
	q, kqv     []float32
	lats       []rows
	sels       [][]int32
	pos        []int
	kb, vb     backend.Matrix
	p          backend.MLAParams
	qcat, ocat []float32
	groupHeads int // heads per phase-1 chunk, a multiple of four (or all)
	groups     int // phase-1 chunks per query
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
		t, h0 := chunk/a.groups, chunk%a.groups*a.groupHeads
		h1 := min(h0+a.groupHeads, H)
		keys := selRow(a.sels[t], 0, p.TopK)
		nk := a.pos[t] + 1
		if keys != nil {
			nk = len(keys)
		}
		if !a.c.fast {
			a.attendExact(ws, t, h0, h1, keys, nk)
			return
		}
		h := h0
		if n4 := (h1 - h0) &^ 3; n4 > 0 {
			if ws.scores4 == nil {
				ws.scores4 = new([keyTile][4]float32)
			}
			ws.ml = grow(ws.ml, 2*n4)
			attendHeads(a.ocat[(t*H+h0)*kr:], a.qcat[(t*H+h0)*w:], a.lats[t], kr, dr, keys, nk, n4, p.Tau, ws.scores4, ws.ml, ws.tileRows(a.lats[t]), a.c.invariant)
			h += n4
		}
		ws.scores = grow(ws.scores, keyTile)
		ws.probs = grow(ws.probs, w)
		for ; h < h1; h++ {
			q := a.qcat[(t*H+h)*w : (t*H+h+1)*w]
			attendOnline(a.ocat[(t*H+h)*kr:(t*H+h+1)*kr], q[:kr], q[kr:], a.lats[t], kr, dr, keys, nk, p.Tau, ws.scores, ws.probs, ws.tileRows(a.lats[t]))
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
// [h0, h1): scores by Dot, softmax, weighted sum by Axpy, into ocat.
func (a *batchAttnTask) attendExact(ws *workerScratch, t, h0, h1 int, keys []int32, nk int) {
	p := a.p
	H, kr, w := p.Heads, p.KVRank, p.KVRank+p.DRope
	lat := a.lats[t]
	lat = rows{f32: lat.float32s(&ws.tile), w: w} // the float32 reference: every row converted first
	ws.scores = grow(ws.scores, nk)
	for h := h0; h < h1; h++ {
		q := a.qcat[(t*H+h)*w : (t*H+h+1)*w]
		sc := ws.scores[:nk]
		for i := range sc {
			k := i
			if keys != nil {
				k = int(keys[i])
			}
			row := lat.f32[k*w : (k+1)*w]
			sc[i] = p.Tau * (Dot(q[:kr], row[:kr]) + Dot(q[kr:], row[kr:]))
		}
		attend(a.ocat[(t*H+h)*kr:(t*H+h+1)*kr], sc, keys, a.pos[t]+1, func(k int) []float32 {
			return lat.f32[k*w : k*w+kr]
		})
	}
}

// attendHeads is attendOnline for nh queries (a multiple of four) of one
// sequence over the same keys: rows j < nh of q ([q̃ ‖ q_pe], kr+dr
// apart) attend over n latent rows of lat (rows 0 … n−1, or keys[i] when
// keys is not nil) and write rows j of o (kr apart). The keys are taken a
// tile at a time and every group of four queries goes over the tile
// before the next is loaded, so each latent row comes from memory once
// for all nh queries (the gathered rows of a 64-key tile stay in the
// caches, converted to float32 once into tile when they are stored in a
// cache type). ml holds the running maxima and sums (2·nh values). With
// invariant set each query's arithmetic is attendOnline's; otherwise the
// scores of four keys at a time come from dot4x4, which may round
// differently.
func attendHeads(o, q []float32, lat rows, kr, dr int, keys []int32, n, nh int, tau float32, sc *[keyTile][4]float32, ml, tile []float32, invariant bool) {
	w := kr + dr
	clear(o[:nh*kr])
	inf := float32(math.Inf(-1))
	m, l := ml[:nh], ml[nh:2*nh]
	for j := range m {
		m[j], l[j] = inf, 0
	}
	var idx, offs [keyTile]int32 // latent rows hold < 2³¹ values in all
	for k0 := 0; k0 < n; k0 += keyTile {
		nk := min(keyTile, n-k0)
		for i := range nk {
			idx[i] = int32(k0 + i)
			if keys != nil {
				idx[i] = keys[k0+i]
			}
		}
		base := lat.tile(offs[:nk], idx[:nk], tile)
		for g := 0; g < nh; g += 4 {
			qg, og := q[g*w:], o[g*kr:]
			i := 0
			if !invariant {
				var v16 [16]float32
				for ; i+4 <= nk; i += 4 {
					dot4x4(&v16, qg, w, base, (*[4]int32)(offs[i:i+4]), w)
					for j, v := range v16 {
						sc[i+j&3][j>>2] = v
					}
				}
			}
			for ; i < nk; i++ {
				dot4(&sc[i], qg, w, base[offs[i]:int(offs[i])+w], w)
			}
			var tileMax [4]float32
			for j := range 4 {
				tileMax[j] = inf
			}
			for i := range nk {
				v := &sc[i]
				for j := range 4 {
					v[j] *= tau
					tileMax[j] = max(tileMax[j], v[j])
				}
			}
			mg, lg := m[g:g+4], l[g:g+4]
			raiseMax4(og, kr, kr, mg, lg, tileMax[:])
			// The weights e replace the scores; the tile's weighted sum runs
			// in one pass (axpyKeys4: the same fused multiply-adds per
			// element, key after key, as an axpy4 per key).
			expTile4(sc[:nk], (*[4]float32)(mg), (*[4]float32)(lg))
			axpyKeys4(og, kr, sc[:nk], base, offs[:nk], kr)
		}
	}
	for j := range nh {
		Scale(o[j*kr:(j+1)*kr], 1/l[j])
	}
}
