package attention

import (
	"fmt"
	"math"

	"github.com/glmrun/glmrun/backend"
	"github.com/glmrun/glmrun/backend/cpu"
)

// Config holds the sizes and constants of one MLA layer (GLM5-MATH
// section 3). Shapes below are written outermost first.
type Config struct {
	Embd   int // E
	Heads  int // H
	QRank  int // q_lora_rank; 0 when the query comes straight from attn_q
	KVRank int // kv_lora_rank (kr)
	DNope  int // dn
	DRope  int // dr
	DV     int // dv

	RMSEps float32  // q_a / kv_a RMSNorm epsilon
	Tau    float32  // softmax scale mscale²/sqrt(dn+dr)
	Rope   cpu.Rope // q_pe / k_pe rope (NORM, maybe YaRN)

	// DSA indexer (layers with IndexerWeights only).
	IndexHeads int      // Ih
	IndexDim   int      // Id
	IndexTopK  int      // keys kept per query
	IndexEps   float32  // k_norm LayerNorm epsilon (0 in llama.cpp glm-dsa)
	IndexRope  cpu.Rope // rope of the first DRope indexer dims (NORM)
}

// Weights are one layer's attention weights, each a [out, in] matrix.
type Weights struct {
	Q       backend.Matrix // [H(dn+dr), E] when QRank == 0
	QA      backend.Matrix // [QRank, E]
	QANorm  []float32      // [QRank]
	QB      backend.Matrix // [H(dn+dr), QRank], per head [nope ‖ rope]
	KVA     backend.Matrix // [kr+dr, E], [latent ‖ rope]
	KVANorm []float32      // [kr]
	KB      backend.Matrix // [H·kr, dn]: rows h·kr+c hold W_UK_h[:, c] (attn_k_b)
	VB      backend.Matrix // [H·dv, kr]: rows h·dv+j hold W_UV_h[j, :] (attn_v_b)
	Out     backend.Matrix // [E, H·dv]
	Indexer *IndexerWeights
}

// IndexerWeights are the DSA lightning indexer's weights (GLM5-MATH
// section 6).
type IndexerWeights struct {
	QB     backend.Matrix // [Ih·Id, QRank], per head [rope ‖ nope]
	K      backend.Matrix // [Id, E]
	KNormW []float32      // [Id]
	KNormB []float32      // [Id]
	Proj   backend.Matrix // [Ih, E]
}

// MLA is one layer's attention.
type MLA struct {
	Cfg   *Config
	W     *Weights
	Layer int // index into the LatentCache
	CPU   *cpu.CPU
}

// Form selects how MLA.Forward computes attention.
type Form int

const (
	// Prefill decompresses per-head keys and values (vLLM forward_mha).
	Prefill Form = iota
	// Decode absorbs W_UK into the query and attends over the latent
	// (vLLM forward_mqa).
	Decode
)

// Scratch holds the buffers of MLA.Forward, grown on demand and reused
// between layers and calls. After Forward it also holds the results that
// hooks may want: KQV and Selected.
type Scratch struct {
	qa, cq, q, kva []float32
	ropeTab        []float32 // [T, dr]
	idxRopeTab     []float32 // [T, dr]
	qh, qabs, oabs []float32
	knope, vals    []float32
	lat            []float32 // [nKV, kr] gathered latents
	kb             []float32 // [kr, dn] one head of W_UK
	scores         []float32
	iq, ik, iw     []float32
	iscore         []float32
	order          []int32

	// KQV is the attention output before attn_output, [T, H·dv].
	KQV []float32
	// Selected[t] lists the key positions query t attended to, ascending,
	// when the DSA indexer restricted it; nil means every causal key.
	Selected [][]int32
}

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// Forward computes attention for T new tokens at positions pos0 … pos0+T−1
// of one sequence: x is the attn_norm output [T, E]; out receives the
// attn_output projection [T, E]. It writes the new tokens' latents (and
// indexer keys) to the cache and attends causally over positions
// [0, pos0+T). Both forms give the same result up to rounding.
func (a *MLA) Forward(out, x []float32, T, pos0 int, cache *LatentCache, s *Scratch, form Form) {
	c := a.Cfg
	H, dn, dr, dv, kr := c.Heads, c.DNope, c.DRope, c.DV, c.KVRank
	dq := dn + dr
	nKV := pos0 + T

	// Rope tables for the new positions.
	s.ropeTab = grow(s.ropeTab, T*dr)
	for t := 0; t < T; t++ {
		c.Rope.Table(s.ropeTab[t*dr:(t+1)*dr], pos0+t)
	}

	// Query: q = W_UQR · RMSNorm(W_DQ x), per head [q_nope ‖ q_pe].
	s.q = grow(s.q, T*H*dq)
	if c.QRank > 0 {
		s.qa = grow(s.qa, T*c.QRank)
		s.cq = grow(s.cq, T*c.QRank)
		a.CPU.MatMul(s.qa, x, T, a.W.QA)
		for t := 0; t < T; t++ {
			cpu.RMSNorm(s.cq[t*c.QRank:(t+1)*c.QRank], s.qa[t*c.QRank:(t+1)*c.QRank], a.W.QANorm, c.RMSEps)
		}
		a.CPU.MatMul(s.q, s.cq, T, a.W.QB)
	} else {
		a.CPU.MatMul(s.q, x, T, a.W.Q)
	}
	for t := 0; t < T; t++ {
		for h := 0; h < H; h++ {
			off := (t*H+h)*dq + dn
			cpu.RopeNorm(s.q[off:off+dr], s.ropeTab[t*dr:(t+1)*dr])
		}
	}

	// KV latent: [c_raw ‖ k_pe_raw] = W_DKV x; c = RMSNorm(c_raw), k_pe roped.
	w := kr + dr
	s.kva = grow(s.kva, T*w)
	a.CPU.MatMul(s.kva, x, T, a.W.KVA)
	cache.grow(a.Layer, nKV)
	lat := cache.Latent(a.Layer, nKV)
	for t := 0; t < T; t++ {
		row := lat[(pos0+t)*w : (pos0+t+1)*w]
		src := s.kva[t*w : (t+1)*w]
		cpu.RMSNorm(row[:kr], src[:kr], a.W.KVANorm, c.RMSEps)
		copy(row[kr:], src[kr:])
		cpu.RopeNorm(row[kr:], s.ropeTab[t*dr:(t+1)*dr])
	}

	// DSA: choose the keys each query may see.
	s.Selected = s.Selected[:0]
	if a.W.Indexer != nil {
		a.index(x, T, pos0, cache, s)
	}

	s.KQV = grow(s.KQV, T*H*dv)
	switch form {
	case Prefill:
		a.prefill(T, pos0, lat, s)
	case Decode:
		a.decode(T, pos0, lat, s)
	default:
		panic(fmt.Sprintf("attention: unknown form %d", form))
	}
	a.CPU.MatMul(out, s.KQV, T, a.W.Out)
}

// keys returns the key positions query t may attend to: the indexer's
// selection, or nil for every position [0, pos0+t].
func (s *Scratch) keys(t int) []int32 {
	if t < len(s.Selected) {
		return s.Selected[t]
	}
	return nil
}

// attend computes softmax(τ·score) over the keys of one query (scores holds
// one entry per key in keys, or per position [0, n) when keys is nil) and
// accumulates Σ a_s · vals(s) into o.
func attend(o, scores []float32, keys []int32, n int, val func(s int) []float32) {
	cpu.Softmax(scores)
	clear(o)
	if keys == nil {
		for s := 0; s < n; s++ {
			cpu.Axpy(o, scores[s], val(s))
		}
		return
	}
	for i, s := range keys {
		cpu.Axpy(o, scores[i], val(int(s)))
	}
}

// prefill is GLM5-MATH section 3.2: per head, k_nope and v for every cached
// position, then ordinary causal attention.
func (a *MLA) prefill(T, pos0 int, lat []float32, s *Scratch) {
	c := a.Cfg
	H, dn, dr, dv, kr := c.Heads, c.DNope, c.DRope, c.DV, c.KVRank
	dq, w, nKV := dn+dr, kr+dr, pos0+T

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
		cpu.Dequantize(s.kb, a.W.KB.Slice(h*kr, kr))
		clear(s.knope)
		for p := 0; p < nKV; p++ {
			kn := s.knope[p*dn : (p+1)*dn]
			for i, ci := range s.lat[p*kr : (p+1)*kr] {
				cpu.Axpy(kn, ci, s.kb[i*dn:(i+1)*dn])
			}
		}
		// v_s = W_UV_h c_s.
		a.CPU.MatMul(s.vals, s.lat, nKV, a.W.VB.Slice(h*dv, dv))

		for t := 0; t < T; t++ {
			q := s.q[(t*H+h)*dq : (t*H+h+1)*dq]
			keys := s.keys(t)
			n := pos0 + t + 1
			sc := s.scores[:n]
			if keys != nil {
				sc = s.scores[:len(keys)]
			}
			for i := range sc {
				p := i
				if keys != nil {
					p = int(keys[i])
				}
				kpe := lat[p*w+kr : (p+1)*w]
				sc[i] = c.Tau * (cpu.Dot(q[:dn], s.knope[p*dn:(p+1)*dn]) + cpu.Dot(q[dn:], kpe))
			}
			attend(s.KQV[(t*H+h)*dv:(t*H+h+1)*dv], sc, keys, n, func(p int) []float32 {
				return s.vals[p*dv : (p+1)*dv]
			})
		}
	}
}

// decode is GLM5-MATH section 3.3: absorb W_UK into the query, attend over
// the latent rows [c ‖ k_pe] as one KV head, expand through W_UV.
func (a *MLA) decode(T, pos0 int, lat []float32, s *Scratch) {
	c := a.Cfg
	H, dn, dr, dv, kr := c.Heads, c.DNope, c.DRope, c.DV, c.KVRank
	dq, w := dn+dr, kr+dr
	s.qh = grow(s.qh, T*dn)
	s.qabs = grow(s.qabs, T*kr)
	s.oabs = grow(s.oabs, T*kr)
	s.vals = grow(s.vals, T*dv)
	s.scores = grow(s.scores, pos0+T)
	for h := 0; h < H; h++ {
		// q̃_h = W_UK_hᵀ q_nope_h: attn_k_b rows of dn, so a plain matmul.
		for t := 0; t < T; t++ {
			copy(s.qh[t*dn:(t+1)*dn], s.q[(t*H+h)*dq:(t*H+h)*dq+dn])
		}
		a.CPU.MatMul(s.qabs, s.qh, T, a.W.KB.Slice(h*kr, kr))
		for t := 0; t < T; t++ {
			qabs := s.qabs[t*kr : (t+1)*kr]
			qpe := s.q[(t*H+h)*dq+dn : (t*H+h+1)*dq]
			keys := s.keys(t)
			n := pos0 + t + 1
			sc := s.scores[:n]
			if keys != nil {
				sc = s.scores[:len(keys)]
			}
			for i := range sc {
				p := i
				if keys != nil {
					p = int(keys[i])
				}
				row := lat[p*w : (p+1)*w]
				sc[i] = c.Tau * (cpu.Dot(qabs, row[:kr]) + cpu.Dot(qpe, row[kr:]))
			}
			attend(s.oabs[t*kr:(t+1)*kr], sc, keys, n, func(p int) []float32 {
				return lat[p*w : p*w+kr]
			})
		}
		// o_h = W_UV_h ô_h.
		a.CPU.MatMul(s.vals, s.oabs, T, a.W.VB.Slice(h*dv, dv))
		for t := 0; t < T; t++ {
			copy(s.KQV[(t*H+h)*dv:(t*H+h+1)*dv], s.vals[t*dv:(t+1)*dv])
		}
	}
}

// index runs the DSA lightning indexer (GLM5-MATH section 6): it caches the
// new tokens' indexer keys and, for each query with more visible keys than
// IndexTopK, selects the IndexTopK best-scoring ones into s.Selected.
func (a *MLA) index(x []float32, T, pos0 int, cache *LatentCache, s *Scratch) {
	c := a.Cfg
	iw := a.W.Indexer
	Ih, Id, dr := c.IndexHeads, c.IndexDim, c.DRope
	nKV := pos0 + T

	// Keys: kI = rope(LayerNorm(W_Ik x)), rope on the first dr dims.
	s.idxRopeTab = grow(s.idxRopeTab, T*dr)
	for t := 0; t < T; t++ {
		c.IndexRope.Table(s.idxRopeTab[t*dr:(t+1)*dr], pos0+t)
	}
	s.ik = grow(s.ik, T*Id)
	a.CPU.MatMul(s.ik, x, T, iw.K)
	keys := cache.IndexKeys(a.Layer, nKV)
	for t := 0; t < T; t++ {
		k := keys[(pos0+t)*Id : (pos0+t+1)*Id]
		cpu.LayerNorm(k, s.ik[t*Id:(t+1)*Id], iw.KNormW, iw.KNormB, c.IndexEps)
		cpu.RopeNorm(k[:dr], s.idxRopeTab[t*dr:(t+1)*dr])
	}
	if nKV <= c.IndexTopK {
		return // every query sees at most top_k keys: dense (section 6)
	}

	// Queries and head weights.
	s.iq = grow(s.iq, T*Ih*Id)
	a.CPU.MatMul(s.iq, s.cq, T, iw.QB)
	s.iw = grow(s.iw, T*Ih)
	a.CPU.MatMul(s.iw, x, T, iw.Proj)
	cpu.Scale(s.iw, 1/float32(math.Sqrt(float64(Id*Ih))))
	s.iscore = grow(s.iscore, nKV)
	for t := 0; t < T; t++ {
		q := s.iq[t*Ih*Id : (t+1)*Ih*Id]
		for h := 0; h < Ih; h++ {
			cpu.RopeNorm(q[h*Id:h*Id+dr], s.idxRopeTab[t*dr:(t+1)*dr])
		}
	}
	for len(s.Selected) < T {
		s.Selected = append(s.Selected, nil)
	}
	s.Selected = s.Selected[:T]
	for t := 0; t < T; t++ {
		n := pos0 + t + 1
		if n <= c.IndexTopK {
			s.Selected[t] = nil
			continue
		}
		q := s.iq[t*Ih*Id : (t+1)*Ih*Id]
		wt := s.iw[t*Ih : (t+1)*Ih]
		sc := s.iscore[:n]
		for p := 0; p < n; p++ {
			k := keys[p*Id : (p+1)*Id]
			var sum float32
			for h := 0; h < Ih; h++ {
				if d := cpu.Dot(q[h*Id:(h+1)*Id], k); d > 0 {
					sum += wt[h] * d
				}
			}
			sc[p] = sum
		}
		s.Selected[t] = topK(s.Selected[t][:0], sc, c.IndexTopK, &s.order)
	}
}
