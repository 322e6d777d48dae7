package cpu

// expTile4 replaces each score sc[i][j] of a tile of keys by its softmax
// weight expNeg(sc[i][j] − m[j]) (query j's running maximum m[j]) and adds
// the weights to l[j], key after key: what the online softmax of four
// queries does per tile. A score of −Inf (a key past the query) gets 0.
// The vector kernel computes expNeg's float32 operations in expNeg's
// order, so the weights are expNeg's bit for bit, and the sums are the
// same additions in the same order.
func expTile4(sc [][4]float32, m, l *[4]float32) {
	n := expTile4Vec(sc, m)
	for i := range sc {
		for j := range 4 {
			e := sc[i][j]
			if i >= n {
				e = expNeg(e - m[j])
				sc[i][j] = e
			}
			l[j] += e
		}
	}
}

// expNegConsts are expNeg's constants as float32, each repeated eight
// times for the vector kernel's memory operands: log2e, 0.5, ln2hi,
// ln2lo, 1, 1/2, 1/6, 1/24, 1/120, 1/720, the lower limit −87 and the
// exponent bias 127 (an int32).
type expNegConsts [12][8]uint32
