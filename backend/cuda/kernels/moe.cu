// moe.cu: expert dispatch on the device: sort the routed slots by expert,
// gather their rows, scatter the experts' weighted outputs to their (token,
// slot) places, and sum the slots of every token in routing order. The
// products between are mm_experts_* launches, one for all experts.
#include "prelude.h"

// moe_sort_i32: of the S = T·K routed slots (route: global expert ids,
// slot i of token i/K), those of the nE experts [first, first+nE) this
// device holds, ordered by expert and within an expert by slot: local
// expert j's are places offs[j] … offs[j+1] of slots (the slot) and tokens
// (its token); offs[nE] is how many there are. act[0 … offs[nE+1]) lists
// the local experts with slots, in order. One block: thread j counts and
// then places expert j's slots (and j + blockDim.x's, …).
KERNEL moe_sort_i32(int *offs, int *act, int *slots, int *tokens, const int *route, int S, int K, int first,
                    int nE) {
	for (int j = threadIdx.x; j < nE; j += blockDim.x) {
		int c = 0;
		for (int i = 0; i < S; i++)
			c += route[i] == first + j;
		offs[j + 1] = c;
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		int n = 0;
		offs[0] = 0;
		for (int j = 0; j < nE; j++) {
			if (offs[j + 1] > 0)
				act[n++] = j;
			offs[j + 1] += offs[j];
		}
		offs[nE + 1] = n;
	}
	__syncthreads();
	for (int j = threadIdx.x; j < nE; j += blockDim.x) {
		int p = offs[j];
		for (int i = 0; i < S; i++)
			if (route[i] == first + j) {
				slots[p] = i;
				tokens[p] = i / K;
				p++;
			}
	}
}
GLM_REGISTER(moe_sort_i32)

// moe_gather_f32: dst[b] = src[tokens[b]] for row b = blockIdx.x of cols
// values, b < *count (blocks past it return).
KERNEL moe_gather_f32(float *dst, const float *src, const int *tokens, const int *count, int cols) {
	int b = blockIdx.x;
	if (b >= *count)
		return;
	const float *s = src + (u64)tokens[b] * cols;
	float *d = dst + (u64)b * cols;
	for (int k = threadIdx.x; k < cols; k += blockDim.x)
		d[k] = s[k];
}
GLM_REGISTER(moe_gather_f32)

// moe_scatter_f32: slotOut[slots[b]] = out[b]·weights[slots[b]] for row
// b = blockIdx.x < *count.
KERNEL moe_scatter_f32(float *slotOut, const float *out, const int *slots, const float *weights, const int *count,
                       int cols) {
	int b = blockIdx.x;
	if (b >= *count)
		return;
	int slot = slots[b];
	float wt = weights[slot];
	const float *s = out + (u64)b * cols;
	float *d = slotOut + (u64)slot * cols;
	for (int k = threadIdx.x; k < cols; k += blockDim.x)
		d[k] = s[k] * wt;
}
GLM_REGISTER(moe_scatter_f32)

// moe_sum_f32: dst[t] = ((slotOut[t,0] + slotOut[t,1]) + …) over K slots
// for token t = blockIdx.x.
KERNEL moe_sum_f32(float *dst, const float *slotOut, int K, int cols) {
	int t = blockIdx.x;
	for (int k = threadIdx.x; k < cols; k += blockDim.x) {
		float s = slotOut[(u64)t * K * cols + k];
		for (int j = 1; j < K; j++)
			s += slotOut[((u64)t * K + j) * cols + k];
		dst[(u64)t * cols + k] = s;
	}
}
GLM_REGISTER(moe_sum_f32)
