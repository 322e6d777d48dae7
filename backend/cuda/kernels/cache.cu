// cache.cu: writing float32 rows into a KV cache of another type, and
// widening a cache's values to float32 (the prefill's latent rows).
#include "cache.h"

#define FOR_EACH_UNIT(i, n) for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < (u64)(n); i += (u64)gridDim.x * blockDim.x)

// cache_store_f32: the n values at src into the cache at dst of type ty
// (n a whole number of Q8_0 blocks for Q8_0: one thread per block).
KERNEL cache_store_f32(u8 *dst, const float *src, int ty, int n) {
	switch (ty) {
	case CACHE_F16:
	case CACHE_BF16:
		FOR_EACH_UNIT(i, n) {
			u16 h = ty == CACHE_F16 ? float_to_half(src[i]) : float_to_bf16(src[i]);
			dst[2 * i] = (u8)h;
			dst[2 * i + 1] = (u8)(h >> 8);
		}
		break;
	case CACHE_Q8_0:
		FOR_EACH_UNIT(i, n / 32) store_q8_0(dst + 34 * i, src + 32 * i);
		break;
	default:
		FOR_EACH_UNIT(i, n) ((float *)dst)[i] = src[i];
	}
}
GLM_REGISTER(cache_store_f32)

// fill_u8: n bytes at p = v (a new cache's zeros: zero bytes are zero
// values in every cache type).
KERNEL fill_u8(u8 *p, int v, u64 n) {
	FOR_EACH_UNIT(i, n) p[i] = (u8)v;
}
GLM_REGISTER(fill_u8)
