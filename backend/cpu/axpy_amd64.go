//go:build !purego

package cpu

import "golang.org/x/sys/cpu"

var (
	useAVX2   = cpu.X86.HasAVX2 && cpu.X86.HasFMA
	useAVX512 = useAVX2 && cpu.X86.HasAVX512F
)

//go:noescape
func dot4AVX512(q *float32, ldq int, k *float32, n int, out *float32)

//go:noescape
func dot1AVX512(q *float32, k *float32, n int) float32

//go:noescape
func axpy4AVX512(o *float32, ldo int, e *float32, c *float32, n int)

//go:noescape
func axpyAVX2(y *float32, a float32, x *float32, n int)

//go:noescape
func axpyKeys4AVX512(o *float32, ldo int, e *[4]float32, lat *float32, offs *int32, nk, n int)

//go:noescape
func axpyKeys4AVX2(o *float32, ldo int, e *[4]float32, lat *float32, offs *int32, nk, n int)

// axpyKeys4 adds, for each key i in order, e[i][j]·lat[offs[i]:][:n] to
// rows j < 4 of o (ldo apart): the weighted sum of attendHeads4 over a tile
// of keys, exactly what one axpy4 per key gives. The first n&^63 columns
// (AVX-512) or n&^15 (AVX2) of the four rows stay in registers across the
// keys (one axpy4 per key loads and stores them every time, four stores per
// four multiply-adds).
func axpyKeys4(o []float32, ldo int, e [][4]float32, lat []float32, offs []int32, n int) {
	_ = o[3*ldo+n-1]
	e = e[:len(offs)]
	for _, off := range offs {
		_ = lat[int(off)+n-1]
	}
	n64 := 0
	if useAVX512 && len(offs) > 0 {
		if n64 = n &^ 63; n64 > 0 {
			axpyKeys4AVX512(&o[0], ldo, &e[0], &lat[0], &offs[0], len(offs), n64)
		}
	}
	if useAVX2 && len(offs) > 0 {
		if n16 := n &^ 15; n16 > n64 {
			axpyKeys4AVX2(&o[n64], ldo, &e[0], &lat[n64], &offs[0], len(offs), n16-n64)
			n64 = n16
		}
	}
	if n64 < n {
		for i, off := range offs {
			axpy4(o[n64:], ldo, &e[i], lat[int(off)+n64:], n-n64)
		}
	}
}

// axpy adds a·x to y with fused multiply-adds where the CPU has them (the
// fast path's weighted sums; results may differ from axpyGeneric in the
// last bit).
func axpy(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	if !useAVX2 {
		axpyGeneric(y, a, x)
		return
	}
	n := len(y) &^ 7
	if n > 0 {
		axpyAVX2(&y[0], a, &x[0], n)
	}
	axpyGeneric(y[n:], a, x[n:])
}

//go:noescape
func dot4AVX2(q *float32, ldq int, k *float32, n int, out *float32)

//go:noescape
func axpy4AVX2(o *float32, ldo int, e *float32, c *float32, n int)

// dot4 writes to out[j] the dot product of rows j < 4 of q (ldq apart)
// with k[:n].
func dot4(out *[4]float32, q []float32, ldq int, k []float32, n int) {
	_ = q[3*ldq+n-1]
	k = k[:n]
	if useAVX512 && n%16 == 0 {
		dot4AVX512(&q[0], ldq, &k[0], n, &out[0])
		return
	}
	m := n &^ 7
	if !useAVX2 || m == 0 {
		dot4Generic(out, q, ldq, k, n)
		return
	}
	dot4AVX2(&q[0], ldq, &k[0], m, &out[0])
	if m < n {
		var tail [4]float32
		dot4Generic(&tail, q[m:], ldq, k[m:], n-m)
		for j := range out {
			out[j] += tail[j]
		}
	}
}

// axpy4 adds e[j]·c[:n] to rows j < 4 of o (ldo apart).
func axpy4(o []float32, ldo int, e *[4]float32, c []float32, n int) {
	_ = o[3*ldo+n-1]
	c = c[:n]
	m := n &^ 7
	if !useAVX2 || m == 0 {
		axpy4Generic(o, ldo, e, c, n)
		return
	}
	m16 := 0
	if useAVX512 {
		m16 = n &^ 15
		if m16 > 0 {
			axpy4AVX512(&o[0], ldo, &e[0], &c[0], m16)
		}
	}
	if m > m16 { // every element takes one fused multiply-add, whatever the width
		axpy4AVX2(&o[m16], ldo, &e[0], &c[m16], m-m16)
	}
	if m < n {
		axpy4Generic(o[m:], ldo, e, c[m:], n-m)
	}
}

//go:noescape
func dot4x4AVX512(q *float32, ldq int, lat *float32, offs *[4]int32, n int, out *[16]float32)

// dot4x4 writes to out[4h+k] the dot product of row h < 4 of q (ldq
// apart) with lat[offs[k]:][:n]: four keys against four queries. With
// AVX-512 (n a multiple of 16) every loaded vector serves four
// multiply-adds and the sums are reduced in one tree, so the results may
// differ from dot4's in the last bits; elsewhere it is four dot4 calls.
func dot4x4(out *[16]float32, q []float32, ldq int, lat []float32, offs *[4]int32, n int) {
	_ = q[3*ldq+n-1]
	for _, off := range offs {
		_ = lat[int(off)+n-1]
	}
	if useAVX512 && n%16 == 0 {
		dot4x4AVX512(&q[0], ldq, &lat[0], offs, n, out)
		return
	}
	dot4x4By(dot4, out, q, ldq, lat, offs, n)
}

//go:noescape
func dot1AVX2(q *float32, k *float32, n int) float32

// dot1 returns the dot product of q[:n] and k[:n], computed exactly as
// one row of dot4.
func dot1(q, k []float32, n int) float32 {
	q, k = q[:n], k[:n]
	if useAVX512 && n%16 == 0 {
		return dot1AVX512(&q[0], &k[0], n)
	}
	m := n &^ 7
	if !useAVX2 || m == 0 {
		return dot1Generic(q, k, n)
	}
	s := dot1AVX2(&q[0], &k[0], m)
	if m < n {
		s += dot1Generic(q[m:], k[m:], n-m)
	}
	return s
}

//go:noescape
func prefetchAVX(p *byte, n int)

// prefetch asks the CPU to bring b into its caches.
func prefetch(b []byte) {
	if len(b) > 0 {
		prefetchAVX(&b[0], len(b))
	}
}

//go:noescape
func swigluAVX512(dst, gate, up *float32, n int)

//go:noescape
func swigluAVX2(dst, gate, up *float32, n int)

// swigluVec computes swigluGeneric on the longest prefix of whole vectors
// (16 values with AVX-512, 8 with AVX2) and returns its length.
func swigluVec(dst, gate, up []float32) int {
	if useAVX512 {
		n := len(dst) &^ 15
		if n > 0 {
			swigluAVX512(&dst[0], &gate[:n][0], &up[:n][0], n)
		}
		return n
	}
	n := len(dst) &^ 7
	if !useAVX2 || n == 0 {
		return 0
	}
	swigluAVX2(&dst[0], &gate[:n][0], &up[:n][0], n)
	return n
}
