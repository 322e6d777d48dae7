package cpu

import (
	"fmt"

	"github.com/glmrun/glmrun/backend"
)

// scratch holds the buffers of the fused operations, grown on demand.
type scratch struct {
	lat, kb, knope, vals, scores []float32
	qh, qabs, oabs               []float32
	order                        []int32
	probs, sel, groupScore       []float32
	slotOut, in, out, gate, up   []float32
	slots                        []int
	local                        []bool
	rope                         []float32
	rowsF32                      []float32 // a typed cache's values in float32 (exact path, causal prefill)
	lats                         []rows    // attendQueries' arguments
	sels                         [][]int32
	pos                          []int
}

// queries returns attendQueries' per-query slices for n queries, reused
// from call to call.
func (s *scratch) queries(n int) (lats []rows, sels [][]int32, pos []int) {
	if cap(s.lats) < n {
		s.lats, s.sels, s.pos = make([]rows, n), make([][]int32, n), make([]int, n)
	}
	return s.lats[:n], s.sels[:n], s.pos[:n]
}

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// selRow returns query t's selected keys (ascending, −1 padding dropped),
// or nil for every causal key.
func selRow(sel []int32, t, k int) []int32 {
	if sel == nil {
		return nil
	}
	row := sel[t*k : (t+1)*k]
	for i, v := range row {
		if v < 0 {
			return row[:i]
		}
	}
	return row
}

// attend computes softmax(scores) over the keys of one query (scores holds
// one entry per key in keys, or per position [0, n) when keys is nil) and
// accumulates Σ a_s · val(s) into o.
func attend(o, scores []float32, keys []int32, n int, val func(s int) []float32) {
	Softmax(scores)
	clear(o)
	if keys == nil {
		for s := 0; s < n; s++ {
			Axpy(o, scores[s], val(s))
		}
		return
	}
	for i, s := range keys {
		Axpy(o, scores[i], val(int(s)))
	}
}

func checkMLA(op string, q []float32, latValues int, kqv []float32, kb, vb backend.Matrix, sel []int32, T, pos0 int, p backend.MLAParams) {
	dq, w := p.DNope+p.DRope, p.KVRank+p.DRope
	switch {
	case len(q) < T*p.Heads*dq, latValues < (pos0+T)*w, len(kqv) < T*p.Heads*p.DV,
		kb.Rows != p.Heads*p.KVRank || kb.Cols != p.DNope, vb.Rows != p.Heads*p.DV || vb.Cols != p.KVRank,
		sel != nil && len(sel) < T*p.TopK:
		panic(fmt.Sprintf("cpu: %s: bad shapes: q %d, latent %d, kqv %d, k_b %dx%d, v_b %dx%d, sel %d for %d tokens after %d, %+v",
			op, len(q), latValues, len(kqv), kb.Rows, kb.Cols, vb.Rows, vb.Cols, len(sel), T, pos0, p))
	}
}

// AttentionPrefill is docs/MATH.md section 3.2: per head, k_nope and v for
// every cached position, then causal attention over the selected keys.
func (d *Device) AttentionPrefill(kqvB, qB, latB backend.Buffer, kbW, vbW backend.Weight, selB backend.IDs, T, pos0 int, p backend.MLAParams) {
	q, kqv, sel := F32(qB), F32(kqvB), Int32(selB)
	lr := rowsOf(latB, p.KVRank+p.DRope)
	kb, vb := Mat(kbW), Mat(vbW)
	checkMLA("AttentionPrefill", q, lr.values(), kqv, kb, vb, sel, T, pos0, p)
	if d.cpu.fast {
		d.attentionFast(kqv, q, lr, kb, vb, sel, T, pos0, p, true)
		return
	}
	H, dn, dr, dv, kr := p.Heads, p.DNope, p.DRope, p.DV, p.KVRank
	dq, w, nKV := dn+dr, kr+dr, pos0+T
	s := d.getScratch()
	defer d.putScratch(s)
	lat := lr.float32s(&s.rowsF32)

	// Gather the latents c_s as a contiguous [nKV, kr] matrix.
	s.lat = grow(s.lat, nKV*kr)
	for p := 0; p < nKV; p++ {
		copy(s.lat[p*kr:(p+1)*kr], lat[p*w:p*w+kr])
	}
	s.kb = grow(s.kb, kr*dn)
	s.knope = grow(s.knope, nKV*dn)
	s.vals = grow(s.vals, nKV*dv)
	s.scores = grow(s.scores, nKV)
	for h := 0; h < H; h++ {
		// k_nope_s = W_UK_h c_s: W_UK_h is stored transposed (rows of dn
		// per latent index), so accumulate c_s[i]·row_i.
		Dequantize(s.kb, kb.Slice(h*kr, kr))
		clear(s.knope)
		for p := 0; p < nKV; p++ {
			kn := s.knope[p*dn : (p+1)*dn]
			for i, ci := range s.lat[p*kr : (p+1)*kr] {
				Axpy(kn, ci, s.kb[i*dn:(i+1)*dn])
			}
		}
		// v_s = W_UV_h c_s.
		d.cpu.MatMul(s.vals, s.lat, nKV, vb.Slice(h*dv, dv))

		for t := 0; t < T; t++ {
			qt := q[(t*H+h)*dq : (t*H+h+1)*dq]
			keys := selRow(sel, t, p.TopK)
			n := pos0 + t + 1
			sc := s.scores[:n]
			if keys != nil {
				sc = s.scores[:len(keys)]
			}
			for i := range sc {
				k := i
				if keys != nil {
					k = int(keys[i])
				}
				kpe := lat[k*w+kr : (k+1)*w]
				sc[i] = p.Tau * (Dot(qt[:dn], s.knope[k*dn:(k+1)*dn]) + Dot(qt[dn:], kpe))
			}
			attend(kqv[(t*H+h)*dv:(t*H+h+1)*dv], sc, keys, n, func(k int) []float32 {
				return s.vals[k*dv : (k+1)*dv]
			})
		}
	}
}

// AttentionDecode is docs/MATH.md section 3.3: absorb W_UK into the query,
// attend over the latent rows [c ‖ k_pe] as one KV head, expand through
// W_UV.
func (d *Device) AttentionDecode(kqvB, qB, latB backend.Buffer, kbW, vbW backend.Weight, selB backend.IDs, T, pos0 int, p backend.MLAParams) {
	q, kqv, sel := F32(qB), F32(kqvB), Int32(selB)
	lr := rowsOf(latB, p.KVRank+p.DRope)
	kb, vb := Mat(kbW), Mat(vbW)
	checkMLA("AttentionDecode", q, lr.values(), kqv, kb, vb, sel, T, pos0, p)
	if d.cpu.fast {
		d.attentionFast(kqv, q, lr, kb, vb, sel, T, pos0, p, false)
		return
	}
	H, dn, dr, dv, kr := p.Heads, p.DNope, p.DRope, p.DV, p.KVRank
	dq, w := dn+dr, kr+dr
	s := d.getScratch()
	defer d.putScratch(s)
	lat := lr.float32s(&s.rowsF32)
	s.qh = grow(s.qh, T*dn)
	s.qabs = grow(s.qabs, T*kr)
	s.oabs = grow(s.oabs, T*kr)
	s.vals = grow(s.vals, T*dv)
	s.scores = grow(s.scores, pos0+T)
	for h := 0; h < H; h++ {
		// q̃_h = W_UK_hᵀ q_nope_h: attn_k_b rows of dn, so a plain matmul.
		for t := 0; t < T; t++ {
			copy(s.qh[t*dn:(t+1)*dn], q[(t*H+h)*dq:(t*H+h)*dq+dn])
		}
		d.cpu.MatMul(s.qabs, s.qh, T, kb.Slice(h*kr, kr))
		for t := 0; t < T; t++ {
			qabs := s.qabs[t*kr : (t+1)*kr]
			qpe := q[(t*H+h)*dq+dn : (t*H+h+1)*dq]
			keys := selRow(sel, t, p.TopK)
			n := pos0 + t + 1
			sc := s.scores[:n]
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
			attend(s.oabs[t*kr:(t+1)*kr], sc, keys, n, func(k int) []float32 {
				return lat[k*w : k*w+kr]
			})
		}
		// o_h = W_UV_h ô_h.
		d.cpu.MatMul(s.vals, s.oabs, T, vb.Slice(h*dv, dv))
		for t := 0; t < T; t++ {
			copy(kqv[(t*H+h)*dv:(t*H+h+1)*dv], s.vals[t*dv:(t+1)*dv])
		}
	}
}

// IndexerTopK scores every visible key for each query, Σ_h w_h·relu(q_h·k),
// and keeps the TopK best (docs/MATH.md section 6.2): one dot product
// after the other on the exact device, in parallel four heads at a time
// on the fast one (indexTask).
func (d *Device) IndexerTopK(selB backend.IDs, qB, wB, keysB backend.Buffer, T, pos0 int, p backend.IndexerParams) {
	sel, q, wt := Int32(selB), F32(qB), F32(wB)
	Ih, Id, K := p.Heads, p.Dim, p.TopK
	kr := rowsOf(keysB, Id)
	if len(sel) < T*K || len(q) < T*Ih*Id || len(wt) < T*Ih || kr.values() < (pos0+T)*Id {
		panic(fmt.Sprintf("cpu: IndexerTopK: bad shapes: sel %d, q %d, w %d, keys %d for %d tokens after %d, %+v",
			len(sel), len(q), len(wt), kr.values(), T, pos0, p))
	}
	if d.cpu.fast {
		d.indexerFast(sel, q, wt, kr, T, pos0, p)
		return
	}
	s := d.getScratch()
	defer d.putScratch(s)
	keys := kr.float32s(&s.rowsF32)
	s.scores = grow(s.scores, pos0+T)
	for t := 0; t < T; t++ {
		row := sel[t*K : (t+1)*K]
		n := pos0 + t + 1
		if n <= K {
			allKeys(row, n)
			continue
		}
		qt := q[t*Ih*Id : (t+1)*Ih*Id]
		wh := wt[t*Ih : (t+1)*Ih]
		sc := s.scores[:n]
		for k := 0; k < n; k++ {
			key := keys[k*Id : (k+1)*Id]
			var sum float32
			for h := 0; h < Ih; h++ {
				if v := Dot(qt[h*Id:(h+1)*Id], key); v > 0 {
					sum += wh[h] * v
				}
			}
			sc[k] = sum
		}
		topK(row[:0], sc, K, &s.order)
	}
}
