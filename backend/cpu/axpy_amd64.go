//go:build !purego

package cpu

import "golang.org/x/sys/cpu"

var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

//go:noescape
func axpyAVX2(y *float32, a float32, x *float32, n int)

// axpy adds a·x to y with fused multiply-adds where the CPU has them (the
// fast path's weighted sums; results may differ from axpyGeneric in the
// last bit).
func axpy(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	n := len(y) &^ 7
	if useAVX2 && n > 0 {
		axpyAVX2(&y[0], a, &x[0], n)
	}
	axpyGeneric(y[n:], a, x[n:])
}
