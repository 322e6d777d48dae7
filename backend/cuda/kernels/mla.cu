// mla.cu: multi-head latent attention (docs/MATH.md sections 3.2, 3.3)
// over the latent cache rows [c ‖ k_pe] (width kr+dr). The projections
// through attn_k_b / attn_v_b are mm_* launches; these kernels do the
// parts between them. Scores, softmax and the weighted sums run in the
// CPU backend's order.
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

// mla_knope_f32 (prefill): knope[s, h, j] = Σ_i c_s[i]·kb[h·kr+i, j] for
// key s = blockIdx.x, head h = blockIdx.y; kb is attn_k_b dequantized
// [H·kr, dn], lat the cache rows.
KERNEL mla_knope_f32(float *knope, const float *lat, const float *kb, int H, int kr, int dr, int dn) {
	int s = blockIdx.x, h = blockIdx.y;
	const float *c = lat + (u64)s * (kr + dr);
	const float *w = kb + (u64)h * kr * dn;
	for (int j = threadIdx.x; j < dn; j += blockDim.x) {
		float acc = 0;
		for (int i = 0; i < kr; i++)
			acc += c[i] * w[(u64)i * dn + j];
		knope[((u64)s * H + h) * dn + j] = acc;
	}
}
GLM_REGISTER(mla_knope_f32)

// mla_prefill_f32: query t = blockIdx.x, head h = blockIdx.y attends to
// its keys with scores τ·(q_nope·k_nope + q_pe·k_pe) and writes Σ a·v to
// kqv [T, H·dv]. q [T, H, dn+dr], knope [nKV, H, dn], vals [nKV, H·dv];
// sel is null or [T, topk]; scores [T, H, nKV] is scratch.
KERNEL mla_prefill_f32(float *kqv, float *scores, const float *q, const float *knope, const float *lat,
                       const float *vals, const int *sel, int H, int dn, int dr, int dv, int kr, int pos0, int nKV,
                       int topk, float tau) {
	int t = blockIdx.x, h = blockIdx.y, w = kr + dr;
	const int *keys = sel ? sel + (u64)t * topk : 0;
	int nk = key_count(keys, topk, pos0 + t + 1);
	float *sc = scores + ((u64)t * H + h) * nKV;
	const float *qv = q + ((u64)t * H + h) * (dn + dr);
	for (int i = threadIdx.x; i < nk; i += blockDim.x) {
		int p = keys ? keys[i] : i;
		sc[i] = tau * (dot4(qv, knope + ((u64)p * H + h) * dn, dn) + dot4(qv + dn, lat + (u64)p * w + kr, dr));
	}
	__syncthreads();
	softmax_block(sc, nk);
	for (int j = threadIdx.x; j < dv; j += blockDim.x) {
		float o = 0;
		for (int i = 0; i < nk; i++) {
			int p = keys ? keys[i] : i;
			o += sc[i] * vals[((u64)p * H + h) * dv + j];
		}
		kqv[((u64)t * H + h) * dv + j] = o;
	}
}
GLM_REGISTER(mla_prefill_f32)

// mla_decode_f32: the absorbed form: query t, head h scores the latent
// rows (stored as cache type lty) with τ·(q̃·c + q_pe·k_pe), q̃ = qabs
// [T, H, kr], and writes Σ a·c to oabs [T, H, kr].
KERNEL mla_decode_f32(float *oabs, float *scores, const float *qabs, const float *q, const u8 *lat, int lty,
                      const int *sel, int H, int dn, int dr, int kr, int pos0, int nKV, int topk, float tau) {
	int t = blockIdx.x, h = blockIdx.y, w = kr + dr;
	const int *keys = sel ? sel + (u64)t * topk : 0;
	int nk = key_count(keys, topk, pos0 + t + 1);
	float *sc = scores + ((u64)t * H + h) * nKV;
	const float *qa = qabs + ((u64)t * H + h) * kr;
	const float *qpe = q + ((u64)t * H + h) * (dn + dr) + dn;
	for (int i = threadIdx.x; i < nk; i += blockDim.x) {
		int p = keys ? keys[i] : i;
		u64 row = (u64)p * w;
		sc[i] = tau * (dot4_cache(qa, lat, lty, row, kr) + dot4_cache(qpe, lat, lty, row + kr, dr));
	}
	__syncthreads();
	softmax_block(sc, nk);
	for (int j = threadIdx.x; j < kr; j += blockDim.x) {
		float o = 0;
		for (int i = 0; i < nk; i++) {
			int p = keys ? keys[i] : i;
			o += sc[i] * cache_at(lat, lty, (u64)p * w + j);
		}
		oabs[((u64)t * H + h) * kr + j] = o;
	}
}
GLM_REGISTER(mla_decode_f32)
