//go:build !purego

package cpu

import "math"

//go:noescape
func expTile4AVX2(sc *[4]float32, m *[4]float32, c *expNegConsts, pairs int)

// expNegVec holds expNeg's constants as the vector kernel reads them.
var expNegVec = func() (c expNegConsts) {
	for i, v := range []float32{expLog2e, 0.5, expLn2hi, expLn2lo, 1, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, expLimit} {
		for l := range 8 {
			c[i][l] = math.Float32bits(v)
		}
	}
	for l := range 8 {
		c[11][l] = 127
	}
	return c
}()

// expTile4Vec computes the weights of the tile's first keys in pairs with
// AVX2 and returns how many it did.
func expTile4Vec(sc [][4]float32, m *[4]float32) int {
	pairs := len(sc) / 2
	if !useAVX2 || pairs == 0 {
		return 0
	}
	expTile4AVX2(&sc[0], m, &expNegVec, pairs)
	return 2 * pairs
}
