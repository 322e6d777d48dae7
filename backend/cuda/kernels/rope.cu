// rope.cu: rotary position embedding, ggml NORM mode (adjacent pairs) with
// YaRN, computing the angles as backend/cpu.RopeTable does.
#include "prelude.h"

// rope_f32 rotates, for row t = blockIdx.x and every head h < heads, the
// dims values at (t·heads + h)·stride + off by position pos0 + t. The host
// passes thetaScale = float32(base^(−2/dims)) and mscaleExt =
// 1 + 0.1·ln(1/freqScale) (used when extFactor ≠ 0). Thread i handles
// pairs i, i + blockDim.x, ….
KERNEL rope_f32(float *x, int heads, int stride, int off, int pos0, int dims, float thetaScale, float freqScale,
                float extFactor, float attnFactor, float mscaleExt, float corr0, float corr1) {
	int t = blockIdx.x;
	for (int i = threadIdx.x; i < dims / 2; i += blockDim.x) {
		float theta = (float)(pos0 + t);
		for (int k = 0; k < i; k++)
			theta *= thetaScale;
		float thetaInterp = freqScale * theta, th = thetaInterp, mscale = attnFactor;
		if (extFactor != 0) {
			float y = ((float)i - corr0) / fmaxf_(0.001f, corr1 - corr0);
			float clamped = y < 0 ? 0.0f : (y > 1 ? 1.0f : y);
			float rampMix = (1 - clamped) * extFactor;
			th = thetaInterp * (1 - rampMix) + theta * rampMix;
			mscale *= mscaleExt;
		}
		double sd, cd;
		glm_sincos((double)th, &sd, &cd);
		float c = (float)cd * mscale, s = (float)sd * mscale;
		for (int h = 0; h < heads; h++) {
			float *p = x + ((u64)t * heads + h) * stride + off + 2 * i;
			float x0 = p[0], x1 = p[1];
			p[0] = x0 * c - x1 * s;
			p[1] = x0 * s + x1 * c;
		}
	}
}
GLM_REGISTER(rope_f32)
