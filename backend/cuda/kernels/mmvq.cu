// mmvq.cu: the matrix × vector products of the fast path (Config.Fast),
// as llama.cpp's mmvq: each activation row is quantized once to the
// weight's dot-product type as ggml's reference quantizer does, and the
// products are integer dot products of the quantized blocks (dp4a), each
// block's sum scaled by the two blocks' scales. Q8_0 weights (Q8_0
// activations), Q4_K, Q5_K, Q6_K and IQ4_XS weights (Q8_K activations):
// the types of GLM-5's UD-Q4_K_XL files.
#include "cache.h"
#include "dequant.h"

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

// dot_q8_0 is one lane's part of the dot product of the Q8_0 weight row
// wr with the Q8_0 activation row xr (cols values): lane l takes blocks l,
// l+32, …, each block's sumi by eight dp4a over the int8 quants, scaled by
// dw·dx.
DEV float dot_q8_0(const u8 *wr, const u8 *xr, int cols, int lane) {
	float acc = 0;
	for (int b = lane; b < cols / 32; b += 32) {
		const u8 *wb = wr + 34 * b, *xb = xr + 34 * b;
		int s = 0;
		UNROLL
		for (int k = 0; k < 8; k++)
			s = dp4a(load_i32_b2(wb + 2 + 4 * k), load_i32_b2(xb + 2 + 4 * k), s);
		acc += (float)s * (load_half(wb) * load_half(xb));
	}
	return acc;
}

// nearest_int is ggml's nearest_int (package tensor's nearestInt): x
// rounded to the nearest integer, ties to even, for |x| < 2²².
DEV int nearest_int(float x) {
	float v = x + 12582912.0f;
	return (int)(float_bits(v) & 0x7fffffu) - 0x400000;
}

// quantize_q8_k_f32: block b = blockIdx.x·blockDim.x + threadIdx.x of row
// t = blockIdx.y of x [n, cols] (row stride xStride floats) to the Q8_K
// block at dst + t·dstStride + 292·b bytes, as ggml's reference quantizer
// (package tensor's quantQ8K): max the value of largest magnitude (the
// first on ties), iscale = −127/max, q = min(127, nearest_int(iscale·x)),
// d = 1/iscale as float32 at byte 0, the quants from byte 4, the sums of
// each 16 quants as int16 from byte 260; an all-zero block is all zeros.
// cols is a multiple of 256.
KERNEL quantize_q8_k_f32(u8 *dst, const float *x, int cols, int xStride, int dstStride) {
	int t = blockIdx.y, b = blockIdx.x * blockDim.x + threadIdx.x;
	if (b >= cols / 256)
		return;
	const float *v = x + (u64)t * xStride + 256 * b;
	u8 *o = dst + (u64)t * dstStride + 292 * b;
	float amax = 0, vmax = 0;
	for (int j = 0; j < 256; j++) {
		float a = bits_to_float(float_bits(v[j]) & 0x7fffffffu);
		if (a > amax) {
			amax = a;
			vmax = v[j];
		}
	}
	if (amax == 0) {
		for (int j = 0; j < 292; j++)
			o[j] = 0;
		return;
	}
	float iscale = -127.0f / vmax;
	i8 *q = (i8 *)(o + 4);
	for (int j = 0; j < 256; j++) {
		int n = nearest_int(iscale * v[j]);
		q[j] = (i8)(n < 127 ? n : 127);
	}
	for (int j = 0; j < 16; j++) {
		short s = 0;
		for (int l = 0; l < 16; l++)
			s = (short)(s + q[16 * j + l]);
		((short *)(o + 260))[j] = s;
	}
	*(float *)o = 1.0f / iscale;
}
GLM_REGISTER(quantize_q8_k_f32)

// dot_qk45 is one lane's part of the dot product of the Q4_K (Q5 false)
// or Q5_K (Q5 true) weight row wr with the Q8_K activation row xr. Four
// lanes share a 256-value block, lane c of them taking its 32-byte slice
// of quants, sub-blocks 2c (low nibbles) and 2c+1 (high): Σ sc·Σ q·a by
// dp4a, minus Σ m·bsums, scaled by d·dy and dmin·dy as the CPU's K-quant ×
// Q8_K dot product does. Q4_K blocks are 144 bytes (d, dmin, scales,
// qs[128]); Q5_K blocks 176 (qh[32] before qs), each weight's fifth bit
// being bit j of qh[l] for sub-block j, put above its nibble.
template <bool Q5> DEV float dot_qk45(const u8 *wr, const u8 *xr, int cols, int lane) {
	const int size = Q5 ? 176 : 144, qsOff = Q5 ? 48 : 16;
	int c = lane % 4;
	float acc = 0;
	for (int b = lane / 4; b < cols / 256; b += 8) {
		const u8 *wb = wr + size * b, *yb = xr + 292 * b;
		int sc0, m0, sc1, m1;
		scale_min_k4(wb + 4, 2 * c, &sc0, &m0);
		scale_min_k4(wb + 4, 2 * c + 1, &sc1, &m1);
		const int *q = (const int *)(wb + qsOff + 32 * c), *qh = (const int *)(wb + 16);
		const int *y0 = (const int *)(yb + 4 + 64 * c), *y1 = y0 + 8;
		int s0 = 0, s1 = 0;
		UNROLL
		for (int k = 0; k < 8; k++) {
			int lo = q[k] & 0x0f0f0f0f, hi = (q[k] >> 4) & 0x0f0f0f0f;
			if (Q5) {
				lo |= ((qh[k] >> (2 * c)) & 0x01010101) << 4;
				hi |= ((qh[k] >> (2 * c + 1)) & 0x01010101) << 4;
			}
			s0 = dp4a(lo, y0[k], s0);
			s1 = dp4a(hi, y1[k], s1);
		}
		const short *bs = (const short *)(yb + 260) + 4 * c;
		int summ = m0 * (bs[0] + bs[1]) + m1 * (bs[2] + bs[3]);
		float dy = *(const float *)yb;
		acc += (load_half(wb) * dy) * (float)(sc0 * s0 + sc1 * s1) - (load_half(wb + 2) * dy) * (float)summ;
	}
	return acc;
}
DEV float dot_q4_k(const u8 *wr, const u8 *xr, int cols, int lane) { return dot_qk45<false>(wr, xr, cols, lane); }
DEV float dot_q5_k(const u8 *wr, const u8 *xr, int cols, int lane) { return dot_qk45<true>(wr, xr, cols, lane); }

// dot_q6_k is one lane's part of the dot product of the Q6_K weight row
// wr with the Q8_K activation row xr. Eight lanes share a 256-value block
// (210 bytes: ql, qh, 16 int8 scales, d), lane g taking the 32 values
// 128n + 32k … (g = 4n + k): their low four bits are nibble k>>1 of 32
// bytes of ql, their high two bits bits 2k of 32 bytes of qh. The quants
// (0 … 63) meet the activations in dp4a; the −32 of each weight is taken
// as −32 times the activations' sum (bsums), sixteen values a scale:
// d·dy·Σ sc·(Σ q·a − 32·Σ a), as the CPU's Q6_K × Q8_K dot product.
DEV float dot_q6_k(const u8 *wr, const u8 *xr, int cols, int lane) {
	int g = lane % 8, n = g / 4, k = g % 4;
	float acc = 0;
	for (int b = lane / 8; b < cols / 256; b += 4) {
		const u8 *wb = wr + 210 * b, *yb = xr + 292 * b;
		const u8 *ql = wb + 64 * n + 32 * (k & 1), *qh = wb + 128 + 32 * n;
		const int *y = (const int *)(yb + 4 + 128 * n + 32 * k);
		int lo = 4 * (k >> 1), hi = 2 * k, s[2] = {0, 0};
		UNROLL
		for (int m = 0; m < 8; m++) {
			int q = ((load_i32_b2(ql + 4 * m) >> lo) & 0x0f0f0f0f) | (((load_i32_b2(qh + 4 * m) >> hi) & 0x03030303) << 4);
			s[m / 4] = dp4a(q, y[m], s[m / 4]);
		}
		const short *bs = (const short *)(yb + 260) + 8 * n + 2 * k;
		const i8 *sc = (const i8 *)(wb + 192) + 8 * n + 2 * k;
		int isum = sc[0] * (s[0] - 32 * bs[0]) + sc[1] * (s[1] - 32 * bs[1]);
		acc += (load_half(wb + 208) * *(const float *)yb) * (float)isum;
	}
	return acc;
}

// iq4nl_bytes maps the four low (shift 0) or high (shift 4) nibbles of the
// word q through IQ4_NL's codebook to four signed bytes.
DEV int iq4nl_bytes(int q, int shift) {
	u32 r = 0;
	UNROLL
	for (int i = 0; i < 4; i++)
		r |= (u32)(u8)(i8)iq4nl_value((q >> (8 * i + shift)) & 15) << (8 * i);
	return (int)r;
}

// dot_iq4_xs is one lane's part of the dot product of the IQ4_XS weight
// row wr (136-byte blocks: d, the scales' high and low bits, qs[128]) with
// the Q8_K row xr. Eight lanes share a block, lane j its sub-block of 32:
// codebook values by dp4a, then d·dy·(ls − 32) times that sum, per
// sub-block, as the CPU's IQ4_XS × Q8_K dot product.
DEV float dot_iq4_xs(const u8 *wr, const u8 *xr, int cols, int lane) {
	int j = lane % 8;
	float acc = 0;
	for (int b = lane / 8; b < cols / 256; b += 4) {
		const u8 *wb = wr + 136 * b, *yb = xr + 292 * b;
		int sh = load_u16(wb + 2);
		int ls = ((wb[4 + j / 2] >> (4 * (j % 2))) & 15) | ((sh >> (2 * j)) & 3) << 4;
		const int *q = (const int *)(wb + 8 + 16 * j), *y = (const int *)(yb + 4 + 32 * j);
		int s = 0;
		UNROLL
		for (int k = 0; k < 4; k++) {
			s = dp4a(iq4nl_bytes(q[k], 0), y[k], s);
			s = dp4a(iq4nl_bytes(q[k], 4), y[k + 4], s);
		}
		acc += (load_half(wb) * *(const float *)yb) * (float)(ls - 32) * (float)s;
	}
	return acc;
}

// MMVQ_KERNELS defines, for a weight type with row dot product DOT:
//
// mmvq_<s>: warp k of the block computes weight row r = blockIdx.x·warps +
// k for activation row t = blockIdx.y: dst[t·dstStride + r] = the row's
// dot product with the quantized row t of xq (xqStride bytes apart), the
// lanes' parts added by the warp.
//
// mmvq_experts_<s>: the same for every expert with rows (MoE), as
// mm_experts_*: z = blockIdx.z is the z-th such expert, act[z] (offs[nE+1]
// of them), its weight at wtab[act[z]], and block y its row offs[j] + y of
// xq while there is one; dst is [·, rows].
#define MMVQ_KERNELS(s, DOT)                                                                                    \
	KERNEL mmvq_##s(float *dst, const u8 *w, const u8 *xq, int rows, int cols, int rowBytes, int xqStride,    \
	                int dstStride) {                                                                           \
		int lane = threadIdx.x % 32, r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, t = blockIdx.y; \
		if (r >= rows)                                                                                     \
			return; /* the whole warp */                                                               \
		float acc = warp_sum(DOT(w + (u64)r * rowBytes, xq + (u64)t * xqStride, cols, lane));             \
		if (lane == 0)                                                                                     \
			dst[(u64)t * dstStride + r] = acc;                                                         \
	}                                                                                                          \
	GLM_REGISTER(mmvq_##s)                                                                                     \
	KERNEL mmvq_experts_##s(float *dst, const u64 *wtab, const u8 *xq, const int *offs, const int *act, int nE, \
	                        int rows, int cols, int rowBytes, int xqStride) {                                  \
		if ((int)blockIdx.z >= offs[nE + 1])                                                               \
			return; /* the whole block */                                                              \
		int j = act[blockIdx.z], t = offs[j] + blockIdx.y;                                                 \
		int lane = threadIdx.x % 32, r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;                \
		if (t >= offs[j + 1] || r >= rows)                                                                 \
			return; /* the whole warp */                                                               \
		const u8 *wr = (const u8 *)wtab[j] + (u64)r * rowBytes;                                            \
		float acc = warp_sum(DOT(wr, xq + (u64)t * xqStride, cols, lane));                                 \
		if (lane == 0)                                                                                     \
			dst[(u64)t * rows + r] = acc;                                                              \
	}                                                                                                          \
	GLM_REGISTER(mmvq_experts_##s)

MMVQ_KERNELS(q8_0, dot_q8_0)
MMVQ_KERNELS(q4_k, dot_q4_k)
MMVQ_KERNELS(q5_k, dot_q5_k)
MMVQ_KERNELS(q6_k, dot_q6_k)
MMVQ_KERNELS(iq4_xs, dot_iq4_xs)
