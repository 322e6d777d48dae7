//go:build !amd64 || purego

package cpu

// spinPause is a no-op where there is no assembly spin-wait hint.
func spinPause() {}
