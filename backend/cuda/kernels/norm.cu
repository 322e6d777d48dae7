// norm.cu: RMSNorm and LayerNorm over rows, one block per row. Sums are
// kept in double, as the Go CPU kernels accumulate in float64.
#include "prelude.h"

// rms_finish ends RMSNorm of the row xr into dr, from each thread's part
// s of Σ x² (in double): the block's sum, the mean, then
// x·(1/sqrt(mean+eps))·w.
DEV void rms_finish(float *dr, const float *xr, const float *w, double s, int n, float eps) {
	s = block_sum_d(s);
	float mean = (float)(s / n);
	float scale = 1.0f / (float)glm_sqrt((double)(mean + eps));
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		dr[i] = xr[i] * scale * w[i];
}

// rmsnorm_f32: row r (blockIdx.x) of n values at r·stride:
// dst = x·(1/sqrt(mean(x²)+eps))·w. blockDim.x is a power of two.
KERNEL rmsnorm_f32(float *dst, const float *x, const float *w, int n, int stride, float eps) {
	const float *xr = x + (u64)blockIdx.x * stride;
	double s = 0;
	for (int i = threadIdx.x; i < n; i += blockDim.x) {
		float v = xr[i];
		s += (double)(v * v);
	}
	rms_finish(dst + (u64)blockIdx.x * stride, xr, w, s, n, eps);
}
GLM_REGISTER(rmsnorm_f32)

// add_rmsnorm_f32: h += delta on row r, then rmsnorm_f32 of it into dst:
// a residual add and the norm after it, with the same arithmetic as
// add_f32 then rmsnorm_f32 (each thread reads back the sums it wrote).
KERNEL add_rmsnorm_f32(float *dst, float *h, const float *delta, const float *w, int n, int stride, float eps) {
	float *hr = h + (u64)blockIdx.x * stride;
	const float *er = delta + (u64)blockIdx.x * stride;
	double s = 0;
	for (int i = threadIdx.x; i < n; i += blockDim.x) {
		float v = hr[i] + er[i];
		hr[i] = v;
		s += (double)(v * v);
	}
	rms_finish(dst + (u64)blockIdx.x * stride, hr, w, s, n, eps);
}
GLM_REGISTER(add_rmsnorm_f32)

// layernorm_f32: dst = (x − mean)·(1/sqrt(var+eps))·w + b per row.
KERNEL layernorm_f32(float *dst, const float *x, const float *w, const float *b, int n, int stride, float eps) {
	const float *xr = x + (u64)blockIdx.x * stride;
	float *dr = dst + (u64)blockIdx.x * stride;
	double s = 0;
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		s += (double)xr[i];
	s = block_sum_d(s);
	float mean = (float)(s / n);
	double s2 = 0;
	for (int i = threadIdx.x; i < n; i += blockDim.x) {
		float d = xr[i] - mean;
		s2 += (double)(d * d);
	}
	s2 = block_sum_d(s2);
	float var = (float)(s2 / n);
	float scale = 1.0f / (float)glm_sqrt((double)(var + eps));
	for (int i = threadIdx.x; i < n; i += blockDim.x) {
		float d = xr[i] - mean;
		dr[i] = d * scale * w[i] + b[i];
	}
}
GLM_REGISTER(layernorm_f32)
