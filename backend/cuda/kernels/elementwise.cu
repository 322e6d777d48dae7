// elementwise.cu: add, scale, copy, fill and SwiGLU over n values, with
// grid-stride loops.
#include "prelude.h"

#define FOR_EACH(i, n) for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < (u64)(n); i += (u64)gridDim.x * blockDim.x)

// add_f32: y += x.
KERNEL add_f32(float *y, const float *x, int n) {
	FOR_EACH(i, n) y[i] += x[i];
}
GLM_REGISTER(add_f32)

// scale_f32: x *= a.
KERNEL scale_f32(float *x, float a, int n) {
	FOR_EACH(i, n) x[i] *= a;
}
GLM_REGISTER(scale_f32)

// copy_f32: dst = src.
KERNEL copy_f32(float *dst, const float *src, int n) {
	FOR_EACH(i, n) dst[i] = src[i];
}
GLM_REGISTER(copy_f32)

// fill_f32: x = v.
KERNEL fill_f32(float *x, float v, int n) {
	FOR_EACH(i, n) x[i] = v;
}
GLM_REGISTER(fill_f32)

// swiglu_f32: dst = silu(gate)·up (dst may be gate).
KERNEL swiglu_f32(float *dst, const float *gate, const float *up, int n) {
	FOR_EACH(i, n) dst[i] = siluf_(gate[i]) * up[i];
}
GLM_REGISTER(swiglu_f32)
