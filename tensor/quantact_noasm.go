//go:build (!amd64 && !arm64) || purego

package tensor

// quantActFast has no assembly here (amd64 and arm64 have theirs):
// Quantize does the work.
func quantActFast(Type, []float32, []byte) bool { return false }

// quantActHasFast reports whether quantActFast handles t: never here.
func quantActHasFast(Type) bool { return false }
