//go:build !amd64 || purego

package sample

// maxCheck returns the maximum of x and whether x holds a NaN or +Inf (then
// the maximum is meaningless); x is not empty.
func maxCheck(x []float32) (float32, bool) { return maxCheckGeneric(x) }

// index returns the index of the first value of x equal to v, or -1.
func index(x []float32, v float32) int { return indexGeneric(x, v) }
