// router.cu: MoE routing (docs/MATH.md section 7): gating, selection bias,
// group limit, top-k and weight normalization for one token per block.
#include "prelude.h"

// log1p_d is log(1+u) accurate for small u.
DEV double log1p_d(double u) {
	double v = 1 + u;
	if (v == 1)
		return u;
	return glm_log(v) * u / (v - 1);
}

// rank_desc returns how many of v[0 … n) come before v[i] in a stable
// descending sort: larger values, and equal values at lower indices.
DEV int rank_desc(const float *v, int n, int i) {
	float x = v[i];
	int r = 0;
	for (int j = 0; j < n; j++)
		r += (v[j] > x) | ((v[j] == x) & (j < i));
	return r;
}

// router_topk_f32: token t = blockIdx.x of logits [T, X] gets ids [t, K]
// (routing order: best first) and weights [t, K]. gating is GGUF's
// expert_gating_func (1 softmax, 2 sigmoid, 4 sqrt-softplus); bias may be
// null; groups > 1 keeps the groupsUse groups with the best sum of their
// two best scores; norm divides the weights by their sum (at least
// 2^-14); scale ≠ 0, 1 multiplies them. Dynamic shared memory: 2X +
// 2·groups floats.
KERNEL router_topk_f32(int *ids, float *weights, const float *logits, const float *bias, int X, int K, int gating,
                       int groups, int groupsUse, int norm, float scale) {
	DYN_SHARED(float, sm);
	float *p = sm, *sel = sm + X, *gs = sm + 2 * X;
	int t = blockIdx.x;
	const float *z = logits + (u64)t * X;
	for (int i = threadIdx.x; i < X; i += blockDim.x) {
		float v = z[i];
		if (gating == 1)
			p[i] = v;
		else if (gating == 2)
			p[i] = sigmoidf_(v);
		else
			p[i] = (float)glm_sqrt(v > 20 ? (double)v : log1p_d(glm_exp((double)v)));
	}
	__syncthreads();
	if (gating == 1)
		softmax_block(p, X);
	for (int i = threadIdx.x; i < X; i += blockDim.x)
		sel[i] = bias ? p[i] + bias[i] : p[i];
	__syncthreads();
	if (groups > 1) {
		int per = X / groups;
		float ninf = bits_to_float(0xff800000u);
		for (int g = threadIdx.x; g < groups; g += blockDim.x) {
			float b1 = ninf, b2 = ninf;
			for (int i = g * per; i < (g + 1) * per; i++) {
				float v = sel[i];
				if (v > b1)
					b2 = b1, b1 = v;
				else if (v > b2)
					b2 = v;
			}
			if (per == 1)
				b2 = 0;
			gs[g] = b1 + b2;
		}
		__syncthreads();
		// Decide every group before masking any.
		for (int g = threadIdx.x; g < groups; g += blockDim.x)
			gs[groups + g] = rank_desc(gs, groups, g) >= groupsUse ? 1.0f : 0.0f;
		__syncthreads();
		for (int g = threadIdx.x; g < groups; g += blockDim.x)
			if (gs[groups + g] != 0)
				for (int i = g * per; i < (g + 1) * per; i++)
					sel[i] = ninf;
		__syncthreads();
	}
	for (int i = threadIdx.x; i < X; i += blockDim.x) {
		int r = rank_desc(sel, X, i);
		if (r < K) {
			ids[(u64)t * K + r] = i;
			weights[(u64)t * K + r] = p[i];
		}
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		float *w = weights + (u64)t * K;
		float sum = 0;
		for (int j = 0; j < K; j++)
			sum += w[j];
		if (norm) {
			sum = fmaxf_(sum, 6.103515625e-5f);
			for (int j = 0; j < K; j++)
				w[j] /= sum;
		}
		if (scale != 0 && scale != 1)
			for (int j = 0; j < K; j++)
				w[j] *= scale;
	}
}
GLM_REGISTER(router_topk_f32)
