package cpu

import "math"

// topK appends to dst the indices of the k largest scores (ties: lower
// index first; NaN below every number, -0 equal to +0, as cmp.Compare
// orders floats) in ascending index order, using order as scratch. It runs
// in time linear in len(scores) on average: the k-th largest score is
// found by selection (quickselect on order-preserving integer keys), then
// one pass in index order takes the scores above it and as many equal to
// it, lowest index first, as make k.
func topK(dst []int32, scores []float32, k int, order *[]int32) []int32 {
	n := len(scores)
	if k >= n {
		for i := range n {
			dst = append(dst, int32(i))
		}
		return dst
	}
	if k <= 0 {
		return dst
	}
	keys := *order
	if cap(keys) < n {
		keys = make([]int32, n)
	}
	keys = keys[:n]
	for i, s := range scores {
		keys[i] = scoreKey(s)
	}
	t := selectKth(keys, n-k) // the k-th largest: n-k keys lie below it
	above := 0
	for _, s := range scores {
		if scoreKey(s) > t {
			above++
		}
	}
	ties := k - above // keys equal to t to take, lowest index first
	for i, s := range scores {
		if key := scoreKey(s); key > t || key == t && ties > 0 {
			if key == t {
				ties--
			}
			dst = append(dst, int32(i))
		}
	}
	*order = keys
	return dst
}

// scoreKey maps a float32 to an int32 whose order is cmp.Compare's: every
// NaN lowest, -0 as +0, the rest by value.
func scoreKey(s float32) int32 {
	if s != s {
		return math.MinInt32
	}
	if s == 0 {
		s = 0 // -0 → +0
	}
	b := int32(math.Float32bits(s))
	if b < 0 {
		// Negative floats: larger bit patterns are smaller numbers.
		b ^= math.MaxInt32
	}
	return b
}

// selectKth returns the value that would be at index i of keys sorted
// ascending, reordering keys (Hoare's selection with a median-of-three
// pivot; linear on average).
func selectKth(keys []int32, i int) int32 {
	lo, hi := 0, len(keys)-1
	for lo < hi {
		mid := lo + (hi-lo)/2
		a, b, c := keys[lo], keys[mid], keys[hi]
		p := max(min(a, b), min(max(a, b), c)) // the median of the three
		l, r := lo, hi
		for l <= r {
			for keys[l] < p {
				l++
			}
			for keys[r] > p {
				r--
			}
			if l <= r {
				keys[l], keys[r] = keys[r], keys[l]
				l++
				r--
			}
		}
		// keys[lo..r] <= p <= keys[l..hi], and between them equal to p.
		switch {
		case i <= r:
			hi = r
		case i >= l:
			lo = l
		default:
			return keys[i]
		}
	}
	return keys[i]
}
