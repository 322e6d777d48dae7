// mla.cu: multi-head latent attention (docs/MATH.md section 3.3) over the
// latent cache rows [c ‖ k_pe] (width kr+dr). The projections through
// attn_k_b / attn_v_b are mm_* launches; this kernel does the part
// between them. The score dot products run in the CPU backend's order.
#include "cache.h"

// key_count returns how many keys query t sees: the entries of its
// selection row before the first −1, or n without a selection.
DEV int key_count(const int *keys, int topk, int n) {
	if (!keys)
		return n;
	int c = 0;
	while (c < topk && keys[c] >= 0)
		c++;
	return c;
}

// MLA_MAX_HEADS is the most heads one block of mla_attend_f32 serves.
#define MLA_MAX_HEADS 8

// mla_attend_f32: the absorbed form (docs/MATH.md 3.3) for prefill and
// decode alike, with an online softmax, flash-decoding style: query t =
// blockIdx.x, heads [G·blockIdx.y, +G) (G = heads ≤ MLA_MAX_HEADS), keys
// [split·blockIdx.z, +split) of the query's. The block takes its keys in
// tiles of blockDim.x (a power of two), one key a thread, scores it for
// each of its heads τ·(q̃·c + q_pe·k_pe) over the latent row (stored as
// cache type lty, read in place), and keeps per head a running maximum m
// and sum l (in double, as the CPU's softmax sums): each tile rescales
// the accumulated Σ e·c by exp(m_old − m_new) before adding its own. A
// latent row is thus read once per block for all its heads, not once per
// head, and a long context is spread over gridDim.z blocks per query and
// head group. With one split the output oabs [T, H, kr] is Σ e·c / l;
// with several, each writes its m, l and Σ e·c to pm, pl [T, H, splits]
// and pacc [T, H, splits, kr] for mla_combine_f32. No score buffer: a
// block holds its heads' q̃ ‖ q_pe, kr accumulators and one tile's
// weights in dynamic shared memory (G·(2·kr + dr + blockDim.x) floats)
// whatever the context length. qabs is [T, H, kr], q [T, H, dn+dr]; sel
// is null or [T, topk].
KERNEL mla_attend_f32(float *oabs, float *pm, double *pl, float *pacc, const float *qabs, const float *q,
                      const u8 *lat, int lty, const int *sel, int H, int dn, int dr, int kr, int pos0, int topk,
                      float tau, int heads, int split) {
	DYN_SHARED(float, sm);
	int t = blockIdx.x, h0 = blockIdx.y * heads, w = kr + dr, nt = blockDim.x;
	int G = H - h0 < heads ? H - h0 : heads;
	float *qs = sm, *acc = sm + heads * w, *e = sm + heads * (w + kr);
	const int *keys = sel ? sel + (u64)t * topk : 0;
	int nk = key_count(keys, topk, pos0 + t + 1);
	int kbeg = (int)blockIdx.z * split, kend = kbeg + split < nk ? kbeg + split : nk;
	for (int g = 0; g < G; g++) {
		const float *qa = qabs + ((u64)t * H + h0 + g) * kr;
		const float *qpe = q + ((u64)t * H + h0 + g) * (dn + dr) + dn;
		for (int i = threadIdx.x; i < kr; i += nt) {
			qs[g * w + i] = qa[i];
			acc[g * kr + i] = 0;
		}
		for (int i = threadIdx.x; i < dr; i += nt)
			qs[g * w + kr + i] = qpe[i];
	}
	__syncthreads();
	// The per-head state is indexed by unrolled loops with constant
	// bounds (g < MLA_MAX_HEADS, work only for g < G), so that it stays
	// in registers.
	float neg_inf = bits_to_float(0xff800000u), m[MLA_MAX_HEADS], alpha[MLA_MAX_HEADS];
	double l[MLA_MAX_HEADS];
	UNROLL
	for (int g = 0; g < MLA_MAX_HEADS; g++) {
		m[g] = neg_inf;
		l[g] = 0;
		alpha[g] = 0;
	}
	for (int k0 = kbeg; k0 < kend; k0 += nt) {
		int n = kend - k0 < nt ? kend - k0 : nt;
		int p = 0;
		if ((int)threadIdx.x < n)
			p = keys ? keys[k0 + threadIdx.x] : k0 + threadIdx.x;
		UNROLL
		for (int g = 0; g < MLA_MAX_HEADS; g++) {
			if (g >= G)
				break;
			float s = neg_inf;
			if ((int)threadIdx.x < n) {
				u64 row = (u64)p * w;
				s = tau * (dot4_cache(qs + g * w, lat, lty, row, kr) + dot4_cache(qs + g * w + kr, lat, lty, row + kr, dr));
			}
			float mn = fmaxf_(m[g], block_max_f(s));
			alpha[g] = k0 == kbeg ? 0.0f : expf_(m[g] - mn);
			float x = (int)threadIdx.x < n ? expf_(s - mn) : 0.0f;
			e[g * nt + threadIdx.x] = x;
			l[g] = l[g] * (double)alpha[g] + block_sum_d((double)x);
			m[g] = mn;
		}
		__syncthreads(); // every head's weights of the tile are in e
		for (int j = threadIdx.x; j < kr; j += nt) {
			float o[MLA_MAX_HEADS];
			UNROLL
			for (int g = 0; g < MLA_MAX_HEADS; g++)
				o[g] = g < G ? acc[g * kr + j] * alpha[g] : 0.0f;
			for (int i = 0; i < n; i++) {
				int pi = keys ? keys[k0 + i] : k0 + i;
				float c = cache_at(lat, lty, (u64)pi * w + j);
				UNROLL
				for (int g = 0; g < MLA_MAX_HEADS; g++)
					if (g < G)
						o[g] += e[g * nt + i] * c;
			}
			UNROLL
			for (int g = 0; g < MLA_MAX_HEADS; g++)
				if (g < G)
					acc[g * kr + j] = o[g];
		}
		__syncthreads(); // the next tile overwrites e
	}
	int S = gridDim.z;
	UNROLL
	for (int g = 0; g < MLA_MAX_HEADS; g++) {
		if (g >= G)
			break;
		u64 th = (u64)t * H + h0 + g;
		if (S == 1) {
			float inv = (float)(1.0 / l[g]);
			for (int j = threadIdx.x; j < kr; j += nt)
				oabs[th * kr + j] = acc[g * kr + j] * inv;
			continue;
		}
		u64 ps = th * S + blockIdx.z;
		if (threadIdx.x == 0) {
			pm[ps] = m[g];
			pl[ps] = l[g];
		}
		for (int j = threadIdx.x; j < kr; j += nt)
			pacc[ps * kr + j] = acc[g * kr + j];
	}
}
GLM_REGISTER(mla_attend_f32)

// mla_combine_f32 merges mla_attend_f32's splits of query t = blockIdx.x,
// head h = blockIdx.y: with M the largest split maximum, l = Σ_s l_s ·
// exp(m_s − M) (in double) and oabs = Σ_s acc_s · exp(m_s − M) / l, the
// splits taken in order. A split with no keys has m = −∞ and l = 0.
KERNEL mla_combine_f32(float *oabs, const float *pm, const double *pl, const float *pacc, int H, int kr, int S) {
	int t = blockIdx.x, h = blockIdx.y;
	u64 th = (u64)t * H + h;
	float M = bits_to_float(0xff800000u);
	for (int s = 0; s < S; s++)
		if (pl[th * S + s] > 0)
			M = fmaxf_(M, pm[th * S + s]);
	double l = 0;
	for (int s = 0; s < S; s++)
		if (pl[th * S + s] > 0)
			l += pl[th * S + s] * (double)expf_(pm[th * S + s] - M);
	float inv = (float)(1.0 / l);
	for (int j = threadIdx.x; j < kr; j += blockDim.x) {
		float o = 0;
		for (int s = 0; s < S; s++)
			if (pl[th * S + s] > 0)
				o += pacc[(th * S + s) * kr + j] * expf_(pm[th * S + s] - M);
		oabs[th * kr + j] = o * inv;
	}
}
GLM_REGISTER(mla_combine_f32)
