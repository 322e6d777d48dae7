package cpu

import (
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

// attnTask is the fast attention of one call (both forms): chunk h is
// head h, computed entirely by one worker in the absorbed form of
// docs/MATH.md section 3.3, the form llama.cpp uses for both prefill and
// decode:
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
}

func (a *attnTask) run(wk, h int) {
	ws := &a.c.ws[wk]
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
			attend4(ws.oabs[t*kr:(t+4)*kr], ws.qblk, a.lat, kr, dr, a.pos0+t+1, p.Tau, ws.scores4, ws.tileRows(a.lat))
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
// selection: query j (its [q̃ ‖ q_pe] row j of q, kr+dr values) sees
// keys 0 … n0+j−1 and writes row j of o (kr apart). Each latent row is
// read once for the four (dot4, axpy4).
func attend4(o, q []float32, lat rows, kr, dr, n0 int, tau float32, sc *[keyTile][4]float32, tile []float32) {
	w := kr + dr
	clear(o[:4*kr])
	inf := float32(math.Inf(-1))
	m := [4]float32{inf, inf, inf, inf}
	var l [4]float32
	var idx, offs [keyTile]int32
	n := n0 + 3
	for k0 := 0; k0 < n; k0 += keyTile {
		nk := min(keyTile, n-k0)
		for i := range nk {
			idx[i] = int32(k0 + i)
		}
		base := lat.tile(offs[:nk], idx[:nk], tile)
		tileMax := [4]float32{inf, inf, inf, inf}
		for i := range nk {
			s := k0 + i
			v := &sc[i]
			dot4(v, q, w, base[offs[i]:int(offs[i])+w], w)
			for j := range 4 {
				if s >= n0+j {
					v[j] = inf // beyond query j's position
					continue
				}
				v[j] *= tau
				tileMax[j] = max(tileMax[j], v[j])
			}
		}
		raiseMax4(o, kr, m[:], l[:], tileMax[:])
		// The weights replace the scores (0 past a query's position); the
		// tile's weighted sum is one pass (axpyKeys4: the same fused
		// multiply-adds per element, key after key, as an axpy4 per key).
		for i := range nk {
			for j := range 4 {
				e := float32(0)
				if v := sc[i][j]; v != inf {
					e = expNeg(v - m[j])
					l[j] += e
				}
				sc[i][j] = e
			}
		}
		axpyKeys4(o, kr, sc[:nk], base, offs[:nk], kr)
	}
	for j := range 4 {
		Scale(o[j*kr:(j+1)*kr], 1/l[j])
	}
}

// raiseMax4 is the online softmax's step to a new tile for four queries:
// where query j's tile maximum tileMax[j] exceeds its running maximum
// m[j], its sum l[j] and output row j of o (kr apart) are scaled down to
// the new maximum, which m[j] becomes.
func raiseMax4(o []float32, kr int, m, l, tileMax []float32) {
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
}

// expNeg returns e^x for x ≤ 0 in float32, within 2e-7 relative error:
// x = k·ln2 + r with |r| ≤ ln2/2, e^r by its degree-6 Taylor polynomial,
// 2^k put into the exponent. Below −87 (2^−126) it returns 0.
func expNeg(x float32) float32 {
	const (
		log2e = 1.44269504088896341
		ln2hi = 0.693145751953125 // ln2 with its low bits cleared: k·ln2hi is exact
		ln2lo = 1.42860682030941723212e-6
	)
	if x < -87 {
		return 0
	}
	k := float32(int32(x*log2e - 0.5)) // round to nearest for x ≤ 0
	r := x - k*ln2hi - k*ln2lo
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720))))))
	return p * math.Float32frombits(uint32(int32(k)+127)<<23)
}

// attentionFast runs attnTask over the heads for causal attention over
// every key (four queries share each latent row there), and
// attendQueries, whose tasks are groups of heads, for selected keys and
// for fewer than four queries: a head group reads each chosen latent row
// once for all of its heads. With batch invariance both give a query the
// same arithmetic (attendOnline's), so its result does not depend on the
// path; without it the head groups take scores four keys at a time
// (dot4x4), which may round differently.
func (d *Device) attentionFast(kqv, q []float32, lat rows, kb, vb backend.Matrix, sel []int32, T, pos0 int, p backend.MLAParams) {
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
	c.pool.do(t, p.Heads)
	*t = attnTask{}
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
