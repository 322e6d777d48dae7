// matmul.cu: dequantizing matrix products and row gathers for every
// weight type the models use.
#include "prelude.h"
#include "dequant.h"

#define MM_TOKENS 4 // activation rows per block (blockIdx.y)

// mm_block computes, for one weight row (its bytes at row) and the nt ≤
// MM_TOKENS activation rows x, x + xStride, …:
//
//	dst[t·dstStride] = scale' · Σ_i W[i]·x[t·xStride + i]
//
// with scale' = scale, or 1 when scale is 0. Each thread dequantizes whole
// 32-element chunks and dots them with the activation rows; the block then
// sums its partial results.
template <int T>
DEV void mm_block(float *dst, const u8 *row, const float *x, int nt, int cols, int xStride, int dstStride,
                  float scale) {
	SHARED float red[32][MM_TOKENS];
	float acc[MM_TOKENS] = {0, 0, 0, 0};
	float v[32];
	int chunks = (cols + 31) / 32;
	for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
		deq32<T>(row, c, cols, v);
		int m = imin(32, cols - 32 * c);
		UNROLL
		for (int t = 0; t < MM_TOKENS; t++) {
			if (t >= nt)
				break;
			const float *xt = x + (u64)t * xStride + 32 * c;
			float s = 0;
			UNROLL
			for (int k = 0; k < 32; k++)
				if (k < m)
					s += v[k] * xt[k];
			acc[t] += s;
		}
	}
	int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
	warp_sum_n(acc, MM_TOKENS);
	if (lane == 0) {
		UNROLL
		for (int t = 0; t < MM_TOKENS; t++)
			red[warp][t] = acc[t];
	}
	__syncthreads();
	if (threadIdx.x < (unsigned)nt) {
		int t = threadIdx.x;
		float s = 0;
		for (int i = 0; i < nw; i++)
			s += red[i][t];
		if (scale != 0)
			s *= scale;
		dst[(u64)t * dstStride] = s;
	}
}

// mm_impl computes, for head z = blockIdx.z, weight row r = z·rows +
// blockIdx.x and the activation rows t of block y (MM_TOKENS a block):
//
//	dst[z·dstHeadOff + t·dstStride + blockIdx.x] = scale' · Σ_i W[r, i]·x[z·xHeadOff + t·xStride + i]
//
// (mm_block). A plain product has one head.
template <int T>
DEV void mm_impl(float *dst, const u8 *w, const float *x, int rows, int cols, int n, int rowBytes,
                 int xStride, int dstStride, int xHeadOff, int dstHeadOff, float scale) {
	int z = blockIdx.z, t0 = blockIdx.y * MM_TOKENS;
	const u8 *row = w + (u64)(z * rows + blockIdx.x) * rowBytes;
	mm_block<T>(dst + (u64)z * dstHeadOff + (u64)t0 * dstStride + blockIdx.x, row,
	            x + (u64)z * xHeadOff + (u64)t0 * xStride, imin(MM_TOKENS, n - t0), cols, xStride, dstStride, scale);
}

// mm_experts_impl is the products of every expert with the activation
// rows routed to it, in one launch: z = blockIdx.z is the z-th expert with
// rows (act[z], of offs[nE+1] such), whose weight is at wtab[act[z]]; it
// takes rows offs[j] … offs[j+1] of x [·, cols] (moe_sort_i32's order),
// MM_TOKENS a block y, and writes dst[t·rows + blockIdx.x] for each.
// Blocks past the experts with rows, or past an expert's rows, return at
// once.
template <int T>
DEV void mm_experts_impl(float *dst, const u64 *wtab, const float *x, const int *offs, const int *act, int nE,
                         int rows, int cols, int rowBytes, float scale) {
	if ((int)blockIdx.z >= offs[nE + 1])
		return; // the whole block
	int z = act[blockIdx.z], t0 = offs[z] + blockIdx.y * MM_TOKENS, end = offs[z + 1];
	if (t0 >= end)
		return;
	const u8 *row = (const u8 *)wtab[z] + (u64)blockIdx.x * rowBytes;
	mm_block<T>(dst + (u64)t0 * rows + blockIdx.x, row, x + (u64)t0 * cols, imin(MM_TOKENS, end - t0), cols, cols,
	            rows, scale);
}

// get_rows_impl writes row ids[b] of w (row b when ids is null),
// dequantized, to dst[b·cols …] for block b.
template <int T> DEV void get_rows_impl(float *dst, const u8 *w, const int *ids, int cols, int rowBytes) {
	int r = ids ? ids[blockIdx.x] : (int)blockIdx.x;
	const u8 *row = w + (u64)r * rowBytes;
	float *out = dst + (u64)blockIdx.x * cols;
	float v[32];
	int chunks = (cols + 31) / 32;
	for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
		deq32<T>(row, c, cols, v);
		int m = imin(32, cols - 32 * c);
		UNROLL
		for (int k = 0; k < 32; k++)
			if (k < m)
				out[32 * c + k] = v[k];
	}
}

#define MM_KERNELS(suffix, T)                                                                                   \
	KERNEL mm_##suffix(float *dst, const u8 *w, const float *x, int rows, int cols, int n, int rowBytes,       \
	                   int xStride, int dstStride, int xHeadOff, int dstHeadOff, float scale) {                \
		mm_impl<T>(dst, w, x, rows, cols, n, rowBytes, xStride, dstStride, xHeadOff, dstHeadOff, scale);   \
	}                                                                                                          \
	GLM_REGISTER(mm_##suffix)                                                                                  \
	KERNEL mm_experts_##suffix(float *dst, const u64 *wtab, const float *x, const int *offs, const int *act,    \
	                           int nE, int rows, int cols, int rowBytes, float scale) {                        \
		mm_experts_impl<T>(dst, wtab, x, offs, act, nE, rows, cols, rowBytes, scale);                      \
	}                                                                                                          \
	GLM_REGISTER(mm_experts_##suffix)                                                                          \
	KERNEL get_rows_##suffix(float *dst, const u8 *w, const int *ids, int cols, int rowBytes) {               \
		get_rows_impl<T>(dst, w, ids, cols, rowBytes);                                                     \
	}                                                                                                          \
	GLM_REGISTER(get_rows_##suffix)

MM_KERNELS(f32, T_F32)
MM_KERNELS(f16, T_F16)
MM_KERNELS(bf16, T_BF16)
MM_KERNELS(q4_0, T_Q4_0)
MM_KERNELS(q4_1, T_Q4_1)
MM_KERNELS(q5_0, T_Q5_0)
MM_KERNELS(q5_1, T_Q5_1)
MM_KERNELS(q8_0, T_Q8_0)
MM_KERNELS(q4_k, T_Q4_K)
MM_KERNELS(q5_k, T_Q5_K)
MM_KERNELS(q6_k, T_Q6_K)
MM_KERNELS(iq4_xs, T_IQ4_XS)
