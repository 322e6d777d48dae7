// prelude.h: what every glmrun kernel file includes. Three builds read it:
//
//   clang -x cuda --cuda-device-only -nocudainc -nocudalib (gen.sh): PTX for
//     the driver, with clang's own builtin variables and NVVM intrinsics;
//   GLM_CPU_SIM (backend/cuda/testdata/sim.cc): the same kernels as plain
//     C++ run on the CPU, one cooperative fiber (or, for ThreadSanitizer,
//     one pthread) per CUDA thread, so that the fake driver can execute
//     launches and tests compare them with the Go CPU backend.
//
// No CUDA toolkit header is used. Math functions come from glm_math.h,
// written here in plain arithmetic, so that both builds compute the same
// values (there is no libdevice in the PTX build).
#ifndef GLM_PRELUDE_H
#define GLM_PRELUDE_H

typedef unsigned char u8;
typedef signed char i8;
typedef unsigned short u16;
typedef short i16;
typedef int i32;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;

#if defined(GLM_CPU_SIM)
// ---- CPU simulation -------------------------------------------------------
#include <string.h>

struct glm_dim3 {
	unsigned x, y, z;
};
// The running fiber's coordinates; the scheduler updates them on each switch.
struct glm_sim_coords {
	glm_dim3 tid, bid, bdim, gdim;
};
extern "C" __thread glm_sim_coords glm_sim_now __attribute__((tls_model("initial-exec")));
extern "C" void glm_sim_syncthreads(void);
extern "C" float glm_sim_shfl_xor(float v, int mask);
extern "C" void glm_sim_warp_sum_n(float *v, int k);
extern "C" void *glm_sim_dynamic_shared(void);

#define threadIdx (glm_sim_now.tid)
#define blockIdx (glm_sim_now.bid)
#define blockDim (glm_sim_now.bdim)
#define gridDim (glm_sim_now.gdim)
#define __syncthreads() glm_sim_syncthreads()
// Blocks run one after another, so block-shared memory is static storage.
#define SHARED static
#define DYN_SHARED(type, name) type *name = (type *)glm_sim_dynamic_shared()
#define DEV static inline
#define DEVSPEC inline // explicit specializations take no storage class
#define UNROLL
#define KERNEL extern "C" void

DEV float shfl_xor(float v, int mask) { return glm_sim_shfl_xor(v, mask); }
// dp4a is PTX's dp4a.s32.s32: c plus the products of a's and b's four
// signed bytes.
DEV int dp4a(int a, int b, int c) {
	for (int k = 0; k < 32; k += 8)
		c += (int)(signed char)(a >> k) * (int)(signed char)(b >> k);
	return c;
}

DEV float half_to_float(u16 h) {
	u32 sign = (u32)(h >> 15) << 31, exp = (h >> 10) & 31, man = h & 1023, bits;
	if (exp == 0) {
		if (man == 0) {
			bits = sign;
		} else { // subnormal: normalize
			int e = -1;
			do {
				man <<= 1;
				e++;
			} while (!(man & 1024));
			bits = sign | (u32)(112 - e) << 23 | (man & 1023) << 13;
		}
	} else if (exp == 31) {
		bits = sign | 0x7f800000u | man << 13;
	} else {
		bits = sign | (exp + 112) << 23 | man << 13;
	}
	float f;
	memcpy(&f, &bits, 4);
	return f;
}
DEV float bits_to_float(u32 b) {
	float f;
	memcpy(&f, &b, 4);
	return f;
}
DEV u64 double_to_bits(double d) {
	u64 b;
	memcpy(&b, &d, 8);
	return b;
}
DEV double bits_to_double(u64 b) {
	double d;
	memcpy(&d, &b, 8);
	return d;
}
DEV double glm_rint(double x) { return __builtin_rint(x); }
DEV double glm_sqrt(double x) { return __builtin_sqrt(x); }
DEV float glm_sqrtf(float x) { return __builtin_sqrtf(x); }

// Register a kernel with the simulator (name, parameter types).
#include "../testdata/simreg.h"
#define GLM_REGISTER(name) static glm_sim_registrar glm_reg_##name(#name, glm_sim_entry<name>::make());

#else
// ---- clang CUDA device build ----------------------------------------------
#include <__clang_cuda_builtin_vars.h>
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
#define SHARED __shared__
#define DYN_SHARED(type, name) extern __shared__ type name[]
#define DEV static __device__ __attribute__((always_inline)) inline
#define DEVSPEC __device__ __attribute__((always_inline)) inline
// UNROLL fully unrolls the next loop (constant trip count), so that small
// arrays indexed by its counter stay in registers.
#define UNROLL _Pragma("unroll")
#define KERNEL extern "C" __global__ void
#define GLM_REGISTER(name)

DEV float shfl_xor(float v, int mask) { return __nvvm_shfl_sync_bfly_f32(0xffffffffu, v, mask, 31); }
DEV int dp4a(int a, int b, int c) {
	int r;
	asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
	return r;
}
DEV float half_to_float(u16 h) {
	float f;
	asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
	return f;
}
DEV float bits_to_float(u32 b) { return __builtin_bit_cast(float, b); }
DEV u64 double_to_bits(double d) { return __builtin_bit_cast(u64, d); }
DEV double bits_to_double(u64 b) { return __builtin_bit_cast(double, b); }
DEV double glm_rint(double x) { return __builtin_rint(x); }
DEV double glm_sqrt(double x) { return __builtin_sqrt(x); }
DEV float glm_sqrtf(float x) { return __builtin_sqrtf(x); }
#endif

// ---- shared by both builds ------------------------------------------------

// warp_sum_n replaces each of v[0 … k) (k ≤ 8) by its sum over the 32
// lanes of the warp (every lane gets it). Block sizes are multiples of
// 32. The simulation computes the same butterflies in one exchange.
DEV void warp_sum_n(float *v, int k) {
#if defined(GLM_CPU_SIM)
	glm_sim_warp_sum_n(v, k);
#else
	for (int j = 0; j < k; j++)
		for (int m = 16; m > 0; m >>= 1)
			v[j] += shfl_xor(v[j], m);
#endif
}

DEV float warp_sum(float v) {
	warp_sum_n(&v, 1);
	return v;
}

DEV int imin(int a, int b) { return a < b ? a : b; }
DEV int imax(int a, int b) { return a > b ? a : b; }
DEV float fmaxf_(float a, float b) { return a > b ? a : b; }

DEV u32 load_u32(const u8 *p) { return (u32)p[0] | (u32)p[1] << 8 | (u32)p[2] << 16 | (u32)p[3] << 24; }
DEV u16 load_u16(const u8 *p) { return (u16)(p[0] | p[1] << 8); }
DEV float load_half(const u8 *p) { return half_to_float(load_u16(p)); }

// dot4 is backend/cpu.Dot: four float partial sums over n elements, then
// (s0+s1)+(s2+s3); used where a kernel must match the CPU bit for bit.
DEV float dot4(const float *a, const float *b, int n) {
	float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
	int i = 0;
	for (; i + 4 <= n; i += 4) {
		s0 += a[i] * b[i];
		s1 += a[i + 1] * b[i + 1];
		s2 += a[i + 2] * b[i + 2];
		s3 += a[i + 3] * b[i + 3];
	}
	for (; i < n; i++)
		s0 += a[i] * b[i];
	return (s0 + s1) + (s2 + s3);
}

// block_sum_d returns the sum of v over the block (every thread gets it);
// blockDim.x is a power of two of at most 1024.
DEV double block_sum_d(double v) {
	SHARED double part_d[1024];
	part_d[threadIdx.x] = v;
	__syncthreads();
	for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
		if (threadIdx.x < s)
			part_d[threadIdx.x] += part_d[threadIdx.x + s];
		__syncthreads();
	}
	double r = part_d[0];
	__syncthreads();
	return r;
}

// block_max_f returns the maximum of v over the block.
DEV float block_max_f(float v) {
	SHARED float part_f[1024];
	part_f[threadIdx.x] = v;
	__syncthreads();
	for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
		if (threadIdx.x < s)
			part_f[threadIdx.x] = fmaxf_(part_f[threadIdx.x], part_f[threadIdx.x + s]);
		__syncthreads();
	}
	float r = part_f[0];
	__syncthreads();
	return r;
}

#include "glm_math.h"

// softmax_block replaces x[0 … n) by its softmax, as backend/cpu.Softmax
// (sum in double); every thread of the block takes part. Entries of −Inf
// get 0.
DEV void softmax_block(float *x, int n) {
	float m = bits_to_float(0xff800000u);
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		m = fmaxf_(m, x[i]);
	m = block_max_f(m);
	double s = 0;
	for (int i = threadIdx.x; i < n; i += blockDim.x) {
		float e = expf_(x[i] - m);
		x[i] = e;
		s += (double)e;
	}
	s = block_sum_d(s);
	float inv = (float)(1.0 / s);
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		x[i] *= inv;
	__syncthreads();
}

#endif
