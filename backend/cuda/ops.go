package cuda

import (
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/glmrun/glmrun/backend"
	"github.com/glmrun/glmrun/tensor"
)

// mm queues dst = w·x for n activation rows with explicit strides and,
// for heads > 1, one product per head h using weight rows
// [h·rows, (h+1)·rows), x at h·xHeadOff and dst at h·dstHeadOff.
func (d *Device) mm(dst, x uint64, w *weight, rows, n, xStride, dstStride, heads, xHeadOff, dstHeadOff int) {
	if n == 0 {
		return
	}
	d.run("mm_"+mmTypes[w.typ], dim3{uint32(rows), cdiv(n, 4), uint32(heads)}, dim3{mmBlock(w.cols), 1, 1}, 0,
		dst, w.m.ptr, x, i32(rows), i32(w.cols), i32(n), i32(w.rowBytes), i32(xStride), i32(dstStride),
		i32(xHeadOff), i32(dstHeadOff), w.scale)
}

// mmBlock is the block size of a product with rows of cols values: one
// thread per 32-element chunk, 32 to 128 threads.
func mmBlock(cols int) uint32 {
	chunks := (cols + 31) / 32
	return min(128, max(32, 32*cdiv(chunks, 32)))
}

// GetRows writes rows ids of w, dequantized, to dst.
func (d *Device) GetRows(dst backend.Buffer, w backend.Weight, rows []int32) {
	wt, out := d.weight(w), d.buf(dst)
	if len(rows) == 0 {
		return
	}
	if out.n < len(rows)*wt.cols {
		panic(fmt.Sprintf("%s: GetRows of %d rows of %d into %d values", d.Name(), len(rows), wt.cols, out.n))
	}
	for _, r := range rows {
		if r < 0 || int(r) >= wt.rows {
			panic(fmt.Sprintf("%s: GetRows %s: row %d out of [0, %d)", d.Name(), wt.name, r, wt.rows))
		}
	}
	ids := d.scratchIDs("getrows.ids", len(rows))
	d.writeIDs(ids, rows)
	d.run("get_rows_"+mmTypes[wt.typ], dim3{uint32(len(rows)), 1, 1}, dim3{128, 1, 1}, 0,
		out.ptr, wt.m.ptr, ids.ptr, i32(wt.cols), i32(wt.rowBytes))
}

// MatMul computes dst[t, r] = Σ_i w[r, i]·x[t, i] for n rows.
func (d *Device) MatMul(dst, x backend.Buffer, n int, w backend.Weight) {
	wt, o, in := d.weight(w), d.buf(dst), d.buf(x)
	if in.n < n*wt.cols || o.n < n*wt.rows {
		panic(fmt.Sprintf("%s: MatMul %s: x has %d values, dst %d; want %d x %d and %d x %d",
			d.Name(), wt.name, in.n, o.n, n, wt.cols, n, wt.rows))
	}
	if q, ok := d.fastProduct(wt); ok {
		d.mmvq(o.ptr, in.ptr, wt, n, q)
		return
	}
	d.mm(o.ptr, in.ptr, wt, wt.rows, n, wt.cols, wt.rows, 1, 0, 0)
}

// mmvqWarps is the number of weight rows (one a warp) a block of the
// mmvq_* and mmvq_experts_* kernels computes.
const mmvqWarps = 4

// mmvqType is a weight type's fast product: the activations' block type
// (values and bytes a block, its quantizer) and the dot-product kernel.
type mmvqType struct {
	block, bytes            int
	quantize, kern, experts string
}

// mmvqTypes are the weight types with a fast product: the activation type
// is the one the CPU's fast path quantizes to for them (ggml's
// vec_dot_type).
var mmvqTypes = map[tensor.Type]mmvqType{
	tensor.Q8_0:   {32, 34, "quantize_q8_0_f32", "mmvq_q8_0", "mmvq_experts_q8_0"},
	tensor.Q4_K:   {256, 292, "quantize_q8_k_f32", "mmvq_q4_k", "mmvq_experts_q4_k"},
	tensor.Q5_K:   {256, 292, "quantize_q8_k_f32", "mmvq_q5_k", "mmvq_experts_q5_k"},
	tensor.Q6_K:   {256, 292, "quantize_q8_k_f32", "mmvq_q6_k", "mmvq_experts_q6_k"},
	tensor.IQ4_XS: {256, 292, "quantize_q8_k_f32", "mmvq_iq4_xs", "mmvq_experts_iq4_xs"},
}

// fastProduct returns w's fast product when the fast path (Config.Fast)
// has one for it: a type of mmvqTypes, no scale, whole activation blocks.
func (d *Device) fastProduct(w *weight) (mmvqType, bool) {
	q, ok := mmvqTypes[w.typ]
	return q, ok && d.fast && w.scale == 0 && w.cols%q.block == 0
}

// mmvq is the fast path's product (Config.Fast) for the mmvqTypes: the n
// activation rows quantized once, then integer dot products with every
// weight row, a warp a row.
func (d *Device) mmvq(dst, x uint64, w *weight, n int, q mmvqType) {
	if n == 0 {
		return
	}
	nb := w.cols / q.block
	xq := d.grow("mmvq.x", int64(n*nb*q.bytes))
	d.run(q.quantize, dim3{cdiv(nb, 128), uint32(n), 1}, dim3{128, 1, 1}, 0,
		xq.ptr, x, i32(w.cols), i32(w.cols), i32(nb*q.bytes))
	d.run(q.kern, dim3{cdiv(w.rows, mmvqWarps), uint32(n), 1}, dim3{32 * mmvqWarps, 1, 1}, 0,
		dst, w.m.ptr, xq.ptr, i32(w.rows), i32(w.cols), i32(w.rowBytes), i32(nb*q.bytes), i32(w.rows))
}

// normBlock is the block size of the row kernels: a power of two.
func normBlock(n int) uint32 {
	b := uint32(32)
	for b < 256 && int(b) < n {
		b *= 2
	}
	return b
}

// RMSNorm normalizes rows of x into dst.
func (d *Device) RMSNorm(dst, x backend.Buffer, rows, stride int, w backend.Buffer, eps float32) {
	n := w.Len()
	if rows == 0 {
		return
	}
	if rows > 0 && (x.Len() < (rows-1)*stride+n || dst.Len() < (rows-1)*stride+n) {
		panic(fmt.Sprintf("%s: RMSNorm of %d rows of %d (stride %d) over %d values", d.Name(), rows, n, stride, x.Len()))
	}
	d.run("rmsnorm_f32", dim3{uint32(rows), 1, 1}, dim3{normBlock(n), 1, 1}, 0,
		d.ptr(dst), d.ptr(x), d.ptr(w), i32(n), i32(stride), eps)
}

// AddRMSNorm adds delta to h and normalizes the sums into dst, one
// kernel: add_rmsnorm_f32 (the values of add_f32, then rmsnorm_f32).
func (d *Device) AddRMSNorm(dst, h, delta backend.Buffer, rows, stride int, w backend.Buffer, eps float32) {
	n := w.Len()
	if rows == 0 {
		return
	}
	if rows > 0 && (h.Len() < (rows-1)*stride+n || delta.Len() < (rows-1)*stride+n || dst.Len() < (rows-1)*stride+n) {
		panic(fmt.Sprintf("%s: AddRMSNorm of %d rows of %d (stride %d) over %d, %d and %d values", d.Name(), rows, n, stride, h.Len(), delta.Len(), dst.Len()))
	}
	d.run("add_rmsnorm_f32", dim3{uint32(rows), 1, 1}, dim3{normBlock(n), 1, 1}, 0,
		d.ptr(dst), d.ptr(h), d.ptr(delta), d.ptr(w), i32(n), i32(stride), eps)
}

// LayerNorm normalizes rows of x into dst.
func (d *Device) LayerNorm(dst, x backend.Buffer, rows, stride int, w, b backend.Buffer, eps float32) {
	n := w.Len()
	if rows == 0 {
		return
	}
	if x.Len() < (rows-1)*stride+n || dst.Len() < (rows-1)*stride+n || b.Len() != n {
		panic(fmt.Sprintf("%s: LayerNorm of %d rows of %d (stride %d) over %d values", d.Name(), rows, n, stride, x.Len()))
	}
	d.run("layernorm_f32", dim3{uint32(rows), 1, 1}, dim3{normBlock(n), 1, 1}, 0,
		d.ptr(dst), d.ptr(x), d.ptr(w), d.ptr(b), i32(n), i32(stride), eps)
}

// ropeArgs returns the host-computed constants of r: θ scale and the YaRN
// magnitude factor, computed in float32 as backend/cpu.RopeTable does.
func ropeArgs(r *backend.Rope) (thetaScale, mscaleExt float32) {
	thetaScale = float32(math.Pow(float64(r.Base), -2/float64(r.Dims)))
	mscaleExt = 1 + 0.1*float32(math.Log(float64(1/r.FreqScale)))
	return
}

// Rope rotates heads of rows of x by positions pos0 ….
func (d *Device) Rope(x backend.Buffer, rows, heads, stride, off, pos0 int, r backend.Rope) {
	if rows == 0 || heads == 0 || r.Dims == 0 {
		return
	}
	if x.Len() < ((rows-1)*heads+heads-1)*stride+off+r.Dims {
		panic(fmt.Sprintf("%s: Rope of %d rows × %d heads (stride %d, off %d, dims %d) over %d values",
			d.Name(), rows, heads, stride, off, r.Dims, x.Len()))
	}
	ts, ms := ropeArgs(&r)
	d.run("rope_f32", dim3{uint32(rows), 1, 1}, dim3{64, 1, 1}, 0,
		d.ptr(x), i32(heads), i32(stride), i32(off), i32(pos0), i32(r.Dims), ts, r.FreqScale, r.ExtFactor,
		r.AttnFactor, ms, r.CorrDims[0], r.CorrDims[1])
}

func sameLen(op string, d *Device, a, b backend.Buffer) int {
	if a.Len() != b.Len() {
		panic(fmt.Sprintf("%s: %s of %d values and %d", d.Name(), op, a.Len(), b.Len()))
	}
	return a.Len()
}

// Add adds x to y.
func (d *Device) Add(y, x backend.Buffer) {
	n := sameLen("Add", d, y, x)
	d.elementwise("add_f32", n, d.ptr(y), d.ptr(x), i32(n))
}

// Scale multiplies x by a.
func (d *Device) Scale(x backend.Buffer, a float32) {
	d.elementwise("scale_f32", x.Len(), d.ptr(x), a, i32(x.Len()))
}

// Copy copies src to dst; into a KV cache of another type it converts as
// tensor.Quantize does.
func (d *Device) Copy(dst, src backend.Buffer) {
	n := sameLen("Copy", d, dst, src)
	if p, ty := d.cachePtr(dst); ty != int32(tensor.F32) {
		units := n
		if tensor.Type(ty) == tensor.Q8_0 {
			units = n / 32 // one thread per block
		}
		d.elementwise("cache_store_f32", units, p, d.ptr(src), ty, i32(n))
		return
	}
	d.elementwise("copy_f32", n, d.ptr(dst), d.ptr(src), i32(n))
}

// SwiGLU writes silu(gate)·up to dst.
func (d *Device) SwiGLU(dst, gate, up backend.Buffer) {
	n := sameLen("SwiGLU", d, dst, gate)
	sameLen("SwiGLU", d, dst, up)
	d.elementwise("swiglu_f32", n, d.ptr(dst), d.ptr(gate), d.ptr(up), i32(n))
}

// fill sets n values at p to v.
func (d *Device) fill(p uint64, v float32, n int) {
	d.elementwise("fill_f32", n, p, v, i32(n))
}

// Softmax replaces each of rows rows of n values (row r at r·stride) by
// its softmax. It is not part of backend.Device; tests and future fused
// paths use it.
func (d *Device) Softmax(x backend.Buffer, rows, n, stride int) {
	if rows == 0 {
		return
	}
	d.run("softmax_f32", dim3{uint32(rows), 1, 1}, dim3{normBlock(n), 1, 1}, 0, d.ptr(x), i32(n), i32(stride))
}

// IndexerTopK selects each query's best keys (docs/MATH.md section 6).
func (d *Device) IndexerTopK(sel backend.IDs, q, w, keys backend.Buffer, T, pos0 int, p backend.IndexerParams) {
	if T == 0 {
		return
	}
	nKV := pos0 + T
	if sel.Len() < T*p.TopK || q.Len() < T*p.Heads*p.Dim || w.Len() < T*p.Heads || keys.Len() < nKV*p.Dim {
		panic(fmt.Sprintf("%s: IndexerTopK: shapes do not match T=%d pos0=%d %+v", d.Name(), T, pos0, p))
	}
	B := min(T, indexQueryBlock)
	score := d.scratchF32("indexer.score", B*nKV)
	kp, kty := d.cachePtr(keys)
	qp, wp, sp := d.ptr(q), d.ptr(w), d.idsPtr(sel)
	for t0 := 0; t0 < T; t0 += B {
		b, p0 := min(B, T-t0), pos0+t0
		d.run("indexer_scores_f32", dim3{cdiv(p0+b, 128), uint32(b), 1}, dim3{128, 1, 1}, 0,
			score.ptr, qp+uint64(4*t0*p.Heads*p.Dim), wp+uint64(4*t0*p.Heads), kp, kty,
			i32(p.Heads), i32(p.Dim), i32(p0), i32(nKV))
		d.run("topk_rows_i32", dim3{uint32(b), 1, 1}, dim3{256, 1, 1}, 0,
			sp+uint64(4*t0*p.TopK), score.ptr, i32(nKV), i32(p0), i32(p.TopK))
	}
}

// indexQueryBlock is the most queries whose indexer scores exist at once:
// a prompt's queries are scored and ranked a block at a time, so the
// scores take [64, keys] floats, not [T, keys].
const indexQueryBlock = 64

// AttentionPrefill is MLA over the T queries of a prompt. It takes the
// absorbed form, as AttentionDecode does (llama.cpp's for prompts too):
// the decompressed form's per-key k_nope and v ([nKV, H, dn+dv] floats)
// and a score matrix would grow with the context, where the absorbed
// form's online softmax holds only the queries' [T, H, kr] values.
func (d *Device) AttentionPrefill(kqv, q, latent backend.Buffer, kb, vb backend.Weight, sel backend.IDs, T, pos0 int, p backend.MLAParams) {
	d.attendAbsorbed("AttentionPrefill", kqv, q, latent, kb, vb, sel, T, pos0, p)
}

// AttentionDecode is MLA in the absorbed form (docs/MATH.md 3.3).
func (d *Device) AttentionDecode(kqv, q, latent backend.Buffer, kb, vb backend.Weight, sel backend.IDs, T, pos0 int, p backend.MLAParams) {
	d.attendAbsorbed("AttentionDecode", kqv, q, latent, kb, vb, sel, T, pos0, p)
}

// attnThreads is the block size of mla_attend_f32: the keys of one tile of
// its online softmax.
const attnThreads = 128

// attnBlocks is how many blocks of mla_attend_f32 a step should have at
// least to fill a GPU (two per SM of an H100 or H200): a decode step
// with fewer query and head groups splits its keys over more blocks.
const attnBlocks = 256

// attnShared is the dynamic shared memory a block of mla_attend_f32 may
// take: 48 KB less the block reductions' static arrays.
const attnShared = 32 << 10

// attnHeadFloats is the dynamic shared memory, in floats, that each head
// of a block of mla_attend_f32 takes: its q̃ ‖ q_pe (kr+dr), its kr
// accumulators and one tile's weights.
func attnHeadFloats(kr, dr int) int { return 2*kr + dr + attnThreads }

// attnSplit returns mla_attend_f32's launch shape: heads per block
// (as many as fit attnShared, at most 8), and the keys per split and
// splits of a query's keys (at most nk: the context, or the selection's
// top-k) for T queries of H heads.
func attnSplit(T, H, kr, dr, nk int) (heads, split, splits int) {
	heads = max(1, min(8, H, attnShared/(4*attnHeadFloats(kr, dr))))
	blocks := T * ((H + heads - 1) / heads)
	splits = 1
	if blocks < attnBlocks {
		splits = max(1, min((attnBlocks+blocks-1)/blocks, (nk+attnThreads-1)/attnThreads))
	}
	split = (nk + splits - 1) / splits
	split = (split + attnThreads - 1) / attnThreads * attnThreads // whole tiles
	splits = max(1, (nk+split-1)/split)
	return heads, split, splits
}

// attendAbsorbed computes q̃_h = W_UK_hᵀ q_nope_h, then mla_attend_f32's
// ô_h over the latent rows as the cache stores them, then o_h = W_UV_h ô_h.
func (d *Device) attendAbsorbed(op string, kqv, q, latent backend.Buffer, kb, vb backend.Weight, sel backend.IDs, T, pos0 int, p backend.MLAParams) {
	if T == 0 {
		return
	}
	H, dn, dr, dv, kr := p.Heads, p.DNope, p.DRope, p.DV, p.KVRank
	nKV := pos0 + T
	kw, vw := d.weight(kb), d.weight(vb)
	d.checkMLA(op, kqv, q, latent, kw, vw, sel, T, nKV, p)
	// Per head, attn_k_b rows [h·kr, (h+1)·kr).
	qabs := d.scratchF32("mla.qabs", T*H*kr)
	d.mm(qabs.ptr, d.ptr(q), kw, kr, T, H*(dn+dr), H*kr, H, dn+dr, kr)
	oabs := d.scratchF32("mla.oabs", T*H*kr)
	lp, lty := d.cachePtr(latent)
	nk := nKV
	if sel != nil {
		nk = min(nk, p.TopK)
	}
	heads, split, splits := attnSplit(T, H, kr, dr, nk)
	// The splits' maxima, sums (double) and accumulators, when there are
	// several, sized for the most splits of T queries (those of the
	// longest context) wherever there may be splits, so that they do not
	// grow with the context.
	pm, pl, pacc := oabs, oabs, oabs
	if _, _, most := attnSplit(T, H, kr, dr, math.MaxInt32/2); most > 1 {
		pm = d.scratchF32("mla.pm", T*H*most)
		pl = d.scratchF32("mla.pl", 2*T*H*most)
		pacc = d.scratchF32("mla.pacc", T*H*most*kr)
	}
	shared := uint32(4 * heads * attnHeadFloats(kr, dr))
	d.run("mla_attend_f32", dim3{uint32(T), uint32((H + heads - 1) / heads), uint32(splits)}, dim3{attnThreads, 1, 1}, shared,
		oabs.ptr, pm.ptr, pl.ptr, pacc.ptr, qabs.ptr, d.ptr(q), lp, lty, d.idsPtr(sel),
		i32(H), i32(dn), i32(dr), i32(kr), i32(pos0), i32(p.TopK), p.Tau, i32(heads), i32(split))
	if splits > 1 {
		d.run("mla_combine_f32", dim3{uint32(T), uint32(H), 1}, dim3{128, 1, 1}, 0,
			oabs.ptr, pm.ptr, pl.ptr, pacc.ptr, i32(H), i32(kr), i32(splits))
	}
	d.mm(d.ptr(kqv), oabs.ptr, vw, dv, T, H*kr, H*dv, H, kr, dv)
}

func (d *Device) checkMLA(op string, kqv, q, latent backend.Buffer, kb, vb *weight, sel backend.IDs, T, nKV int, p backend.MLAParams) {
	H, dn, dr, dv, kr := p.Heads, p.DNope, p.DRope, p.DV, p.KVRank
	ok := kqv.Len() >= T*H*dv && q.Len() >= T*H*(dn+dr) && latent.Len() >= nKV*(kr+dr) &&
		kb.rows == H*kr && kb.cols == dn && vb.rows == H*dv && vb.cols == kr &&
		(sel == nil || sel.Len() >= T*p.TopK)
	if !ok {
		panic(fmt.Sprintf("%s: %s: shapes do not match T=%d nKV=%d %+v (k_b %dx%d, v_b %dx%d)",
			d.Name(), op, T, nKV, p, kb.rows, kb.cols, vb.rows, vb.cols))
	}
}

// RouterTopK turns router logits into expert ids and weights.
func (d *Device) RouterTopK(ids backend.IDs, weights, logits backend.Buffer, T int, r *backend.Router) {
	if T == 0 {
		return
	}
	X, K := r.Experts, r.Used
	groups, use := max(r.Groups, 1), r.GroupsUse
	if groups == 1 {
		use = 1
	}
	if ids.Len() < T*K || weights.Len() < T*K || logits.Len() < T*X || K > X || X%groups != 0 {
		panic(fmt.Sprintf("%s: RouterTopK: shapes do not match T=%d %+v", d.Name(), T, *r))
	}
	norm := int32(0)
	if r.NormWeights {
		norm = 1
	}
	shared := uint32(4 * (2*X + 2*groups))
	d.run("router_topk_f32", dim3{uint32(T), 1, 1}, dim3{256, 1, 1}, shared,
		d.idsPtr(ids), d.ptr(weights), d.ptr(logits), d.ptr(r.Bias), i32(X), i32(K), i32(int(r.Gating)),
		i32(groups), i32(use), norm, r.Scale)
}

// MoE runs this device's routed experts and sums each token's slots in
// routing order, on the device: moe_sort_i32 orders the routed slots by
// expert, and one mm_experts_* launch per projection runs every expert
// with rows, so the routing never comes back to the host. The experts'
// weights are addressed through a table of their device pointers
// (expertTables). ids must name distinct experts within a token, as
// RouterTopK's do: an expert gets at most T rows.
func (d *Device) MoE(dst, x backend.Buffer, T int, ids backend.IDs, weights backend.Buffer, e *backend.Experts) {
	if T == 0 || len(e.Gate) == 0 {
		if T > 0 {
			d.fill(d.ptr(dst), 0, dst.Len())
		}
		return
	}
	E := e.Gate[0].Cols()
	K := ids.Len() / T
	if dst.Len() < T*E || x.Len() < T*E || weights.Len() < T*K {
		panic(fmt.Sprintf("%s: MoE: shapes do not match T=%d E=%d K=%d", d.Name(), T, E, K))
	}
	nE, S := len(e.Gate), T*K
	tabs := d.expertTables(e)
	F := tabs.ws[0].rows
	offs := d.scratchIDs("moe.offs", nE+2)
	act := d.scratchIDs("moe.active", nE)
	slots := d.scratchIDs("moe.slotids", S)
	tokens := d.scratchIDs("moe.tokens", S)
	d.run("moe_sort_i32", dim3{1, 1, 1}, dim3{256, 1, 1}, 0,
		offs.ptr, act.ptr, slots.ptr, tokens.ptr, d.idsPtr(ids), i32(S), i32(K), i32(e.First), i32(nE))
	count := offs.ptr + uint64(4*nE) // offs[nE]: the rows of this device's experts
	in := d.scratchF32("moe.in", S*E)
	g := d.scratchF32("moe.gate", S*F)
	u := d.scratchF32("moe.up", S*F)
	out := d.scratchF32("moe.out", S*E)
	d.run("moe_gather_f32", dim3{uint32(S), 1, 1}, dim3{128, 1, 1}, 0, in.ptr, d.ptr(x), tokens.ptr, count, i32(E))
	// Grid z: at most min(nE, S) experts have rows; y: at most T rows each.
	z := uint32(min(nE, S))
	var quantized struct {
		x  uint64
		as string
	}
	product := func(dst uint64, i int, x uint64, rows, cols int) {
		w := tabs.ws[i]
		q, ok := d.fastProduct(w)
		if !ok {
			d.run("mm_experts_"+mmTypes[w.typ], dim3{uint32(rows), cdiv(T, 4), z}, dim3{mmBlock(cols), 1, 1}, 0,
				dst, tabs.ptrs[i], x, offs.ptr, act.ptr, i32(nE), i32(rows), i32(cols), i32(w.rowBytes), w.scale)
			return
		}
		// The fast path: the S rows quantized once (gate and up share them).
		nb := cols / q.block
		xq := d.grow("moe.xq", int64(S*nb*q.bytes))
		if quantized.x != x || quantized.as != q.quantize {
			d.run(q.quantize, dim3{cdiv(nb, 128), uint32(S), 1}, dim3{128, 1, 1}, 0,
				xq.ptr, x, i32(cols), i32(cols), i32(nb*q.bytes))
			quantized.x, quantized.as = x, q.quantize
		}
		d.run(q.experts, dim3{cdiv(rows, mmvqWarps), uint32(T), z}, dim3{32 * mmvqWarps, 1, 1}, 0,
			dst, tabs.ptrs[i], xq.ptr, offs.ptr, act.ptr, i32(nE), i32(rows), i32(cols), i32(w.rowBytes), i32(nb*q.bytes))
	}
	product(g.ptr, 0, in.ptr, F, E)
	product(u.ptr, 1, in.ptr, F, E)
	d.elementwise("swiglu_f32", S*F, g.ptr, g.ptr, u.ptr, i32(S*F))
	product(out.ptr, 2, g.ptr, E, F)
	slotOut := d.scratchF32("moe.slots", S*E)
	d.fill(slotOut.ptr, 0, S*E)
	d.run("moe_scatter_f32", dim3{uint32(S), 1, 1}, dim3{128, 1, 1}, 0,
		slotOut.ptr, out.ptr, slots.ptr, d.ptr(weights), count, i32(E))
	d.run("moe_sum_f32", dim3{uint32(T), 1, 1}, dim3{128, 1, 1}, 0, d.ptr(dst), slotOut.ptr, i32(K), i32(E))
}

// expertTab is the device's table of one Experts' weights: for gate, up
// and down, the device pointers of every expert's matrix (ptrs, on the
// device) and the first expert's weight, whose type, shape and scale the
// others share.
type expertTab struct {
	ws   [3]*weight
	ptrs [3]uint64
	host [3][]uint64 // what ptrs hold, to tell a changed set of weights
	mem  [3]*mem
}

// expertTables returns e's pointer tables, uploading them on first use
// (and again if e's weights changed). Every expert's three matrices must
// share the first's type, shape and scale: one kernel runs them all.
func (d *Device) expertTables(e *backend.Experts) *expertTab {
	if d.experts == nil {
		d.experts = map[*backend.Experts]*expertTab{}
	}
	t := d.experts[e]
	if t == nil {
		t = &expertTab{}
		d.experts[e] = t
	}
	for i, ws := range [3][]backend.Weight{e.Gate, e.Up, e.Down} {
		first := d.weight(ws[0])
		ptrs := make([]uint64, len(ws))
		for j, w := range ws {
			wt := d.weight(w)
			if wt.typ != first.typ || wt.rows != first.rows || wt.cols != first.cols || wt.scale != first.scale {
				panic(fmt.Sprintf("%s: MoE: expert %d's %s (%s %dx%d) differs from expert %d's (%s %dx%d)", d.Name(),
					e.First+j, wt.name, wt.typ, wt.rows, wt.cols, e.First, first.typ, first.rows, first.cols))
			}
			ptrs[j] = wt.m.ptr
		}
		t.ws[i] = first
		if slices.Equal(ptrs, t.host[i]) {
			continue
		}
		if t.mem[i] != nil {
			d.sync()
			d.release(t.mem[i])
		}
		m, err := d.allocate(int64(8*len(ptrs)), "expert table")
		if err != nil {
			d.fail(err)
			m = &mem{}
		} else if err := d.g.htod(m.ptr, unsafe.Pointer(&ptrs[0]), int64(8*len(ptrs))); err != nil {
			d.fail(err)
		}
		t.mem[i], t.ptrs[i], t.host[i] = m, m.ptr, ptrs
	}
	return t
}
