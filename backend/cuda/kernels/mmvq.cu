// mmvq.cu: the matrix × vector products of the fast path (Config.Fast),
// as llama.cpp's mmvq: each activation row is quantized once to the
// weight's dot-product type as ggml's reference quantizer does, and the
// products are integer dot products of the quantized blocks (dp4a), each
// block's sum scaled by the two blocks' scales. Q8_0 weights.
#include "cache.h"

// quantize_q8_0_f32: block b = blockIdx.x·blockDim.x + threadIdx.x of
// row t = blockIdx.y of x [n, cols] (row stride xStride floats) to the
// Q8_0 block at dst + t·dstStride + 34·b bytes (store_q8_0: ggml's
// reference quantizer). cols is a multiple of 32.
KERNEL quantize_q8_0_f32(u8 *dst, const float *x, int cols, int xStride, int dstStride) {
	int t = blockIdx.y, b = blockIdx.x * blockDim.x + threadIdx.x;
	if (b >= cols / 32)
		return;
	store_q8_0(dst + (u64)t * dstStride + 34 * b, x + (u64)t * xStride + 32 * b);
}
GLM_REGISTER(quantize_q8_0_f32)

// load_i32_b2 reads the four bytes at p, which is 2-byte aligned (the
// quants of a 34-byte Q8_0 block), as one little-endian word: two 16-bit
// loads.
DEV int load_i32_b2(const u8 *p) {
	const u16 *h = (const u16 *)p;
	return (int)((u32)h[0] | (u32)h[1] << 16);
}

// mmvq_q8_0: warp k of the block computes weight row r = blockIdx.x·warps
// + k for activation row t = blockIdx.y: dst[t·dstStride + r] = Σ_b
// sumi_b·(dw_b·dx_b) over the row's Q8_0 blocks, sumi_b by eight dp4a over
// the int8 quants of weight and activation block b (xq: rows of Q8_0
// blocks, xqStride bytes apart). Lane l takes blocks l, l+32, …; the warp
// then adds its lanes' sums.
KERNEL mmvq_q8_0(float *dst, const u8 *w, const u8 *xq, int rows, int cols, int rowBytes, int xqStride,
                 int dstStride) {
	int lane = threadIdx.x % 32, r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, t = blockIdx.y;
	if (r >= rows)
		return; // the whole warp: r is the warp's
	const u8 *wr = w + (u64)r * rowBytes, *xr = xq + (u64)t * xqStride;
	float acc = 0;
	for (int b = lane; b < cols / 32; b += 32) {
		const u8 *wb = wr + 34 * b, *xb = xr + 34 * b;
		int s = 0;
		UNROLL
		for (int k = 0; k < 8; k++)
			s = dp4a(load_i32_b2(wb + 2 + 4 * k), load_i32_b2(xb + 2 + 4 * k), s);
		acc += (float)s * (load_half(wb) * load_half(xb));
	}
	acc = warp_sum(acc);
	if (lane == 0)
		dst[(u64)t * dstStride + r] = acc;
}
GLM_REGISTER(mmvq_q8_0)
