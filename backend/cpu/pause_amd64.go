//go:build !purego

package cpu

// spinPause executes PAUSE: a spin-wait hint that saves power and avoids
// the memory-order flush when the awaited value changes.
//
//go:noescape
func spinPause()
