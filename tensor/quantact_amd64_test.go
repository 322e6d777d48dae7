//go:build !purego

package tensor

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestQuantQ8KAVX2: the AVX2 Q8_K quantizer writes the reference's bytes,
// on AVX-512 machines too (where QuantizeActivations takes the AVX-512 one).
func TestQuantQ8KAVX2(t *testing.T) {
	if !dotAVX2 {
		t.Skip("no AVX2")
	}
	r := rand.New(rand.NewPCG(73, 74))
	for _, n := range []int{256, 512, 2048, 5120} {
		for rep := range 4 {
			for name, x := range quantActRows(r, n) {
				t.Run(fmt.Sprintf("%d/%s/%d", n, name, rep), func(t *testing.T) {
					want, got := make([]byte, n/256*292), make([]byte, n/256*292)
					for i := range got {
						got[i] = 0xA5
					}
					quantQ8K(x, want)
					ok := quantQ8KAVX2(&x[0], n/256, &got[0])
					if name == "nan" {
						return
					}
					if !ok {
						t.Fatal("refused a row without NaN")
					}
					if !bytes.Equal(got, want) {
						for i := range got {
							if got[i] != want[i] {
								t.Fatalf("byte %d of %d: %#x, reference %#x", i, len(got), got[i], want[i])
							}
						}
					}
				})
			}
		}
	}
}

// TestQuantQ8_0AVX2: the AVX2 Q8_0 quantizer writes the reference's quants
// and float32 scales, on AVX-512 machines too.
func TestQuantQ8_0AVX2(t *testing.T) {
	if !dotAVX2 {
		t.Skip("no AVX2")
	}
	r := rand.New(rand.NewPCG(75, 76))
	for _, n := range []int{32, 64, 2048, 5120} {
		for rep := range 4 {
			for name, x := range quantActRows(r, n) {
				t.Run(fmt.Sprintf("%d/%s/%d", n, name, rep), func(t *testing.T) {
					nb := n / 32
					want, got := make([]byte, nb*sizeQ8_0), make([]byte, nb*sizeQ8_0)
					for i := range got {
						got[i] = 0xA5
					}
					ds := make([]float32, nb)
					ok := quantQ8_0AVX2(&x[0], nb, &got[0], &ds[0])
					if name == "nan" {
						return
					}
					if !ok {
						t.Fatal("refused a row without NaN")
					}
					for i := range nb {
						d, _ := quantBlock32((*[32]float32)(x[32*i:]), (*[32]byte)(want[i*sizeQ8_0+2:]))
						if math.Float32bits(ds[i]) != math.Float32bits(d) {
							t.Fatalf("block %d: scale %g, reference %g", i, ds[i], d)
						}
						if !bytes.Equal(got[i*sizeQ8_0+2:(i+1)*sizeQ8_0], want[i*sizeQ8_0+2:(i+1)*sizeQ8_0]) {
							t.Fatalf("block %d: quants %v, reference %v", i, got[i*sizeQ8_0+2:(i+1)*sizeQ8_0], want[i*sizeQ8_0+2:(i+1)*sizeQ8_0])
						}
					}
				})
			}
		}
	}
}
