// moe.cu: expert dispatch helpers: gather the rows routed to one expert,
// scatter its weighted outputs to their (token, slot) places, and sum the
// slots of every token in routing order.
#include "prelude.h"

// gather_rows_f32: dst[b] = src[idx[b]] for row b = blockIdx.x of cols values.
KERNEL gather_rows_f32(float *dst, const float *src, const int *idx, int cols) {
	const float *s = src + (u64)idx[blockIdx.x] * cols;
	float *d = dst + (u64)blockIdx.x * cols;
	for (int k = threadIdx.x; k < cols; k += blockDim.x)
		d[k] = s[k];
}
GLM_REGISTER(gather_rows_f32)

// moe_scatter_f32: slotOut[slots[b]] = out[b]·weights[slots[b]] for row b.
KERNEL moe_scatter_f32(float *slotOut, const float *out, const int *slots, const float *weights, int cols) {
	int slot = slots[blockIdx.x];
	float wt = weights[slot];
	const float *s = out + (u64)blockIdx.x * cols;
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
