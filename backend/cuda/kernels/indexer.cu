// indexer.cu: the DSA lightning indexer's scores and top-k selection
// (docs/MATH.md section 6).
#include "cache.h"

// indexer_scores_f32: score[t, p] = Σ_h w[t, h]·max(0, q[t, h]·k[p]) for
// query t = blockIdx.y and key p ≤ pos0 + t (p from blockIdx.x, threadIdx.x);
// q [T, Ih, Id], w [T, Ih], keys [nKV, Id] stored as cache type kty,
// score [T, nKV]. The dots and the sum run in the CPU's order, so scores
// match it bit for bit.
KERNEL indexer_scores_f32(float *score, const float *q, const float *w, const u8 *keys, int kty, int Ih, int Id,
                          int pos0, int nKV) {
	int t = blockIdx.y, p = blockIdx.x * blockDim.x + threadIdx.x;
	if (p > pos0 + t || p >= nKV)
		return;
	float sum = 0;
	for (int h = 0; h < Ih; h++) {
		float d = dot4_cache(q + ((u64)t * Ih + h) * Id, keys, kty, (u64)p * Id, Id);
		if (d > 0)
			sum += w[(u64)t * Ih + h] * d;
	}
	score[(u64)t * nKV + p] = sum;
}
GLM_REGISTER(indexer_scores_f32)

// topk_rows_i32: row t = blockIdx.x of sel [T, K] receives the K best of
// score[t, 0 … n) (n = pos0+t+1; ties: lower index) in ascending index
// order, or 0 … n−1 then −1 when n ≤ K. rank [T, nKV] is scratch.
KERNEL topk_rows_i32(int *sel, int *rank, const float *score, int nKV, int pos0, int K) {
	int t = blockIdx.x, n = pos0 + t + 1;
	int *out = sel + (u64)t * K;
	if (n <= K) {
		for (int i = threadIdx.x; i < K; i += blockDim.x)
			out[i] = i < n ? i : -1;
		return;
	}
	const float *row = score + (u64)t * nKV;
	int *rk = rank + (u64)t * nKV;
	for (int i = threadIdx.x; i < n; i += blockDim.x) {
		float x = row[i];
		int r = 0;
		for (int j = 0; j < n; j++)
			r += (row[j] > x) | ((row[j] == x) & (j < i));
		rk[i] = r;
	}
	__syncthreads();
	for (int i = threadIdx.x; i < n; i += blockDim.x) {
		if (rk[i] >= K)
			continue;
		int pos = 0;
		for (int j = 0; j < i; j++)
			pos += rk[j] < K;
		out[pos] = i;
	}
}
GLM_REGISTER(topk_rows_i32)
