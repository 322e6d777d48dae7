package tensor

import (
	"math/rand/v2"
	"testing"
)

// benchRow is a GLM-5 row length (n_embd); types whose block does not divide
// it would use 2048, but every implemented type divides 6144.
const benchRow = 6144

// BenchmarkDequantize measures one GLM-5-sized row per implemented type;
// the bytes are the quantized bytes read.
func BenchmarkDequantize(b *testing.B) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, ty := range implemented {
		n := benchRow
		if n%ty.BlockSize() != 0 {
			n = 2048
		}
		src := randomBlocks(r, ty, n/ty.BlockSize())
		dst := make([]float32, n)
		b.Run(ty.String(), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				if err := Dequantize(ty, src, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkQuantize measures quantizing one row of activations (Q8_0, Q8_K)
// or weights (the K-quants); the bytes are the float32 bytes read.
func BenchmarkQuantize(b *testing.B) {
	r := rand.New(rand.NewPCG(15, 16))
	src := randNormal(r, benchRow, 1)
	for _, ty := range []Type{Q8_0, Q8_K, Q4_K, Q5_K, Q6_K, F16, BF16} {
		size, _ := ty.RowSize(benchRow)
		dst := make([]byte, size)
		b.Run(ty.String(), func(b *testing.B) {
			b.SetBytes(4 * benchRow)
			b.ReportAllocs()
			for b.Loop() {
				if err := Quantize(ty, src, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
