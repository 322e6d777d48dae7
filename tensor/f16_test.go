package tensor

import (
	"math"
	"testing"
)

// f16Value is the value of binary16 bits h computed in float64 from the
// IEEE 754 definition, independently of F16ToF32.
func f16Value(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	man := float64(h & 0x3ff)
	switch exp {
	case 0:
		return sign * math.Ldexp(man, -24)
	case 0x1f:
		if man != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	}
	return sign * math.Ldexp(1+man/1024, exp-15)
}

func TestF16ToF32Exhaustive(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		got := F16ToF32(h)
		want := f16Value(h)
		if math.IsNaN(want) {
			if !math.IsNaN(float64(got)) {
				t.Fatalf("F16ToF32(%#04x) = %g, want NaN", h, got)
			}
			continue
		}
		if float64(got) != want || math.Signbit(float64(got)) != math.Signbit(want) {
			t.Fatalf("F16ToF32(%#04x) = %g, want %g", h, got, want)
		}
		if back := F32ToF16(got); back != h {
			t.Fatalf("F32ToF16(F16ToF32(%#04x)) = %#04x", h, back)
		}
	}
}

// TestF32ToF16Rounding checks round-to-nearest-even at every midpoint
// between consecutive finite binary16 values of the same sign, and just
// either side of it.
func TestF32ToF16Rounding(t *testing.T) {
	for _, sign := range []uint16{0, 0x8000} {
		for h := uint16(0); h < 0x7bff; h++ { // 0x7bff → Inf: see the cases below
			lo, hi := f16Value(sign|h), f16Value(sign|(h+1))
			mid := float32((lo + hi) / 2) // exact: binary16 midpoints fit in float32
			even := sign | h
			if h&1 == 1 {
				even = sign | (h + 1)
			}
			if got := F32ToF16(mid); got != even {
				t.Fatalf("F32ToF16(%g) = %#04x, want %#04x (tie to even)", mid, got, even)
			}
			toward0 := math.Nextafter32(mid, 0)
			away := math.Nextafter32(mid, float32(2*hi))
			if got := F32ToF16(toward0); got != sign|h {
				t.Fatalf("F32ToF16(%g) = %#04x, want %#04x", toward0, got, sign|h)
			}
			if got := F32ToF16(away); got != sign|(h+1) {
				t.Fatalf("F32ToF16(%g) = %#04x, want %#04x", away, got, sign|(h+1))
			}
		}
	}
	cases := []struct {
		f    float32
		want uint16
	}{
		{65504, 0x7bff},
		{65519.99, 0x7bff},
		{65520, 0x7c00}, // the midpoint to the next (infinite) step rounds up
		{1e10, 0x7c00},
		{-1e10, 0xfc00},
		{float32(math.Inf(1)), 0x7c00},
		{float32(math.Inf(-1)), 0xfc00},
		{0x1p-25, 0},             // half the smallest subnormal: tie to even 0
		{0x1.000002p-25, 0x0001}, // just above it
		{1e-30, 0},               // underflow
		{-1e-30, 0x8000},         // keeps the sign
		{0x1.ffcp-15, 0x0400},    // rounds up from the largest subnormal into the smallest normal
		{float32(math.Copysign(0, -1)), 0x8000},
	}
	for _, c := range cases {
		if got := F32ToF16(c.f); got != c.want {
			t.Errorf("F32ToF16(%g) = %#04x, want %#04x", c.f, got, c.want)
		}
	}
	if got := F32ToF16(float32(math.NaN())); got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
		t.Errorf("F32ToF16(NaN) = %#04x, not a NaN", got)
	}
}

func TestBF16(t *testing.T) {
	cases := []struct {
		bits uint32 // float32 bits
		want uint16
	}{
		{0x3f800000, 0x3f80},        // 1.0 exact
		{0x3f808000, 0x3f80},        // tie, even stays
		{0x3f818000, 0x3f82},        // tie, odd rounds up
		{0x3f808001, 0x3f81},        // above the tie
		{0x3f807fff, 0x3f80},        // below the tie
		{0x7f7fffff, 0x7f80},        // max float32 rounds to infinity
		{0x80000001, 0x8000},        // tiny negative subnormal rounds to −0
		{0x7f800000, 0x7f80},        // +Inf
		{0x7f800001, 0x7fc0},        // signalling NaN becomes quiet, keeps upper bits
		{0xffc12345, 0xffc1 | 0x40}, // quiet NaN
	}
	for _, c := range cases {
		if got := F32ToBF16(math.Float32frombits(c.bits)); got != c.want {
			t.Errorf("F32ToBF16(%#08x) = %#04x, want %#04x", c.bits, got, c.want)
		}
	}
	for i := range 1 << 16 {
		h := uint16(i)
		f := BF16ToF32(h)
		if math.Float32bits(f) != uint32(h)<<16 {
			t.Fatalf("BF16ToF32(%#04x) bits %#08x", h, math.Float32bits(f))
		}
		if !math.IsNaN(float64(f)) && F32ToBF16(f) != h {
			t.Fatalf("F32ToBF16(BF16ToF32(%#04x)) = %#04x", h, F32ToBF16(f))
		}
	}
}
