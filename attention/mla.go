package attention

import (
	"fmt"
	"math"

	"github.com/glmrun/glmrun/backend"
)

// Config holds the sizes and constants of one MLA layer (docs/MATH.md
// section 3). Shapes below are written outermost first.
type Config struct {
	Embd   int // E
	Heads  int // H, all devices together
	QRank  int // q_lora_rank; 0 when the query comes straight from attn_q
	KVRank int // kv_lora_rank (kr)
	DNope  int // dn
	DRope  int // dr
	DV     int // dv

	RMSEps float32      // q_a / kv_a RMSNorm epsilon
	Tau    float32      // softmax scale mscale²/sqrt(dn+dr)
	Rope   backend.Rope // q_pe / k_pe rope (NORM, maybe YaRN)

	// DSA indexer (layers with IndexerWeights only).
	IndexHeads int          // Ih
	IndexDim   int          // Id
	IndexTopK  int          // keys kept per query
	IndexEps   float32      // k_norm LayerNorm epsilon (0 in llama.cpp glm-dsa)
	IndexRope  backend.Rope // rope of the first DRope indexer dims (NORM)
}

// Weights are one layer's attention weights as loaded from the file, each
// a [out, in] matrix in its GGUF type.
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

// IndexerWeights are the DSA lightning indexer's weights (docs/MATH.md
// section 6).
type IndexerWeights struct {
	QB     backend.Matrix // [Ih·Id, QRank], per head [rope ‖ nope]
	K      backend.Matrix // [Id, E]
	KNormW []float32      // [Id]
	KNormB []float32      // [Id]
	Proj   backend.Matrix // [Ih, E]
}

// Shard is one device's part of a layer's attention: the latent
// projections, their norms and the indexer replicated, and the heads
// [Head0, Head0+Heads) of the per-head weights: rows of attn_q_b (or
// attn_q), attn_k_b and attn_v_b, and the matching columns of attn_output,
// whose product is therefore a partial sum over heads that the devices
// add up (all-reduce).
type Shard struct {
	Head0, Heads int

	Q, QA, QB, KVA  backend.Weight // Q or QA+QB: [Heads(dn+dr), …]
	QANorm, KVANorm backend.Buffer
	KB, VB, Out     backend.Weight // [Heads·kr, dn], [Heads·dv, kr], [E, Heads·dv]
	Indexer         *IndexerShard
}

// IndexerShard is the indexer on one device (replicated).
type IndexerShard struct {
	QB, K, Proj    backend.Weight
	KNormW, KNormB backend.Buffer
}

// Upload puts heads [head0, head0+heads) of w and its replicated parts on
// dev.
func (w *Weights) Upload(dev backend.Device, c *Config, head0, heads int) (*Shard, error) {
	if heads <= 0 || head0 < 0 || head0+heads > c.Heads {
		return nil, fmt.Errorf("attention: heads [%d, %d) outside [0, %d)", head0, head0+heads, c.Heads)
	}
	dq := c.DNope + c.DRope
	s := &Shard{Head0: head0, Heads: heads}
	up := uploader{dev: dev}
	if c.QRank > 0 {
		s.QA = up.matrix(w.QA)
		s.QANorm = up.vector(w.QA.Name+" norm", w.QANorm)
		s.QB = up.matrix(w.QB.Slice(head0*dq, heads*dq))
	} else {
		s.Q = up.matrix(w.Q.Slice(head0*dq, heads*dq))
	}
	s.KVA = up.matrix(w.KVA)
	s.KVANorm = up.vector(w.KVA.Name+" norm", w.KVANorm)
	s.KB = up.matrix(w.KB.Slice(head0*c.KVRank, heads*c.KVRank))
	s.VB = up.matrix(w.VB.Slice(head0*c.DV, heads*c.DV))
	if heads == c.Heads {
		s.Out = up.matrix(w.Out)
	} else if out, err := w.Out.SliceCols(head0*c.DV, heads*c.DV); err != nil {
		up.fail(err)
	} else {
		s.Out = up.matrix(out)
	}
	if iw := w.Indexer; iw != nil {
		s.Indexer = &IndexerShard{
			QB:     up.matrix(iw.QB),
			K:      up.matrix(iw.K),
			Proj:   up.matrix(iw.Proj),
			KNormW: up.vector(iw.K.Name+" norm weight", iw.KNormW),
			KNormB: up.vector(iw.K.Name+" norm bias", iw.KNormB),
		}
	}
	if up.err != nil {
		return nil, up.err
	}
	return s, nil
}

// uploader uploads to one device, keeping the first error.
type uploader struct {
	dev backend.Device
	err error
}

func (u *uploader) fail(err error) {
	if u.err == nil {
		u.err = err
	}
}

func (u *uploader) matrix(m backend.Matrix) backend.Weight {
	if u.err != nil {
		return nil
	}
	w, err := u.dev.Upload(m)
	u.fail(err)
	return w
}

func (u *uploader) vector(name string, v []float32) backend.Buffer {
	if u.err != nil {
		return nil
	}
	b, err := u.dev.UploadVector(name, v)
	u.fail(err)
	return b
}

// MLA is one layer's attention on one device.
type MLA struct {
	Cfg   *Config
	W     *Shard
	Layer int // index into the LatentCache
	Dev   backend.Device
	// SharedIndexer marks a GLM-5.2 "shared" layer: it has no indexer and
	// attends to the keys the last full layer before it chose, which its
	// Forward (or DecodeBatch) left in the Scratch that this layer gets.
	SharedIndexer bool
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

// Scratch holds the device buffers of MLA.Forward, grown on demand and
// reused between layers and calls; all must belong to the MLA's device
// (see NewScratch). After Forward it also holds the results that hooks
// may want: KQV and Sel.
type Scratch struct {
	qa, cq, q, kva, ik, iq, iw, kqv backend.Scratch
	sel                             backend.ScratchIDs
	// sels are DecodeBatch's per-sequence selections (views of sel, nil
	// where a sequence sees every key), kept for the shared layers after.
	sels []backend.IDs

	// KQV is the attention output before attn_output, [T, Heads·dv] of
	// this device's heads.
	KQV backend.Buffer
	// Sel is the DSA selection [T, IndexTopK] (see
	// backend.Device.IndexerTopK), or nil when every query saw every
	// causal key.
	Sel backend.IDs
}

// NewScratch returns empty buffers on dev.
func NewScratch(dev backend.Device) *Scratch {
	s := &Scratch{}
	for _, b := range []*backend.Scratch{&s.qa, &s.cq, &s.q, &s.kva, &s.ik, &s.iq, &s.iw, &s.kqv} {
		b.Dev = dev
	}
	s.sel.Dev = dev
	return s
}

// Free returns the buffers' memory to the device.
func (s *Scratch) Free() {
	for _, b := range []*backend.Scratch{&s.qa, &s.cq, &s.q, &s.kva, &s.ik, &s.iq, &s.iw, &s.kqv} {
		b.Free()
	}
	s.sel.Free()
}

// bufs gets several scratch buffers, keeping the first error.
type bufs struct{ err error }

func (g *bufs) get(s *backend.Scratch, n int) backend.Buffer {
	if g.err != nil {
		return nil
	}
	b, err := s.Get(n)
	if err != nil {
		g.err = fmt.Errorf("attention: %w", err)
	}
	return b
}

// Forward issues on the device the attention of T new tokens at positions
// pos0 … pos0+T−1 of one sequence: x is the attn_norm output [T, E]; out
// receives this device's share of the attn_output projection [T, E] (the
// whole of it without tensor parallelism). It writes the new tokens'
// latents (and indexer keys) to the cache and attends causally over
// positions [0, pos0+T). Both forms give the same result up to rounding.
// Errors are allocation failures and positions beyond the cache (wrapping
// ErrContextFull, before anything is issued); device faults surface from
// Sync.
func (a *MLA) Forward(out, x backend.Buffer, T, pos0 int, cache *LatentCache, s *Scratch, form Form) error {
	c, w, dev := a.Cfg, a.W, a.Dev
	H, dn, dr, dv, kr := w.Heads, c.DNope, c.DRope, c.DV, c.KVRank
	dq, wd, nKV := dn+dr, kr+dr, pos0+T
	if err := cache.room(a.Layer, nKV); err != nil {
		return err
	}
	var g bufs

	// Query: q = W_UQR · RMSNorm(W_DQ x), per head [q_nope ‖ q_pe].
	q := g.get(&s.q, T*H*dq)
	var cq backend.Buffer
	if c.QRank > 0 {
		qa := g.get(&s.qa, T*c.QRank)
		cq = g.get(&s.cq, T*c.QRank)
		if g.err != nil {
			return g.err
		}
		dev.MatMul(qa, x, T, w.QA)
		dev.RMSNorm(cq, qa, T, c.QRank, w.QANorm, c.RMSEps)
		dev.MatMul(q, cq, T, w.QB)
	} else if g.err == nil {
		dev.MatMul(q, x, T, w.Q)
	}
	kva := g.get(&s.kva, T*wd)
	if g.err != nil {
		return g.err
	}
	dev.Rope(q, T, H, dq, dn, pos0, c.Rope)

	// KV latent: [c_raw ‖ k_pe_raw] = W_DKV x; c = RMSNorm(c_raw), k_pe roped.
	// Normalized and roped in float32, then stored in the cache's type.
	dev.MatMul(kva, x, T, w.KVA)
	dev.RMSNorm(kva, kva, T, wd, w.KVANorm, c.RMSEps)
	dev.Rope(kva, T, 1, wd, kr, pos0, c.Rope)
	lat := cache.Latent(a.Layer, nKV)
	dev.Copy(cache.latentRows(a.Layer, pos0, T), kva)

	// DSA: choose the keys each query may see; a shared layer keeps the
	// selection the full layer before it left in s.Sel.
	switch {
	case w.Indexer != nil:
		s.Sel = nil
		if err := a.index(x, cq, T, pos0, cache, s); err != nil {
			return err
		}
	case !a.SharedIndexer:
		s.Sel = nil
	}

	kqv := g.get(&s.kqv, T*H*dv)
	if g.err != nil {
		return g.err
	}
	s.KQV = kqv
	p := backend.MLAParams{Heads: H, DNope: dn, DRope: dr, DV: dv, KVRank: kr, Tau: c.Tau, TopK: c.IndexTopK}
	switch form {
	case Prefill:
		dev.AttentionPrefill(kqv, q, lat, w.KB, w.VB, s.Sel, T, pos0, p)
	case Decode:
		dev.AttentionDecode(kqv, q, lat, w.KB, w.VB, s.Sel, T, pos0, p)
	default:
		panic(fmt.Sprintf("attention: unknown form %d", form))
	}
	dev.MatMul(out, kqv, T, w.Out)
	return nil
}

// index runs the DSA lightning indexer (docs/MATH.md section 6): it caches
// the new tokens' indexer keys and, once some query sees more than IndexTopK
// keys, selects each query's keys into s.Sel.
func (a *MLA) index(x, cq backend.Buffer, T, pos0 int, cache *LatentCache, s *Scratch) error {
	c, dev := a.Cfg, a.Dev
	iw := a.W.Indexer
	Ih, Id := c.IndexHeads, c.IndexDim
	nKV := pos0 + T
	var g bufs

	// Keys: kI = rope(LayerNorm(W_Ik x)), rope on the first dr dims.
	ik := g.get(&s.ik, T*Id)
	if g.err != nil {
		return g.err
	}
	dev.MatMul(ik, x, T, iw.K)
	dev.LayerNorm(ik, ik, T, Id, iw.KNormW, iw.KNormB, c.IndexEps)
	dev.Rope(ik, T, 1, Id, 0, pos0, c.IndexRope)
	keys := cache.IndexKeys(a.Layer, nKV)
	dev.Copy(cache.indexRows(a.Layer, pos0, T), ik)
	if nKV <= c.IndexTopK {
		return nil // every query sees at most top_k keys: dense (docs/MATH.md 6.3)
	}

	// Queries and head weights.
	iq := g.get(&s.iq, T*Ih*Id)
	wt := g.get(&s.iw, T*Ih)
	if g.err != nil {
		return g.err
	}
	sel, err := s.sel.Get(T * c.IndexTopK)
	if err != nil {
		return fmt.Errorf("attention: %w", err)
	}
	dev.MatMul(iq, cq, T, iw.QB)
	dev.MatMul(wt, x, T, iw.Proj)
	dev.Scale(wt, 1/float32(math.Sqrt(float64(Id*Ih))))
	dev.Rope(iq, T, Ih, Id, 0, pos0, c.IndexRope)
	dev.IndexerTopK(sel, iq, wt, keys, T, pos0, backend.IndexerParams{Heads: Ih, Dim: Id, TopK: c.IndexTopK})
	s.Sel = sel
	return nil
}
