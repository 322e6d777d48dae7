// softmax.cu: row softmax, summing in double like backend/cpu.Softmax
// (softmax_block in prelude.h, shared with attention and routing).
#include "prelude.h"

// softmax_f32: row blockIdx.x of n values at blockIdx.x·stride.
KERNEL softmax_f32(float *x, int n, int stride) { softmax_block(x + (u64)blockIdx.x * stride, n); }
GLM_REGISTER(softmax_f32)
