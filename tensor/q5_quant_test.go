package tensor

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// q5Levels returns the 32 5-bit levels of a Q5_0 or Q5_1 block (qs and qh
// as dequantQ5_0/1 read them), so that tests can check the quantizer's
// choices directly.
func q5Levels(qh uint32, qs []byte) [32]int {
	var q [32]int
	for j := range 16 {
		q[j] = int(qs[j]&15) | int(qh>>j&1)<<4
		q[j+16] = int(qs[j]>>4) | int(qh>>(j+16)&1)<<4
	}
	return q
}

// TestQuantizeQ5Exact checks blocks whose levels follow from the
// definitions by hand: Q5_0's d = max/−16 with q = trunc(x/d + 16.5) (so
// halves round up), Q5_1's d = (max−min)/31, m = min, q = trunc((x−m)/d +
// 0.5).
func TestQuantizeQ5Exact(t *testing.T) {
	ramp := func(f func(j int) float32) []float32 {
		x := make([]float32, 32)
		for j := range x {
			x[j] = f(j)
		}
		return x
	}
	cases := []struct {
		name  string
		t     Type
		x     []float32
		d, m  float32
		level func(j int) int
	}{
		// max −16 gives d = 1: q = x + 16.
		{"q5_0 ramp", Q5_0, ramp(func(j int) float32 { return float32(j - 16) }), 1, 0, func(j int) int { return j }},
		// max +16 gives d = −1: q = 16 − x, clamped to 31 for x = −16.
		{"q5_0 flipped", Q5_0, ramp(func(j int) float32 { return float32(16 - j) }), -1, 0, func(j int) int { return min(31, j) }},
		// Halves: x + 16.5 is a whole number, so x = k + ½ goes up to k+17.
		{"q5_0 halves", Q5_0, ramp(func(j int) float32 {
			if j == 0 {
				return -16
			}
			return float32(j-16) + 0.5
		}), 1, 0, func(j int) int {
			if j == 0 {
				return 0
			}
			return min(31, j+1)
		}},
		{"q5_0 zeros", Q5_0, make([]float32, 32), 0, 0, func(int) int { return 16 }},
		// min 3, max 34: d = 1, q = x − 3.
		{"q5_1 ramp", Q5_1, ramp(func(j int) float32 { return float32(j + 3) }), 1, 3, func(j int) int { return j }},
		// Halves round up: (x − m) + 0.5 is whole.
		{"q5_1 halves", Q5_1, ramp(func(j int) float32 {
			switch j {
			case 0:
				return 0
			case 31:
				return 31
			}
			return float32(j) - 0.5
		}), 1, 0, func(j int) int { return j }},
		{"q5_1 constant", Q5_1, ramp(func(int) float32 { return -2 }), 0, -2, func(int) int { return 0 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := make([]byte, c.t.TypeSize())
			if err := Quantize(c.t, c.x, b); err != nil {
				t.Fatal(err)
			}
			if got := F16ToF32(binary.LittleEndian.Uint16(b)); got != c.d {
				t.Errorf("d = %g, want %g", got, c.d)
			}
			qsAt := 6
			if c.t == Q5_1 {
				qsAt = 8
				if got := F16ToF32(binary.LittleEndian.Uint16(b[2:])); got != c.m {
					t.Errorf("m = %g, want %g", got, c.m)
				}
			}
			q := q5Levels(binary.LittleEndian.Uint32(b[qsAt-4:]), b[qsAt:])
			for j := range q {
				if want := c.level(j); q[j] != want {
					t.Errorf("x[%d] = %g: level %d, want %d", j, c.x[j], q[j], want)
				}
			}
		})
	}
}

// TestQuantizeQ5Bound quantizes Gaussian rows (with an outlier) and checks
// every element against the format's worst case: within half a step of
// its block's scale of the representable range (Q5_0's levels −16…15 reach
// one step less far on the side opposite the largest magnitude), plus the
// f16 rounding of d (and of m for Q5_1) that the dequantized value carries.
func TestQuantizeQ5Bound(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	x := randNormal(r, 2048, 0.02)
	x[77] = 0.7
	for _, ty := range []Type{Q5_0, Q5_1} {
		t.Run(ty.String(), func(t *testing.T) {
			size, _ := ty.RowSize(int64(len(x)))
			q := make([]byte, size)
			if err := Quantize(ty, x, q); err != nil {
				t.Fatal(err)
			}
			y := make([]float32, len(x))
			if err := Dequantize(ty, q, y); err != nil {
				t.Fatal(err)
			}
			for i := range x {
				b := q[i/32*ty.TypeSize():]
				sd := float64(F16ToF32(binary.LittleEndian.Uint16(b)))
				d := math.Abs(sd)
				var outside float64 // distance from x to the levels' range
				if ty == Q5_0 {
					lo, hi := min(-16*sd, 15*sd), max(-16*sd, 15*sd)
					outside = max(0, float64(x[i])-hi, lo-float64(x[i]))
				}
				// |q| ≤ 31 steps of an f16 d (relative error 2⁻¹¹), and for
				// Q5_1 an f16 m off by up to 2⁻¹¹ of |m|.
				slack := 31 * d * 0x1p-11
				if ty == Q5_1 {
					slack += math.Abs(float64(F16ToF32(binary.LittleEndian.Uint16(b[2:])))) * 0x1p-11
				}
				if e := math.Abs(float64(y[i] - x[i])); e > d/2+outside+slack+1e-9 {
					t.Fatalf("element %d: |%g − %g| = %g > d/2 = %g", i, y[i], x[i], e, d/2)
				}
			}
		})
	}
}
