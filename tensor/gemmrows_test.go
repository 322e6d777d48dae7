package tensor

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestGemmRows4: the rows that the four-row kernels compute, for one token
// or several (weight types with them, fewer than 8 blocks a row; four
// tokens at a time go through the four-row, four-token kernel, the rest
// through the one-token one) equal the single-row kernel of the same
// implementation bit for bit, for row counts around multiples of four,
// token counts around multiples of four, every short length and every
// fill (the
// twin-built implementation has no four-row kernel and is held to the
// pure-Go twin by TestGemmVariants).
func TestGemmRows4(t *testing.T) {
	for _, wt := range dotTypes {
		for _, impl := range gemmImpls(wt) {
			if impl.rows4 == nil {
				continue
			}
			for _, fill := range gemmFills {
				f := gemmFill(t, fill)
				t.Run(fmt.Sprintf("%s/%s/%s", wt, impl.name, fill), func(t *testing.T) {
					r := rand.New(rand.NewPCG(uint64(wt), 91))
					for nb := 1; nb < 8; nb++ {
						for _, rows := range []int{1, 3, 4, 5, 8, 11, 16, 17} {
							for _, m := range []int{1, 3, 4, 9, 16} {
								c := newGemmCase(wt, rows, m, nb, f, r)
								c.check(t, c.run(impl.run), impl.dot)
							}
						}
					}
				})
			}
		}
	}
}
