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

// mla_attend_f32: the absorbed form (docs/MATH.md 3.3) for prefill and
// decode alike, with an online softmax: query t = blockIdx.x, head h =
// blockIdx.y takes its keys in tiles of blockDim.x (a power of two), one
// key a thread, scores them τ·(q̃·c + q_pe·k_pe) over the latent rows
// (stored as cache type lty, read in place), and keeps a running maximum
// m and sum l (in double, as the CPU's softmax sums): each tile rescales
// the accumulated Σ e·c by exp(m_old − m_new) before adding its own. The
// output oabs [T, H, kr] is Σ e·c / l. No score buffer: a block holds
// q̃ ‖ q_pe, the kr accumulators and one tile's weights in dynamic shared
// memory (2·kr + dr + blockDim.x floats) whatever the context length.
// qabs is [T, H, kr], q [T, H, dn+dr]; sel is null or [T, topk].
KERNEL mla_attend_f32(float *oabs, const float *qabs, const float *q, const u8 *lat, int lty, const int *sel,
                      int H, int dn, int dr, int kr, int pos0, int topk, float tau) {
	DYN_SHARED(float, sm);
	int t = blockIdx.x, h = blockIdx.y, w = kr + dr, nt = blockDim.x;
	float *qs = sm, *acc = sm + w, *e = sm + w + kr;
	const int *keys = sel ? sel + (u64)t * topk : 0;
	int nk = key_count(keys, topk, pos0 + t + 1);
	const float *qa = qabs + ((u64)t * H + h) * kr;
	const float *qpe = q + ((u64)t * H + h) * (dn + dr) + dn;
	for (int i = threadIdx.x; i < kr; i += nt) {
		qs[i] = qa[i];
		acc[i] = 0;
	}
	for (int i = threadIdx.x; i < dr; i += nt)
		qs[kr + i] = qpe[i];
	__syncthreads();
	float neg_inf = bits_to_float(0xff800000u), m = neg_inf;
	double l = 0;
	for (int k0 = 0; k0 < nk; k0 += nt) {
		int n = nk - k0 < nt ? nk - k0 : nt;
		float s = neg_inf;
		if ((int)threadIdx.x < n) {
			int p = keys ? keys[k0 + threadIdx.x] : k0 + threadIdx.x;
			u64 row = (u64)p * w;
			s = tau * (dot4_cache(qs, lat, lty, row, kr) + dot4_cache(qs + kr, lat, lty, row + kr, dr));
		}
		float mn = fmaxf_(m, block_max_f(s));
		float alpha = k0 == 0 ? 0.0f : expf_(m - mn);
		float x = (int)threadIdx.x < n ? expf_(s - mn) : 0.0f;
		e[threadIdx.x] = x;
		l = l * (double)alpha + block_sum_d((double)x);
		m = mn;
		for (int j = threadIdx.x; j < kr; j += nt) {
			float o = acc[j] * alpha;
			for (int i = 0; i < n; i++) {
				int p = keys ? keys[k0 + i] : k0 + i;
				o += e[i] * cache_at(lat, lty, (u64)p * w + j);
			}
			acc[j] = o;
		}
		__syncthreads(); // the next tile overwrites e
	}
	float inv = (float)(1.0 / l);
	for (int j = threadIdx.x; j < kr; j += nt)
		oabs[((u64)t * H + h) * kr + j] = acc[j] * inv;
}
GLM_REGISTER(mla_attend_f32)
