package attention

import (
	"fmt"
	"math"

	"github.com/glmrun/glmrun/backend"
)

// Seq is one sequence of a batched decode step: its cache on the MLA's
// device and the position its new token takes.
type Seq struct {
	Cache *LatentCache
	Pos   int
}

// BatchDecoder is implemented by devices that run the absorbed attention
// of one new token in each of several sequences in one call, so that the
// per-head products with attn_k_b and attn_v_b read those weights once
// for all the sequences. q is [n, Heads, dn+dr] (roped), kqv receives
// [n, Heads·dv]; query i sits at position pos[i] of its own sequence,
// whose cache rows [c ‖ k_pe] for positions [0, pos[i]] are latents[i],
// and sel[i] is nil (every key) or its DSA selection [1, p.TopK]. Row i
// must equal what AttentionDecode gives for that query alone (T = 1).
type BatchDecoder interface {
	AttentionDecodeBatch(kqv, q backend.Buffer, latents []backend.Buffer, kb, vb backend.Weight, sel []backend.IDs, pos []int, p backend.MLAParams)
}

// DecodeBatch is Forward in the Decode form for one new token in each of
// several sequences: x is the attn_norm output [n, E] (row i belongs to
// seqs[i]), out receives this device's share of attn_output [n, E]. The
// projections (q_a, its norm, q_b, kv_a, its norm, the indexer's) and
// attn_output run over all n rows at once, as does the absorbed attention
// on devices that implement BatchDecoder; only the attention over each
// sequence's cache is per sequence. Each sequence's new row goes to its
// cache. Every row is computed with the operations Forward uses for T = 1,
// so the results equal n separate Forward calls.
//
// s.KQV holds the [n, Heads·dv] attention output afterwards; s.Sel is nil
// (the selections are per sequence). Errors are allocation failures and
// positions beyond a cache (wrapping ErrContextFull and naming the
// sequence, before anything is issued); device faults surface from Sync.
func (a *MLA) DecodeBatch(out, x backend.Buffer, seqs []Seq, s *Scratch) error {
	c, w, dev := a.Cfg, a.W, a.Dev
	n := len(seqs)
	if n == 0 {
		return nil
	}
	H, dn, dr, dv, kr := w.Heads, c.DNope, c.DRope, c.DV, c.KVRank
	dq, wd := dn+dr, kr+dr
	for i, sq := range seqs {
		if err := sq.Cache.room(a.Layer, sq.Pos+1); err != nil {
			return fmt.Errorf("attention: sequence %d: %w", i, err)
		}
	}
	var g bufs

	// Query for all rows: q = W_UQR · RMSNorm(W_DQ x), roped per sequence.
	q := g.get(&s.q, n*H*dq)
	var cq backend.Buffer
	if c.QRank > 0 {
		qa := g.get(&s.qa, n*c.QRank)
		cq = g.get(&s.cq, n*c.QRank)
		if g.err != nil {
			return g.err
		}
		dev.MatMul(qa, x, n, w.QA)
		dev.RMSNorm(cq, qa, n, c.QRank, w.QANorm, c.RMSEps)
		dev.MatMul(q, cq, n, w.QB)
	} else if g.err == nil {
		dev.MatMul(q, x, n, w.Q)
	}
	kva := g.get(&s.kva, n*wd)
	if g.err != nil {
		return g.err
	}
	for i, sq := range seqs {
		dev.Rope(q, 1, H, dq, i*H*dq+dn, sq.Pos, c.Rope)
	}

	// KV latents for all rows, normalized and roped as Forward does, then
	// each into its sequence's cache row.
	dev.MatMul(kva, x, n, w.KVA)
	dev.RMSNorm(kva, kva, n, wd, w.KVANorm, c.RMSEps)
	for i, sq := range seqs {
		row := kva.Slice(i*wd, wd)
		dev.Rope(row, 1, 1, wd, kr, sq.Pos, c.Rope)
		dev.Copy(sq.Cache.latentRows(a.Layer, sq.Pos, 1), row)
	}

	// DSA selections, per sequence (nil where it sees every key); a
	// shared layer keeps those of the full layer before it.
	s.Sel = nil
	if !a.SharedIndexer || len(s.sels) != n {
		s.sels = make([]backend.IDs, n)
	}
	sels := s.sels
	if w.Indexer != nil {
		if err := a.indexBatch(sels, x, cq, seqs, s); err != nil {
			return err
		}
	}

	kqv := g.get(&s.kqv, n*H*dv)
	if g.err != nil {
		return g.err
	}
	s.KQV = kqv
	lats := make([]backend.Buffer, n)
	pos := make([]int, n)
	for i, sq := range seqs {
		lats[i] = sq.Cache.Latent(a.Layer, sq.Pos+1)
		pos[i] = sq.Pos
	}
	p := backend.MLAParams{Heads: H, DNope: dn, DRope: dr, DV: dv, KVRank: kr, Tau: c.Tau, TopK: c.IndexTopK}
	if bd, ok := dev.(BatchDecoder); ok {
		bd.AttentionDecodeBatch(kqv, q, lats, w.KB, w.VB, sels, pos, p)
	} else {
		for i := range seqs {
			dev.AttentionDecode(kqv.Slice(i*H*dv, H*dv), q.Slice(i*H*dq, H*dq), lats[i], w.KB, w.VB, sels[i], 1, pos[i], p)
		}
	}
	dev.MatMul(out, kqv, n, w.Out)
	return nil
}

// indexBatch is index for one new token in each sequence: the indexer
// keys of all rows in one product, each normalized and roped into its
// sequence's cache; then, for the sequences that see more than IndexTopK
// keys, their selections into sels (the query and weight products again
// over all rows).
func (a *MLA) indexBatch(sels []backend.IDs, x, cq backend.Buffer, seqs []Seq, s *Scratch) error {
	c, dev := a.Cfg, a.Dev
	iw := a.W.Indexer
	Ih, Id, K := c.IndexHeads, c.IndexDim, c.IndexTopK
	n := len(seqs)
	var g bufs

	ik := g.get(&s.ik, n*Id)
	if g.err != nil {
		return g.err
	}
	dev.MatMul(ik, x, n, iw.K)
	sparse := false
	dev.LayerNorm(ik, ik, n, Id, iw.KNormW, iw.KNormB, c.IndexEps)
	for i, sq := range seqs {
		row := ik.Slice(i*Id, Id)
		dev.Rope(row, 1, 1, Id, 0, sq.Pos, c.IndexRope)
		dev.Copy(sq.Cache.indexRows(a.Layer, sq.Pos, 1), row)
		sparse = sparse || sq.Pos+1 > K
	}
	if !sparse {
		return nil // every query sees at most top_k keys: dense
	}

	iq := g.get(&s.iq, n*Ih*Id)
	wt := g.get(&s.iw, n*Ih)
	if g.err != nil {
		return g.err
	}
	sel, err := s.sel.Get(n * K)
	if err != nil {
		return fmt.Errorf("attention: %w", err)
	}
	dev.MatMul(iq, cq, n, iw.QB)
	dev.MatMul(wt, x, n, iw.Proj)
	dev.Scale(wt, 1/float32(math.Sqrt(float64(Id*Ih))))
	for i, sq := range seqs {
		if sq.Pos+1 <= K {
			continue
		}
		dev.Rope(iq, 1, Ih, Id, i*Ih*Id, sq.Pos, c.IndexRope)
		sels[i] = sel.Slice(i*K, K)
		keys := sq.Cache.IndexKeys(a.Layer, sq.Pos+1)
		dev.IndexerTopK(sels[i], iq.Slice(i*Ih*Id, Ih*Id), wt.Slice(i*Ih, Ih), keys, 1, sq.Pos, backend.IndexerParams{Heads: Ih, Dim: Id, TopK: K})
	}
	return nil
}
