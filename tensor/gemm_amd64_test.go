//go:build !purego

package tensor

import (
	"strings"
	"testing"
)

// TestGemmTier checks that the chosen implementation uses the instruction
// set of the dot product DotKernel chooses, so GODEBUG=cpu.avx512f=off (or
// cpu.avx2=off) drops both together, and that the types with tile kernels
// get them.
func TestGemmTier(t *testing.T) {
	for _, wt := range dotTypes {
		k := dotKernels[wt]
		want := "generic"
		switch {
		case dotAVX512 && k.avx512 != nil:
			want = "avx512vnni"
		case dotAVX2 && k.avx2 != nil:
			want = "avx2"
		}
		best := gemmBest(wt)
		if best.name != want && !strings.HasPrefix(best.name, want+"/") {
			t.Errorf("%s: chose %s, want the %s tier", wt, best.name, want)
		}
		var tile gemmTileFunc
		switch tiles := gemmTiles[wt]; want {
		case "avx512vnni":
			tile = tiles.avx512
		case "avx2":
			tile = tiles.avx2
		}
		if tile != nil && (best.tile == nil || best.size != gemmTileTokens) {
			t.Errorf("%s: %s does not use its tile kernel", wt, best.name)
		}
		if tile == nil && (best.tile != nil || best.size != 1) {
			t.Errorf("%s: %s has a tile kernel of %d tokens that the table lacks", wt, best.name, best.size)
		}
	}
}
