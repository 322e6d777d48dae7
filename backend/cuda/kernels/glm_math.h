// glm_math.h: exp, log, sin and cos in double precision from plain
// arithmetic (the PTX build has no libdevice). Errors are a few units in
// the last place of a double, so a float result rounded from them matches
// Go's float32(math.Exp(float64(x))) except in rare ties.
#ifndef GLM_MATH_H
#define GLM_MATH_H

DEV double glm_pow2i(int e) { return bits_to_double((u64)(e + 1023) << 52); } // -1022 <= e <= 1023

DEV double glm_exp(double x) {
	if (x != x)
		return x;
	if (x > 709.78)
		return bits_to_double(0x7ff0000000000000ull);
	if (x < -745.2)
		return 0.0;
	double k = glm_rint(x * 1.4426950408889634);
	double r = (x - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10;
	// e^r, |r| <= 0.35: Taylor series to r^13.
	double p = 1.0 / 6227020800.0;
	p = p * r + 1.0 / 479001600.0;
	p = p * r + 1.0 / 39916800.0;
	p = p * r + 1.0 / 3628800.0;
	p = p * r + 1.0 / 362880.0;
	p = p * r + 1.0 / 40320.0;
	p = p * r + 1.0 / 5040.0;
	p = p * r + 1.0 / 720.0;
	p = p * r + 1.0 / 120.0;
	p = p * r + 1.0 / 24.0;
	p = p * r + 1.0 / 6.0;
	p = p * r + 0.5;
	p = p * r + 1.0;
	p = p * r + 1.0;
	int ki = (int)k, k1 = ki / 2;
	return p * glm_pow2i(k1) * glm_pow2i(ki - k1);
}

DEV double glm_log(double x) {
	if (x != x || x < 0)
		return bits_to_double(0x7ff8000000000000ull);
	if (x == 0)
		return bits_to_double(0xfff0000000000000ull);
	u64 b = double_to_bits(x);
	int e = (int)((b >> 52) & 0x7ff);
	if (e == 0x7ff)
		return x;
	if (e == 0) { // subnormal
		x *= 18014398509481984.0; // 2^54
		b = double_to_bits(x);
		e = (int)((b >> 52) & 0x7ff) - 54;
	}
	e -= 1023;
	double m = bits_to_double((b & 0x000fffffffffffffull) | 0x3ff0000000000000ull);
	if (m > 1.4142135623730951) {
		m *= 0.5;
		e++;
	}
	double s = (m - 1) / (m + 1), s2 = s * s;
	double p = 1.0 / 21;
	p = p * s2 + 1.0 / 19;
	p = p * s2 + 1.0 / 17;
	p = p * s2 + 1.0 / 15;
	p = p * s2 + 1.0 / 13;
	p = p * s2 + 1.0 / 11;
	p = p * s2 + 1.0 / 9;
	p = p * s2 + 1.0 / 7;
	p = p * s2 + 1.0 / 5;
	p = p * s2 + 1.0 / 3;
	p = p * s2 + 1.0;
	double de = (double)e;
	return de * 6.93147180369123816490e-01 + (de * 1.90821492927058770002e-10 + 2 * s * p);
}

// glm_sincos sets *s and *c to sin x and cos x for |x| < 2^20.
DEV void glm_sincos(double x, double *s, double *c) {
	double n = glm_rint(x * 6.36619772367581382433e-01);
	double r = ((x - n * 1.57079632673412561417e+00) - n * 6.07710050630396597660e-11) - n * 2.02226624871116645580e-21;
	double r2 = r * r;
	double ps = 1.0 / 355687428096000.0; // 1/17!
	ps = ps * r2 - 1.0 / 1307674368000.0;
	ps = ps * r2 + 1.0 / 6227020800.0;
	ps = ps * r2 - 1.0 / 39916800.0;
	ps = ps * r2 + 1.0 / 362880.0;
	ps = ps * r2 - 1.0 / 5040.0;
	ps = ps * r2 + 1.0 / 120.0;
	ps = ps * r2 - 1.0 / 6.0;
	double sn = r + r * r2 * ps;
	double pc = 1.0 / 6402373705728000.0; // 1/18!
	pc = pc * r2 - 1.0 / 20922789888000.0;
	pc = pc * r2 + 1.0 / 87178291200.0;
	pc = pc * r2 - 1.0 / 479001600.0;
	pc = pc * r2 + 1.0 / 3628800.0;
	pc = pc * r2 - 1.0 / 40320.0;
	pc = pc * r2 + 1.0 / 720.0;
	pc = pc * r2 - 1.0 / 24.0;
	pc = pc * r2 + 0.5;
	double cs = 1.0 - r2 * pc;
	switch ((int)((i64)n & 3)) {
	case 0:
		*s = sn, *c = cs;
		break;
	case 1:
		*s = cs, *c = -sn;
		break;
	case 2:
		*s = -sn, *c = -cs;
		break;
	default:
		*s = -cs, *c = sn;
		break;
	}
}

// expf_ is float32(exp(float64(x))), as the Go CPU kernels compute it.
DEV float expf_(float x) { return (float)glm_exp((double)x); }
DEV float sigmoidf_(float v) { return 1.0f / (1.0f + expf_(-v)); }
DEV float siluf_(float v) { return v / (1.0f + expf_(-v)); }

#endif
