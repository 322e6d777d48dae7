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

// score_key is backend/cpu's scoreKey as an unsigned order: every NaN
// lowest, −0 as +0, the other floats by value.
DEV u32 score_key(float s) {
	u32 b = float_bits(s);
	if ((b & 0x7fffffffu) > 0x7f800000u)
		return 0; // NaN
	if ((b & 0x7fffffffu) == 0)
		b = 0; // −0 → +0
	if (b & 0x80000000u)
		b ^= 0x7fffffffu; // negative: larger bit patterns are smaller numbers
	return b ^ 0x80000000u;
}

// topk_rows_i32: row t = blockIdx.x of sel [T, K] receives the K best of
// score[t, 0 … n) (n = pos0+t+1; ties: lower index first) in ascending
// index order, or 0 … n−1 then −1 when n ≤ K, as backend/cpu's topK. A
// radix select finds the K-th largest key eight bits a pass from the top
// (thread b of the 256 counts the keys under the prefix whose next digit
// is b), so a row costs four passes over its scores, not n² comparisons;
// then chunks of 256 keys are scanned in index order and each chosen key
// is written at the count of chosen keys before it: every key above the
// K-th, and the first keys equal to it. No scratch beyond shared memory.
// blockDim.x is 256.
KERNEL topk_rows_i32(int *sel, const float *score, int nKV, int pos0, int K) {
	SHARED u32 cnt[256];
	SHARED u32 pick[2];
	SHARED int scan[2][256];
	int t = blockIdx.x, n = pos0 + t + 1, tid = threadIdx.x;
	int *out = sel + (u64)t * K;
	if (n <= K) {
		for (int i = tid; i < K; i += blockDim.x)
			out[i] = i < n ? i : -1;
		return;
	}
	const float *row = score + (u64)t * nKV;
	u32 prefix = 0, mask = 0;
	int need = K; // keys still to take under the prefix, from the top
	for (int shift = 24; shift >= 0; shift -= 8) {
		u32 c = 0;
		for (int i = 0; i < n; i++) {
			u32 k = score_key(row[i]);
			c += (k & mask) == prefix && ((k >> shift) & 255u) == (u32)tid;
		}
		cnt[tid] = c;
		__syncthreads();
		if (tid == 0) {
			u32 above = 0;
			int d = 255;
			for (; d > 0 && above + cnt[d] < (u32)need; d--)
				above += cnt[d];
			pick[0] = prefix | (u32)d << shift;
			pick[1] = (u32)need - above;
		}
		__syncthreads();
		prefix = pick[0];
		need = (int)pick[1];
		mask |= 255u << shift;
		__syncthreads(); // cnt and pick are rewritten by the next pass
	}
	// prefix is the K-th largest key; need keys equal to it are taken.
	int gtSeen = 0, eqSeen = 0;
	for (int c0 = 0; c0 < n; c0 += 256) {
		int i = c0 + tid;
		u32 k = i < n ? score_key(row[i]) : 0;
		int gt = i < n && k > prefix, eq = i < n && k == prefix;
		scan[0][tid] = gt;
		scan[1][tid] = eq;
		__syncthreads();
		for (int off = 1; off < 256; off <<= 1) {
			int a = tid >= off ? scan[0][tid - off] : 0, b = tid >= off ? scan[1][tid - off] : 0;
			__syncthreads();
			scan[0][tid] += a;
			scan[1][tid] += b;
			__syncthreads();
		}
		int gtBefore = gtSeen + scan[0][tid] - gt, eqBefore = eqSeen + scan[1][tid] - eq;
		if (gt || (eq && eqBefore < need))
			out[gtBefore + (eqBefore < need ? eqBefore : need)] = i;
		gtSeen += scan[0][255];
		eqSeen += scan[1][255];
		__syncthreads(); // scan is rewritten by the next chunk
	}
}
GLM_REGISTER(topk_rows_i32)
