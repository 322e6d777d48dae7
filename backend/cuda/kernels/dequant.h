// dequant.h: deq32<T>(row, c, cols, v) writes elements 32c … 32c+31 of one
// weight row stored as ggml type T (docs/FILE-LAYOUTS.md section 3) to v, as
// float32, with the same operations as the Go tensor package (bit-exact:
// the PTX is built with -ffp-contract=off). Elements at or past cols (only
// possible for the float types) are 0.
#ifndef GLM_DEQUANT_H
#define GLM_DEQUANT_H

enum {
	T_F32 = 0,
	T_F16 = 1,
	T_Q4_0 = 2,
	T_Q4_1 = 3,
	T_Q5_0 = 6,
	T_Q5_1 = 7,
	T_Q8_0 = 8,
	T_Q4_K = 12,
	T_Q5_K = 13,
	T_Q6_K = 14,
	T_IQ4_XS = 23,
	T_BF16 = 30,
};

DEV void scale_min_k4(const u8 *s, int j, int *sc, int *m) {
	if (j < 4) {
		*sc = s[j] & 63;
		*m = s[j + 4] & 63;
	} else {
		*sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
		*m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
	}
}

DEV float iq4nl_value(int q) {
	switch (q) {
	case 0: return -127;
	case 1: return -104;
	case 2: return -83;
	case 3: return -65;
	case 4: return -49;
	case 5: return -35;
	case 6: return -22;
	case 7: return -10;
	case 8: return 1;
	case 9: return 13;
	case 10: return 25;
	case 11: return 38;
	case 12: return 53;
	case 13: return 69;
	case 14: return 89;
	default: return 113;
	}
}

template <int T> DEV void deq32(const u8 *row, int c, int cols, float *v);

template <> DEVSPEC void deq32<T_F32>(const u8 *row, int c, int cols, float *v) {
	UNROLL
	for (int k = 0; k < 32; k++) {
		int i = 32 * c + k;
		v[k] = i < cols ? bits_to_float(load_u32(row + 4 * i)) : 0.0f;
	}
}
template <> DEVSPEC void deq32<T_F16>(const u8 *row, int c, int cols, float *v) {
	UNROLL
	for (int k = 0; k < 32; k++) {
		int i = 32 * c + k;
		v[k] = i < cols ? load_half(row + 2 * i) : 0.0f;
	}
}
template <> DEVSPEC void deq32<T_BF16>(const u8 *row, int c, int cols, float *v) {
	UNROLL
	for (int k = 0; k < 32; k++) {
		int i = 32 * c + k;
		v[k] = i < cols ? bits_to_float((u32)load_u16(row + 2 * i) << 16) : 0.0f;
	}
}
template <> DEVSPEC void deq32<T_Q8_0>(const u8 *row, int c, int cols, float *v) {
	const u8 *b = row + 34 * c;
	float d = load_half(b);
	UNROLL
	for (int k = 0; k < 32; k++)
		v[k] = (float)(i8)b[2 + k] * d;
}
template <> DEVSPEC void deq32<T_Q4_0>(const u8 *row, int c, int cols, float *v) {
	const u8 *b = row + 18 * c;
	float d = load_half(b);
	UNROLL
	for (int j = 0; j < 16; j++) {
		int q = b[2 + j];
		v[j] = (float)((q & 15) - 8) * d;
		v[j + 16] = (float)((q >> 4) - 8) * d;
	}
}
template <> DEVSPEC void deq32<T_Q4_1>(const u8 *row, int c, int cols, float *v) {
	const u8 *b = row + 20 * c;
	float d = load_half(b), m = load_half(b + 2);
	UNROLL
	for (int j = 0; j < 16; j++) {
		int q = b[4 + j];
		v[j] = (float)(q & 15) * d + m;
		v[j + 16] = (float)(q >> 4) * d + m;
	}
}
template <> DEVSPEC void deq32<T_Q5_0>(const u8 *row, int c, int cols, float *v) {
	const u8 *b = row + 22 * c;
	float d = load_half(b);
	u32 qh = load_u32(b + 2);
	UNROLL
	for (int j = 0; j < 16; j++) {
		int q = b[6 + j];
		int lo = (q & 15) | (int)((qh >> j) & 1) << 4;
		int hi = (q >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
		v[j] = (float)(lo - 16) * d;
		v[j + 16] = (float)(hi - 16) * d;
	}
}
template <> DEVSPEC void deq32<T_Q5_1>(const u8 *row, int c, int cols, float *v) {
	const u8 *b = row + 24 * c;
	float d = load_half(b), m = load_half(b + 2);
	u32 qh = load_u32(b + 4);
	UNROLL
	for (int j = 0; j < 16; j++) {
		int q = b[8 + j];
		int lo = (q & 15) | (int)((qh >> j) & 1) << 4;
		int hi = (q >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
		v[j] = (float)lo * d + m;
		v[j + 16] = (float)hi * d + m;
	}
}
template <> DEVSPEC void deq32<T_Q4_K>(const u8 *row, int c, int cols, float *v) {
	const u8 *b = row + 144 * (c / 8);
	int j = c % 8, sc, m;
	scale_min_k4(b + 4, j, &sc, &m);
	float d1 = load_half(b) * (float)sc, m1 = load_half(b + 2) * (float)m;
	const u8 *qs = b + 16 + 32 * (j / 2);
	int shift = 4 * (j & 1);
	UNROLL
	for (int l = 0; l < 32; l++)
		v[l] = d1 * (float)((qs[l] >> shift) & 15) - m1;
}
template <> DEVSPEC void deq32<T_Q5_K>(const u8 *row, int c, int cols, float *v) {
	const u8 *b = row + 176 * (c / 8);
	int j = c % 8, sc, m;
	scale_min_k4(b + 4, j, &sc, &m);
	float d1 = load_half(b) * (float)sc, m1 = load_half(b + 2) * (float)m;
	const u8 *qh = b + 16, *qs = b + 48 + 32 * (j / 2);
	int shift = 4 * (j & 1);
	UNROLL
	for (int l = 0; l < 32; l++)
		v[l] = d1 * (float)(((qs[l] >> shift) & 15) | ((qh[l] >> j) & 1) << 4) - m1;
}
template <> DEVSPEC void deq32<T_Q6_K>(const u8 *row, int c, int cols, float *v) {
	const u8 *b = row + 210 * (c / 8);
	int e0 = 32 * (c % 8), h = e0 / 128, k = (e0 % 128) / 32;
	const u8 *ql = b + 64 * h, *qh = b + 128 + 32 * h, *sc = b + 192 + 8 * h;
	float d = load_half(b + 208);
	float dk[2] = {d * (float)(i8)sc[2 * k], d * (float)(i8)sc[1 + 2 * k]};
	const u8 *qlk = ql + (k & 1) * 32;
	int lshift = (k >> 1) * 4;
	UNROLL
	for (int l = 0; l < 32; l++) {
		int q = ((qlk[l] >> lshift) & 15) | ((qh[l] >> (2 * k)) & 3) << 4;
		v[l] = dk[l / 16] * (float)(q - 32);
	}
}
template <> DEVSPEC void deq32<T_IQ4_XS>(const u8 *row, int c, int cols, float *v) {
	const u8 *b = row + 136 * (c / 8);
	int j = c % 8;
	float d = load_half(b);
	int sh = load_u16(b + 2);
	int ls = ((b[4 + j / 2] >> (4 * (j % 2))) & 15) | ((sh >> (2 * j)) & 3) << 4;
	float dl = d * (float)(ls - 32);
	const u8 *qs = b + 8 + 16 * j;
	UNROLL
	for (int l = 0; l < 16; l++) {
		v[l] = dl * iq4nl_value(qs[l] & 15);
		v[l + 16] = dl * iq4nl_value(qs[l] >> 4);
	}
}

#endif
