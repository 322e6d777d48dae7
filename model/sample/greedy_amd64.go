//go:build !purego

package sample

import "golang.org/x/sys/cpu"

// useAVX2 selects the assembly scans (x86-64-v3).
var useAVX2 = cpu.X86.HasAVX2

// maxCheckAVX2 returns the maximum of the n values at x (n a positive
// multiple of 32) and whether any of them is NaN or +Inf, in which case the
// maximum is meaningless.
//
//go:noescape
func maxCheckAVX2(x *float32, n int) (m float32, bad bool)

// indexAVX2 returns the index of the first of the n values at x (n a
// multiple of 32) equal to v, or n.
//
//go:noescape
func indexAVX2(x *float32, n int, v float32) int

// maxCheck returns the maximum of x and whether x holds a NaN or +Inf (then
// the maximum is meaningless); x is not empty.
func maxCheck(x []float32) (float32, bool) {
	n := len(x) &^ 31
	if !useAVX2 || n == 0 {
		return maxCheckGeneric(x)
	}
	m, bad := maxCheckAVX2(&x[0], n)
	if n < len(x) {
		mt, badt := maxCheckGeneric(x[n:])
		m, bad = max(m, mt), bad || badt
	}
	return m, bad
}

// index returns the index of the first value of x equal to v, or -1.
func index(x []float32, v float32) int {
	n := len(x) &^ 31
	if !useAVX2 || n == 0 {
		return indexGeneric(x, v)
	}
	if i := indexAVX2(&x[0], n, v); i < n {
		return i
	}
	if i := indexGeneric(x[n:], v); i >= 0 {
		return n + i
	}
	return -1
}
