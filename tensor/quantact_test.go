package tensor

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// quantActRows returns test rows of n values: random magnitudes over many
// octaves, ties of opposite sign at the maximum, values landing on .5 after
// scaling (ties of the rounding), zero blocks and zeros among values, signed
// zeros, subnormals, infinities and NaNs (the reference's path).
func quantActRows(r *rand.Rand, n int) map[string][]float32 {
	rows := map[string][]float32{}
	row := func(name string, f func(i int) float32) {
		x := make([]float32, n)
		for i := range x {
			x[i] = f(i)
		}
		rows[name] = x
	}
	row("normal", func(int) float32 { return float32(r.NormFloat64()) })
	row("octaves", func(int) float32 {
		return float32(r.NormFloat64() * math.Exp2(float64(r.IntN(60)-30)))
	})
	row("zeros", func(int) float32 { return 0 })
	row("negzeros", func(int) float32 { return float32(math.Copysign(0, -1)) })
	row("sparse", func(i int) float32 {
		if r.IntN(4) == 0 {
			return float32(r.NormFloat64())
		}
		return 0
	})
	row("zeroblocks", func(i int) float32 {
		if (i/32)%3 == 1 {
			return 0
		}
		return float32(r.NormFloat64())
	})
	// Halves: with amax 127 the scale is exactly 1 (Q8_0) or −1 (Q8_K), so
	// k+0.5 lands on a rounding tie.
	row("halves", func(i int) float32 {
		if i%32 == 0 {
			return 127
		}
		return float32(r.IntN(254)-127) + 0.5
	})
	row("maxties", func(i int) float32 {
		switch i % 256 {
		case 7:
			return -3
		case 9, 200:
			return 3
		}
		return float32(r.Float64()*6 - 3)
	})
	row("maxties2", func(i int) float32 {
		switch i % 32 {
		case 3:
			return 2.5
		case 5:
			return -2.5
		}
		return float32(r.Float64()*5 - 2.5)
	})
	row("integers", func(int) float32 { return float32(r.IntN(255) - 127) })
	row("subnormal", func(int) float32 {
		return math.Float32frombits(uint32(r.IntN(1<<23)) | uint32(r.IntN(2))<<31)
	})
	row("tiny", func(int) float32 { return float32(r.NormFloat64() * 1e-38) })
	row("huge", func(int) float32 { return float32(r.NormFloat64() * 1e38) })
	row("inf", func(i int) float32 {
		if i%50 == 3 {
			return float32(math.Inf(1 - 2*(i%2)))
		}
		return float32(r.NormFloat64())
	})
	row("nan", func(i int) float32 {
		if i == n-1 {
			return float32(math.NaN())
		}
		return float32(r.NormFloat64())
	})
	row("bits", func(int) float32 {
		for {
			if v := math.Float32frombits(r.Uint32()); !math.IsNaN(float64(v)) {
				return v
			}
		}
	})
	return rows
}

// TestQuantizeActivations: the fast activation quantizers write exactly the
// bytes of the reference quantizers (Quantize), whatever the values.
func TestQuantizeActivations(t *testing.T) {
	r := rand.New(rand.NewPCG(71, 72))
	for _, typ := range []Type{Q8_0, Q8_K, Q8_1, Q4_K} {
		for _, n := range []int{256, 512, 768, 1536, 2048, 2304, 5120} {
			for rep := range 8 {
				for name, x := range quantActRows(r, n) {
					t.Run(fmt.Sprintf("%s/%d/%s/%d", typ, n, name, rep), func(t *testing.T) {
						rb, err := typ.RowSize(int64(n))
						if err != nil {
							t.Fatal(err)
						}
						want, got := make([]byte, rb), make([]byte, rb)
						for i := range got {
							got[i] = 0xA5 // no byte may be left unwritten
						}
						if err := Quantize(typ, x, want); err != nil {
							t.Fatal(err)
						}
						if err := QuantizeActivations(typ, x, got); err != nil {
							t.Fatal(err)
						}
						if quantActHasFast(typ) && name != "nan" && !quantActFast(typ, x, make([]byte, rb)) {
							t.Fatal("the fast quantizer refused a row without NaN")
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
}

// TestQuantizeActivationsErrors: bad sizes and types fail as Quantize does.
func TestQuantizeActivationsErrors(t *testing.T) {
	for _, c := range []struct {
		typ    Type
		n, dst int
	}{{Q8_K, 100, 292}, {Q8_K, 256, 291}, {Q8_0, 31, 34}, {Q8_0, 64, 67}, {Q2_K, 256, 84}} {
		err := QuantizeActivations(c.typ, make([]float32, c.n), make([]byte, c.dst))
		want := Quantize(c.typ, make([]float32, c.n), make([]byte, c.dst))
		if err == nil || want == nil || err.Error() != want.Error() {
			t.Errorf("%s %d values into %d bytes: %v, Quantize %v", c.typ, c.n, c.dst, err, want)
		}
	}
}

// BenchmarkQuantizeActivations compares the activation quantizers with the
// reference ones on a 2048-value row (the bench shape's embedding width).
func BenchmarkQuantizeActivations(b *testing.B) {
	r := rand.New(rand.NewPCG(73, 74))
	x := make([]float32, 2048)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	for _, typ := range []Type{Q8_0, Q8_K} {
		rb, _ := typ.RowSize(int64(len(x)))
		dst := make([]byte, rb)
		for _, f := range []struct {
			name string
			q    func(Type, []float32, []byte) error
		}{{"reference", Quantize}, {"activations", QuantizeActivations}} {
			b.Run(typ.String()+"/"+f.name, func(b *testing.B) {
				b.SetBytes(int64(4 * len(x)))
				b.ReportAllocs()
				for b.Loop() {
					if err := f.q(typ, x, dst); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
