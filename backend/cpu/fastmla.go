package cpu

import (
	"fmt"
	"math"

	"github.com/glmrun/glmrun/backend"
)

// latF32Max is the most values of a typed latent cache that the causal
// prefill converts to float32 once per call (16 MB: 7281 rows of GLM-5's
// 576) instead of once per head and tile of four queries.
const latF32Max = 4 << 20

// keyTile is the number of keys whose scores the fast attention holds at
// once: the online softmax keeps its memory O(keyTile) per query whatever
// the context length.
const keyTile = 64

// attnTask is the fast causal attention of one call over every key:
// chunk h is head h, computed entirely by one worker, in the decompressed
// form (runDecompressed) when the call's dec is set, else in the absorbed
// form of docs/MATH.md section 3.3, the form llama.cpp uses for both
// prefill and decode:
//
//	q̃_t = W_UK_hᵀ q_nope_t          (quantized product with attn_k_b)
//	ô_t = Σ_s softmax_s(τ(q̃_t·c_s + q_pe_t·k_pe_s)) c_s   over t's keys
//	o_t = W_UV_h ô_t                 (quantized product with attn_v_b)
//
// The softmax runs over tiles of keyTile keys with a running maximum and
// sum (online softmax), so memory stays O(tile) per query; the 512-wide
// dot products and weighted sums use the vector kernels.
type attnTask struct {
	c       *CPU
	q, kqv  []float32
	lat     rows
	kb, vb  backend.Matrix
	sel     []int32
	T, pos0 int
	p       backend.MLAParams
	dec     *decompressed // the decompressed form's shared inputs, or nil (absorbed)
}

func (a *attnTask) run(wk, h int) {
	ws := &a.c.ws[wk]
	if a.dec != nil {
		a.runDecompressed(ws, h)
		return
	}
	p := a.p
	H, dn, dr, dv, kr := p.Heads, p.DNope, p.DRope, p.DV, p.KVRank
	dq, T := dn+dr, a.T
	ws.qh = grow(ws.qh, T*dn)
	for t := 0; t < T; t++ {
		copy(ws.qh[t*dn:(t+1)*dn], a.q[(t*H+h)*dq:(t*H+h)*dq+dn])
	}
	ws.qabs = grow(ws.qabs, T*kr)
	a.c.matMulSerial(ws, ws.qabs, ws.qh, T, a.kb.Slice(h*kr, kr))
	ws.oabs = grow(ws.oabs, T*kr)
	ws.scores = grow(ws.scores, keyTile)
	ws.probs = grow(ws.probs, kr+dr)
	t := 0
	if a.sel == nil {
		// Causal attention: four queries at a time over each key tile.
		ws.qblk = grow(ws.qblk, 4*(kr+dr))
		if ws.scores4 == nil {
			ws.scores4 = new([keyTile][4]float32)
		}
		for ; t+4 <= T; t += 4 {
			for j := range 4 {
				q := ws.qblk[j*(kr+dr) : (j+1)*(kr+dr)]
				copy(q, ws.qabs[(t+j)*kr:(t+j+1)*kr])
				copy(q[kr:], a.q[((t+j)*H+h)*dq+dn:((t+j)*H+h+1)*dq])
			}
			attend4(ws.oabs[t*kr:(t+4)*kr], kr, ws.qblk, kr+dr, a.lat, kr+dr, nil, 0, kr, a.pos0+t+1, p.Tau, ws.scores4, ws.tileRows(a.lat))
		}
	}
	for ; t < T; t++ {
		keys := selRow(a.sel, t, p.TopK)
		n := a.pos0 + t + 1
		if keys != nil {
			n = len(keys)
		}
		qpe := a.q[(t*H+h)*dq+dn : (t*H+h+1)*dq]
		attendOnline(ws.oabs[t*kr:(t+1)*kr], ws.qabs[t*kr:(t+1)*kr], qpe, a.lat, kr, dr, keys, n, p.Tau, ws.scores, ws.probs, ws.tileRows(a.lat))
	}
	ws.vals = grow(ws.vals, T*dv)
	a.c.matMulSerial(ws, ws.vals, ws.oabs, T, a.vb.Slice(h*dv, dv))
	for t := 0; t < T; t++ {
		copy(a.kqv[(t*H+h)*dv:(t*H+h+1)*dv], ws.vals[t*dv:(t+1)*dv])
	}
}

// attendOnline writes to o [kr] the attention of one query (qabs [kr],
// qpe [dr]) over n latent rows [c ‖ k_pe] of lat: rows 0 … n−1, or
// keys[i] when keys is not nil. scores holds keyTile values, q kr+dr,
// tile keyTile rows (see rows.tile).
func attendOnline(o, qabs, qpe []float32, lat rows, kr, dr int, keys []int32, n int, tau float32, scores, q, tile []float32) {
	w := kr + dr
	q = q[:w]
	copy(q, qabs)
	copy(q[kr:], qpe)
	clear(o)
	m := float32(math.Inf(-1))
	var l float32
	var idx, offs [keyTile]int32
	for k0 := 0; k0 < n; k0 += keyTile {
		sc := scores[:min(keyTile, n-k0)]
		for i := range sc {
			idx[i] = int32(k0 + i)
			if keys != nil {
				idx[i] = keys[k0+i]
			}
		}
		base := lat.tile(offs[:len(sc)], idx[:len(sc)], tile)
		tileMax := float32(math.Inf(-1))
		for i := range sc {
			v := dot1(q, base[offs[i]:int(offs[i])+w], w) * tau
			sc[i] = v
			tileMax = max(tileMax, v)
		}
		if tileMax > m {
			if l > 0 {
				f := expNeg(m - tileMax)
				Scale(o, f)
				l *= f
			}
			m = tileMax
		}
		for i, v := range sc {
			e := expNeg(v - m)
			l += e
			axpy(o, e, base[offs[i]:int(offs[i])+kr])
		}
	}
	Scale(o, 1/l)
}

// attend4 is attendOnline for four consecutive queries without a key
// selection: query j (row j of q, ldq apart) sees keys 0 … n0+j−1 and
// writes row j of o (ldo apart). The scores are the dot products of the
// queries' first dk values with the key rows of keys; the values summed
// are the rows of vals (ldv apart, dv values each), or with vals nil the
// key rows' own first dv values (the absorbed form: the latent c is both).
// Each key row is read once for the four (dot4, axpyKeys4).
func attend4(o []float32, ldo int, q []float32, ldq int, keys rows, dk int, vals []float32, ldv, dv, n0 int, tau float32, sc *[keyTile][4]float32, tile []float32) {
	for j := range 4 {
		clear(o[j*ldo : j*ldo+dv])
	}
	inf := float32(math.Inf(-1))
	m := [4]float32{inf, inf, inf, inf}
	var l [4]float32
	var idx, offs, voffs [keyTile]int32
	n := n0 + 3
	for k0 := 0; k0 < n; k0 += keyTile {
		nk := min(keyTile, n-k0)
		for i := range nk {
			idx[i] = int32(k0 + i)
		}
		base := keys.tile(offs[:nk], idx[:nk], tile)
		tileMax := [4]float32{inf, inf, inf, inf}
		for i := range nk {
			s := k0 + i
			v := &sc[i]
			dot4(v, q, ldq, base[offs[i]:int(offs[i])+dk], dk)
			for j := range 4 {
				if s >= n0+j {
					v[j] = inf // beyond query j's position
					continue
				}
				v[j] *= tau
				tileMax[j] = max(tileMax[j], v[j])
			}
		}
		raiseMax4(o, ldo, dv, m[:], l[:], tileMax[:])
		// The weights replace the scores (0 past a query's position); the
		// tile's weighted sum is one pass (axpyKeys4: the same fused
		// multiply-adds per element, key after key, as an axpy4 per key).
		expTile4(sc[:nk], &m, &l)
		vbase, vo := base, offs[:nk]
		if vals != nil {
			for i := range nk {
				voffs[i] = int32((k0 + i) * ldv)
			}
			vbase, vo = vals, voffs[:nk]
		}
		axpyKeys4(o, ldo, sc[:nk], vbase, vo, dv)
	}
	for j := range 4 {
		Scale(o[j*ldo:j*ldo+dv], 1/l[j])
	}
}

// raiseMax4 is the online softmax's step to a new tile for four queries:
// where query j's tile maximum tileMax[j] exceeds its running maximum
// m[j], its sum l[j] and output row j of o (n values, ldo apart) are
// scaled down to the new maximum, which m[j] becomes.
func raiseMax4(o []float32, ldo, n int, m, l, tileMax []float32) {
	for j := range 4 {
		if tileMax[j] > m[j] {
			if l[j] > 0 {
				f := expNeg(m[j] - tileMax[j])
				Scale(o[j*ldo:j*ldo+n], f)
				l[j] *= f
			}
			m[j] = tileMax[j]
		}
	}
}

// expNeg returns e^x for x ≤ 0 in float32, within 2e-7 relative error:
// x = k·ln2 + r with |r| ≤ ln2/2, e^r by its degree-6 Taylor polynomial,
// 2^k put into the exponent. Below −87 (2^−126) it returns 0.
func expNeg(x float32) float32 {
	if x < expLimit {
		return 0
	}
	k := float32(int32(x*expLog2e - 0.5)) // round to nearest for x ≤ 0
	r := x - k*expLn2hi - k*expLn2lo
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720))))))
	return p * math.Float32frombits(uint32(int32(k)+127)<<23)
}

// expNeg's constants (expTile4's vector kernel reads them too).
const (
	expLog2e = 1.44269504088896341
	expLn2hi = 0.693145751953125 // ln2 with its low bits cleared: k·ln2hi is exact
	expLn2lo = 1.42860682030941723212e-6
	expLimit = -87
)

// attentionFast runs attnTask over the heads for causal attention over
// every key (four queries share each latent row there), and
// attendQueries, whose tasks are groups of heads, for selected keys and
// for fewer than four queries: a head group reads each chosen latent row
// once for all of its heads. With batch invariance both give a query the
// same arithmetic (attendOnline's), so its result does not depend on the
// path; without it the head groups take scores four keys at a time
// (dot4x4), which may round differently.
func (d *Device) attentionFast(kqv, q []float32, lat rows, kb, vb backend.Matrix, sel []int32, T, pos0 int, p backend.MLAParams, prefill bool) {
	if sel != nil || T < 4 {
		s := d.getScratch()
		defer d.putScratch(s)
		lats, sels, pos := s.queries(T)
		for t := range T {
			pos[t] = pos0 + t
			lats[t] = lat.prefix(pos0 + t + 1)
			sels[t] = nil
			if sel != nil {
				sels[t] = sel[t*p.TopK : (t+1)*p.TopK]
			}
		}
		d.attendQueries(kqv, q, lats, sels, pos, kb, vb, p)
		clear(lats) // the scratch outlives the cache: keep no reference to it
		clear(sels)
		return
	}
	if lat.typed && (pos0+T)*lat.w <= latF32Max {
		// Every head's tasks would convert the same typed rows again for
		// each tile of four queries: convert them once (the same values,
		// so the same results) and let the heads read float32 rows.
		s := d.getScratch()
		defer d.putScratch(s)
		lat = rows{f32: lat.prefix(pos0 + T).float32s(&s.rowsF32), w: lat.w}
	}
	c := d.cpu
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &c.at
	*t = attnTask{c: c, q: q, lat: lat, kqv: kqv, kb: kb, vb: vb, sel: sel, T: T, pos0: pos0, p: p}
	if prefill && c.prefillForm(T, pos0, lat, p) == decompressedForm {
		s := d.getScratch()
		defer d.putScratch(s)
		t.dec = c.decompressInputs(s, lat, pos0+T, vb, p)
	}
	c.pool.do(t, p.Heads)
	*t = attnTask{}
}

// A causal prefill's attention takes one of two forms (docs/MATH.md
// sections 3.2 and 3.3), the same numbers but for rounding:
//
//   - absorbed: W_UK is folded into each query and the scores and the
//     weighted sum run over the latent rows [c ‖ k_pe] (kr+dr and kr
//     values a key), then W_UV expands each query's sum; the form of
//     every decode step, and llama.cpp's for prompts too.
//   - decompressed: every key's k_nope = W_UK c and v = W_UV c are
//     computed once per call, and the scores and the sum run over
//     dn+dr and dv values a key (ik_llama.cpp's form for prompts of 128+
//     tokens): fewer operations per query and key, more per key.
//
// The decompressed form pays for its per-key products once the queries
// outnumber about a third of the keys' width; prefillForm weighs the
// two.
type attentionForm uint8

const (
	autoForm attentionForm = iota // prefillForm chooses
	absorbedForm
	decompressedForm
)

// decompressedMinQueries is the fewest queries for which prefillForm
// weighs the decompressed form (ik_llama.cpp's threshold too): shorter
// prompts keep llama.cpp's absorbed form, and so its activations and
// roundings, whatever the shapes (at GLM-5's the decompressed form pays
// from about 170 queries on; at a test model's much tinier ones it would
// from 20).
const decompressedMinQueries = 128

// decompressedMaxBytes bounds a worker's decompressed keys and values
// (4·N·(dn+dr+dv) bytes for N keys): a longer context takes the absorbed
// form, whose memory does not grow with it.
const decompressedMaxBytes = 16 << 20

// prefillForm returns the form of a causal prefill of T queries after
// pos0 cached positions over the latent rows lat: absorbed where the
// products are batch-invariant (a prompt's queries then get what a
// decode step computes), for fewer than four queries, for a cache type's
// rows (converted to float32 only up to latF32Max), for a dn that is not
// a multiple of 16 (mulRows4's columns) and where the decompressed keys
// would pass decompressedMaxBytes; else the form c.form forces (tests),
// else absorbed below decompressedMinQueries queries, else the cheaper
// by a count of multiply-adds in which an integer product with
// quantized weights counts half of a float32 one (about their speeds in
// this package's kernels).
func (c *CPU) prefillForm(T, pos0 int, lat rows, p backend.MLAParams) attentionForm {
	dn, dr, dv, kr := p.DNope, p.DRope, p.DV, p.KVRank
	n := pos0 + T
	if c.invariant || T < 4 || lat.typed || dn%16 != 0 || 4*n*(dn+dr+dv) > decompressedMaxBytes {
		return absorbedForm
	}
	if c.form != autoForm {
		return c.form
	}
	if T < decompressedMinQueries {
		return absorbedForm
	}
	pairs := T * (2*pos0 + T + 1) / 2 // (query, key) pairs of the causal mask
	absorbed := T*(dn*kr+kr*dv)/2 + pairs*(2*kr+dr)
	decompressed := n*dn*kr + n*kr*dv/2 + pairs*(dn+dr+dv)
	if decompressed < absorbed {
		return decompressedForm
	}
	return absorbedForm
}

// decompressed holds what the heads of a decompressed prefill share: the
// keys' latent rows (float32, w values apart: c then k_pe), their count,
// and the latents c quantized for W_UV's product.
type decompressed struct {
	lat  []float32
	w, n int
	k    *kernel
	act  []byte
	lda  int
}

// decompressInputs quantizes the n keys' latents for vb's product (once
// for all heads) into s and returns the heads' shared inputs.
func (c *CPU) decompressInputs(s *scratch, lat rows, n int, vb backend.Matrix, p backend.MLAParams) *decompressed {
	kr, w := p.KVRank, lat.w
	s.lat = grow(s.lat, n*kr)
	for i := range n {
		copy(s.lat[i*kr:(i+1)*kr], lat.f32[i*w:i*w+kr])
	}
	k := kernelOf(vb.Type, false)
	if k == nil {
		panic(fmt.Sprintf("cpu: MatMul %s: no fast kernel for %s", vb.Name, vb.Type))
	}
	act, lda := c.quantize(s.lat, n, kr, k.act)
	return &decompressed{lat: lat.f32, w: w, n: n, k: k, act: act, lda: lda}
}

// runDecompressed is head h of a decompressed prefill: its keys' k_nope
// (W_UK_h dequantized: the latents meet it in float32 multiply-adds) and v (W_UV_h's quantized product with the
// quantized latents), then four queries at a time over key rows
// [k_nope ‖ k_pe] and value rows v, straight into kqv.
func (a *attnTask) runDecompressed(ws *workerScratch, h int) {
	p, dec := a.p, a.dec
	H, dn, dr, dv, kr := p.Heads, p.DNope, p.DRope, p.DV, p.KVRank
	dq, n, lw := dn+dr, dec.n, dec.w
	// W_UK_h in float32: kr rows of dn values, one per latent index.
	ws.wt = grow(ws.wt, kr*dn)
	kb := a.kb.Slice(h*kr, kr)
	Dequantize(ws.wt, kb)
	if kb.Scale != 0 {
		Scale(ws.wt, kb.Scale)
	}
	ws.keys = grow(ws.keys, n*dq)
	keys := ws.keys
	// Four keys at a time; the last four again where n is not a multiple
	// (a key's k_nope does not depend on the others).
	for s := 0; s < n; s += 4 {
		s = min(s, n-4)
		mulRows4(keys[s*dq:], dq, dec.lat[s*lw:], lw, ws.wt, dn, kr, dn)
	}
	for s := range n {
		copy(keys[s*dq+dn:(s+1)*dq], dec.lat[s*lw+kr:s*lw+kr+dr])
	}
	ws.vals = grow(ws.vals, n*dv)
	gemmRows(dec.k, ws.vals, dec.act, dec.lda, n, a.vb.Slice(h*dv, dv), 0, dv)
	if ws.scores4 == nil {
		ws.scores4 = new([keyTile][4]float32)
	}
	kr4 := rows{f32: keys, w: dq}
	// Queries in blocks of four; a last partial block is the last four
	// queries again (a query's result does not depend on its place in a
	// block: the keys past it add zeros).
	for t := 0; t < a.T; t += 4 {
		t = min(t, a.T-4)
		o := a.kqv[(t*H+h)*dv:]
		q := a.q[(t*H+h)*dq:]
		attend4(o, H*dv, q, H*dq, kr4, dq, ws.vals, dv, dv, a.pos0+t+1, p.Tau, ws.scores4, nil)
	}
}

// swigluFast is SwiGLU with the float32 exponential of expNeg: silu(g) =
// g·σ(g), σ(g) = 1/(1+e^−g) for g ≥ 0 and e^g/(1+e^g) below. Whole
// vectors of values go to swigluVec (the same operations on 16 lanes,
// where the CPU has them), the rest to swigluGeneric.
func swigluFast(dst, gate, up []float32) {
	gate = gate[:len(dst)]
	up = up[:len(dst)]
	n := swigluVec(dst, gate, up)
	swigluGeneric(dst[n:], gate[n:], up[n:])
}

// swigluGeneric is swigluFast one value at a time.
func swigluGeneric(dst, gate, up []float32) {
	gate = gate[:len(dst)]
	up = up[:len(dst)]
	for i, g := range gate {
		var sig float32
		if g >= 0 {
			sig = 1 / (1 + expNeg(-g))
		} else {
			e := expNeg(g)
			sig = e / (1 + e)
		}
		dst[i] = g * sig * up[i]
	}
}
