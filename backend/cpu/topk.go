package cpu

import (
	"cmp"
	"slices"
)

// topK appends to dst the indices of the k largest scores (ties: lower
// index first) in ascending index order, using order as scratch.
func topK(dst []int32, scores []float32, k int, order *[]int32) []int32 {
	o := (*order)[:0]
	for i := range scores {
		o = append(o, int32(i))
	}
	slices.SortStableFunc(o, func(a, b int32) int {
		return cmp.Compare(scores[b], scores[a])
	})
	dst = append(dst, o[:min(k, len(o))]...)
	slices.Sort(dst)
	*order = o
	return dst
}
