package tensor

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// TestQuantizeQ8_1Formula checks Q8_1 against ggml's definition: Q8_0's d and
// quants (d = amax/127 as f16, q = round(x·(1/d)) with ties away from zero)
// and s = f16(float32(Σq)·d) with the unrounded d.
func TestQuantizeQ8_1Formula(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	// Ties: amax 127 gives d = 1, so x·(1/d) = x exactly.
	ties := make([]float32, 32)
	copy(ties, []float32{127, 2.5, -2.5, 0.5, -0.5, 1.5, -126.5, 3.49})
	for _, tc := range []struct {
		name string
		x    []float32
	}{
		{"normal", randNormal(r, 1024, 1)},
		{"tiny", randNormal(r, 256, 1e-6)},
		{"large", randNormal(r, 256, 1e4)},
		{"zeros", make([]float32, 64)},
		{"ties", ties},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := tc.x
			dst := make([]byte, len(x)/32*sizeQ8_1)
			if err := Quantize(Q8_1, x, dst); err != nil {
				t.Fatal(err)
			}
			q80 := make([]byte, len(x)/32*sizeQ8_0)
			if err := Quantize(Q8_0, x, q80); err != nil {
				t.Fatal(err)
			}
			for i := range len(x) / 32 {
				xs := x[32*i : 32*i+32]
				b := dst[i*sizeQ8_1 : (i+1)*sizeQ8_1]
				var amax float32
				for _, v := range xs {
					amax = float32(math.Max(float64(amax), math.Abs(float64(v))))
				}
				d := amax / 127
				id := float32(0)
				if d != 0 {
					id = 1 / d
				}
				if got, want := binary.LittleEndian.Uint16(b), F32ToF16(d); got != want {
					t.Fatalf("block %d: d %#04x, want %#04x", i, got, want)
				}
				var sum int32
				for j, v := range xs {
					p := float32(v * id)
					want := int8(math.Trunc(float64(p) + math.Copysign(0.5, float64(p))))
					if got := int8(b[4+j]); got != want {
						t.Fatalf("block %d element %d (%g): q %d, want %d", i, j, v, got, want)
					}
					sum += int32(want)
				}
				if got, want := binary.LittleEndian.Uint16(b[2:]), F32ToF16(float32(sum)*d); got != want {
					t.Fatalf("block %d: s %#04x, want %#04x (Σq = %d)", i, got, want, sum)
				}
				// d and qs are Q8_0's, byte for byte.
				if string(b[:2]) != string(q80[i*sizeQ8_0:i*sizeQ8_0+2]) ||
					string(b[4:]) != string(q80[i*sizeQ8_0+2:(i+1)*sizeQ8_0]) {
					t.Fatalf("block %d differs from the Q8_0 block of the same values", i)
				}
			}
		})
	}
	got := make([]byte, sizeQ8_1)
	if err := Quantize(Q8_1, ties, got); err != nil {
		t.Fatal(err)
	}
	want := []int8{127, 3, -3, 1, -1, 2, -127, 3}
	var sum int32
	for j, w := range want {
		if int8(got[4+j]) != w {
			t.Errorf("ties: q[%d] = %d, want %d", j, int8(got[4+j]), w)
		}
		sum += int32(w)
	}
	if s := F16ToF32(binary.LittleEndian.Uint16(got[2:])); s != float32(sum) {
		t.Errorf("ties: s = %g, want %d", s, sum)
	}
}

// TestQuantizeQ8_1RoundTrip checks that dequantizing a Q8_1 row gives back
// the input within half a quantization step of each block.
func TestQuantizeQ8_1RoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(53, 54))
	x := randNormal(r, 6144, 1)
	q := make([]byte, 6144/32*sizeQ8_1)
	if err := Quantize(Q8_1, x, q); err != nil {
		t.Fatal(err)
	}
	y := make([]float32, len(x))
	if err := Dequantize(Q8_1, q, y); err != nil {
		t.Fatal(err)
	}
	for i := range len(x) / 32 {
		d := F16ToF32(binary.LittleEndian.Uint16(q[i*sizeQ8_1:]))
		for j := 32 * i; j < 32*i+32; j++ {
			// Half a step, plus the f16 rounding of d (2⁻¹¹ relative) times 127.
			if e := math.Abs(float64(y[j] - x[j])); e > float64(d)*(0.5+127*0x1p-11)*1.0001 {
				t.Fatalf("element %d: %g came back as %g (d %g)", j, x[j], y[j], d)
			}
		}
	}
}

func TestQuantizeQ8_1NoAllocs(t *testing.T) {
	x := randNormal(rand.New(rand.NewPCG(55, 56)), 6144, 1)
	q := make([]byte, 6144/32*sizeQ8_1)
	if a := testing.AllocsPerRun(10, func() { _ = Quantize(Q8_1, x, q) }); a != 0 {
		t.Errorf("%g allocations per row", a)
	}
}
