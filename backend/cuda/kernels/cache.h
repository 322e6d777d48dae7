// cache.h: values of a KV cache stored in one of llama.cpp's cache types
// (backend.Device.AllocType), read and written as backend/cpu and
// package tensor do, bit for bit. The type codes are tensor.Type's.
#ifndef GLM_CACHE_H
#define GLM_CACHE_H
#include "prelude.h"

#define CACHE_F32 0
#define CACHE_F16 1
#define CACHE_Q8_0 8
#define CACHE_BF16 30

// cache_at returns value i of a cache buffer of type ty at base: f16 and
// bf16 widened, Q8_0 as d·q with d its block's f16 scale (32 values in 34
// bytes).
DEV float cache_at(const u8 *base, int ty, u64 i) {
	switch (ty) {
	case CACHE_F16:
		return half_to_float(load_u16(base + 2 * i));
	case CACHE_BF16:
		return bits_to_float((u32)load_u16(base + 2 * i) << 16);
	case CACHE_Q8_0: {
		const u8 *b = base + i / 32 * 34;
		return load_half(b) * (float)(i8)b[2 + i % 32];
	}
	default:
		return ((const float *)base)[i];
	}
}

// dot4_cache is dot4 with b the n cache values from value off: the
// values are widened first, so the sums are dot4's over the same floats.
DEV float dot4_cache(const float *a, const u8 *b, int ty, u64 off, int n) {
	if (ty == CACHE_F32)
		return dot4(a, (const float *)b + off, n);
	float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
	int i = 0;
	for (; i + 4 <= n; i += 4) {
		s0 += a[i] * cache_at(b, ty, off + i);
		s1 += a[i + 1] * cache_at(b, ty, off + i + 1);
		s2 += a[i + 2] * cache_at(b, ty, off + i + 2);
		s3 += a[i + 3] * cache_at(b, ty, off + i + 3);
	}
	for (; i < n; i++)
		s0 += a[i] * cache_at(b, ty, off + i);
	return (s0 + s1) + (s2 + s3);
}

// float_bits returns the bits of f.
DEV u32 float_bits(float f) {
#if defined(GLM_CPU_SIM)
	u32 b;
	memcpy(&b, &f, 4);
	return b;
#else
	return __builtin_bit_cast(u32, f);
#endif
}

// float_to_half is tensor.F32ToF16: round to nearest, ties to even;
// overflow to infinity, NaN kept quiet.
DEV u16 float_to_half(float f) {
	u32 b = float_bits(f);
	u32 sign = (b >> 16) & 0x8000u;
	int exp = (int)((b >> 23) & 0xff);
	u32 man = b & 0x7fffffu;
	if (exp == 0xff)
		return (u16)(man ? sign | 0x7e00u | man >> 13 : sign | 0x7c00u);
	int e = exp - 127 + 15;
	if (e >= 0x1f)
		return (u16)(sign | 0x7c00u);
	if (e <= 0) {
		if (e < -10)
			return (u16)sign;
		u32 m = man | 0x800000u;
		u32 shift = (u32)(14 - e);
		u32 h = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
		if (rem > half || (rem == half && (h & 1)))
			h++;
		return (u16)(sign | h);
	}
	u32 h = (u32)e << 10 | man >> 13, rem = man & 0x1fffu;
	if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
		h++;
	return (u16)(sign | h);
}

// float_to_bf16 is tensor.F32ToBF16: round to nearest, ties to even; a
// NaN keeps its upper bits, made quiet.
DEV u16 float_to_bf16(float f) {
	u32 b = float_bits(f);
	if ((b & 0x7fffffffu) > 0x7f800000u)
		return (u16)((b >> 16) | 0x40u);
	return (u16)((b + 0x7fffu + ((b >> 16) & 1)) >> 16);
}

// round_away is C's roundf for |x| < 2³¹, as tensor's roundAway: x −
// trunc(x) is exact in float32.
DEV int round_away(float x) {
	int q = (int)x;
	float f = x - (float)q;
	if (f >= 0.5f)
		q++;
	else if (f <= -0.5f)
		q--;
	return q;
}

// store_q8_0 quantizes the 32 values at x into the Q8_0 block at b as
// ggml's reference quantizer does: d = amax/127, q = round(x·(1/d)) with
// ties away from zero, the inverse from the unrounded d, d stored as f16.
DEV void store_q8_0(u8 *b, const float *x) {
	float amax = 0;
	for (int j = 0; j < 32; j++) {
		float a = bits_to_float(float_bits(x[j]) & 0x7fffffffu);
		if (a > amax)
			amax = a;
	}
	float d = amax / 127.0f;
	float id = d != 0 ? 1.0f / d : 0.0f;
	u16 h = float_to_half(d);
	b[0] = (u8)h;
	b[1] = (u8)(h >> 8);
	for (int j = 0; j < 32; j++) {
		// The product is rounded before roundf, as in ggml: both builds
		// compile with floating-point contraction off.
		b[2 + j] = (u8)(i8)round_away(x[j] * id);
	}
}
#endif
