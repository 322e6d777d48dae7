//go:build !purego

package tensor

import (
	"bytes"
	"math/rand/v2"
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
		size := 1
		switch tiles := gemmTiles[wt]; {
		case want == "avx512vnni" && tiles.avx512x16p != nil:
			size = 16
		case want == "avx512vnni" && tiles.avx512x8p != nil:
			size = 8
		case want == "avx512vnni" && tiles.avx512 != nil, want == "avx2" && tiles.avx2 != nil:
			size = 4
		}
		if best.size != size || (size > 1) != (len(best.steps) > 0) {
			t.Errorf("%s: %s has tiles of %d tokens (%d steps), want %d", wt, best.name, best.size, len(best.steps), size)
		}
	}
}

// TestPackLanesValues checks the assembly transpose of packLanes16 against
// its pure-Go twin, with padded token strides, and that it writes only the
// value groups of each packed block.
func TestPackLanesValues(t *testing.T) {
	if !dotAVX512 {
		// The transpose is AVX-512 code, run only for the lanes kernels.
		t.Skip("packLanesValues needs AVX-512 (F, BW, VL, VNNI), which this CPU lacks")
	}
	r := rand.New(rand.NewPCG(8, 9))
	for _, nb := range []int{1, 3, 8} {
		lda := nb*292 + 7
		act := make([]byte, 16*lda)
		for i := range act {
			act[i] = byte(r.Uint32())
		}
		got := make([]byte, nb*lanesBlock)
		want := make([]byte, nb*lanesBlock)
		for i := range got {
			got[i], want[i] = 0xA5, 0xA5
		}
		packLanesValues(&got[0], &act[0], lda, nb)
		packLanesValuesGo(&want[0], &act[0], lda, nb)
		if !bytes.Equal(got, want) {
			i := 0
			for got[i] == want[i] {
				i++
			}
			t.Fatalf("%d blocks: byte %d (block %d, offset %d) is %#x, want %#x", nb, i, i/lanesBlock, i%lanesBlock, got[i], want[i])
		}
	}
}
