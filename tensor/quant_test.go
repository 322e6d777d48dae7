package tensor

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func randNormal(r *rand.Rand, n int, sigma float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * sigma)
	}
	return x
}

// TestQuantizeQ8_0Formula checks Q8_0 against its definition: d = amax/127
// as f16, q = round(x·(1/d)) with ties away from zero.
func TestQuantizeQ8_0Formula(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	inputs := map[string][]float32{
		"normal": randNormal(r, 1024, 1),
		"tiny":   randNormal(r, 256, 1e-6),
		"zeros":  make([]float32, 64),
	}
	// Ties: amax 127 gives d = 1, so x·(1/d) = x exactly.
	ties := make([]float32, 32)
	copy(ties, []float32{127, 2.5, -2.5, 0.5, -0.5, 1.5, -126.5, 3.49})
	inputs["ties"] = ties
	for name, x := range inputs {
		t.Run(name, func(t *testing.T) {
			dst := make([]byte, len(x)/32*sizeQ8_0)
			if err := Quantize(Q8_0, x, dst); err != nil {
				t.Fatal(err)
			}
			for i := range len(x) / 32 {
				xs := x[32*i : 32*i+32]
				b := dst[i*sizeQ8_0 : (i+1)*sizeQ8_0]
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
				for j, v := range xs {
					p := v * id
					want := int8(math.Trunc(float64(p) + math.Copysign(0.5, float64(p))))
					if got := int8(b[2+j]); got != want {
						t.Fatalf("block %d element %d (%g): q %d, want %d", i, j, v, got, want)
					}
				}
			}
		})
	}
	got := make([]byte, sizeQ8_0)
	if err := Quantize(Q8_0, ties, got); err != nil {
		t.Fatal(err)
	}
	want := []int8{127, 3, -3, 1, -1, 2, -127, 3}
	for j, w := range want {
		if int8(got[2+j]) != w {
			t.Errorf("ties: q[%d] = %d, want %d", j, int8(got[2+j]), w)
		}
	}
}

// TestQuantizeQ8_KFormula checks Q8_K against its definition: max is the
// first element of largest magnitude, iscale = −127/max, q = min(127,
// round-half-even(iscale·x)), d = 1/iscale, bsums = sums of 16.
func TestQuantizeQ8_KFormula(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	inputs := map[string][]float32{
		"normal": randNormal(r, 1024, 1),
		"tiny":   randNormal(r, 256, 1e-20),
		"zeros":  make([]float32, 256),
	}
	pos := make([]float32, 256)
	copy(pos, []float32{127, 2.5, -2.5, 3.5, 0.5, -0.5})
	inputs["ties-positive-max"] = pos
	neg := make([]float32, 256)
	copy(neg, []float32{-127, 2.5, -2.5, 3.5, 0.5, -0.5})
	inputs["ties-negative-max"] = neg
	sym := make([]float32, 256)
	copy(sym, []float32{-5, 5, 1})
	inputs["equal-magnitudes"] = sym
	for name, x := range inputs {
		t.Run(name, func(t *testing.T) {
			dst := make([]byte, len(x)/256*sizeQ8K)
			if err := Quantize(Q8_K, x, dst); err != nil {
				t.Fatal(err)
			}
			for i := range len(x) / 256 {
				xs := x[256*i : 256*i+256]
				b := dst[i*sizeQ8K : (i+1)*sizeQ8K]
				var vmax float32
				for _, v := range xs {
					if math.Abs(float64(v)) > math.Abs(float64(vmax)) {
						vmax = v
					}
				}
				d := math.Float32frombits(binary.LittleEndian.Uint32(b))
				var iscale float32
				if vmax != 0 {
					iscale = -127 / vmax
					if want := 1 / iscale; d != want {
						t.Fatalf("block %d: d = %g, want %g", i, d, want)
					}
				} else if d != 0 {
					t.Fatalf("block %d: zero block has d = %g", i, d)
				}
				for j, v := range xs {
					want := int8(min(127, math.RoundToEven(float64(iscale*v))))
					if got := int8(b[4+j]); got != want {
						t.Fatalf("block %d element %d (%g): q %d, want %d", i, j, v, got, want)
					}
				}
				for j := range 16 {
					var sum int
					for _, q := range b[4+16*j : 4+16*j+16] {
						sum += int(int8(q))
					}
					if got := int16(binary.LittleEndian.Uint16(b[260+2*j:])); int(got) != sum {
						t.Fatalf("block %d: bsums[%d] = %d, want %d", i, j, got, sum)
					}
				}
			}
		})
	}
	got := make([]byte, sizeQ8K)
	for _, c := range []struct {
		x    []float32
		d    float32
		want []int8
	}{
		{pos, -1, []int8{-127, -2, 2, -4, 0, 0}}, // iscale −1: −2.5 → −2, 3.5 → −4 (ties to even)
		{neg, 1, []int8{-127, 2, -2, 4, 0, 0}},
		{sym, 5.0 / 127, []int8{-127, 127, 25}}, // max is the first of ±5
	} {
		if err := Quantize(Q8_K, c.x, got); err != nil {
			t.Fatal(err)
		}
		if d := math.Float32frombits(binary.LittleEndian.Uint32(got)); d != c.d {
			t.Errorf("x[0] = %g: d = %g, want %g", c.x[0], d, c.d)
		}
		for j, w := range c.want {
			if int8(got[4+j]) != w {
				t.Errorf("x[0] = %g: q[%d] = %d, want %d", c.x[0], j, int8(got[4+j]), w)
			}
		}
	}
}

// TestQuantizeRoundTrip quantizes Gaussian rows (with an outlier, a zero
// sub-block and an all-positive stretch), dequantizes them and bounds the
// error: relative RMS for every type, and the per-element worst case where
// the format fixes it.
func TestQuantizeRoundTrip(t *testing.T) {
	cases := []struct {
		t      Type
		maxRel float64 // RMS error / RMS value
	}{
		{F32, 0},
		{F16, 0.0005},
		{BF16, 0.004},
		{Q8_0, 0.008},
		{Q8_K, 0.016}, // one scale per 256: the outlier costs its block
		{Q6_K, 0.025},
		{Q5_K, 0.045},
		{Q4_K, 0.085},
	}
	r := rand.New(rand.NewPCG(9, 10))
	const n = 4096
	x := randNormal(r, n, 0.02)
	x[100] = 0.5                   // an outlier
	clear(x[512:544])              // a zero sub-block
	for i := 1024; i < 1280; i++ { // a block of positive values (min 0)
		x[i] = float32(math.Abs(float64(x[i]))) + 0.01
	}
	for _, c := range cases {
		t.Run(c.t.String(), func(t *testing.T) {
			size, _ := c.t.RowSize(n)
			q := make([]byte, size)
			if err := Quantize(c.t, x, q); err != nil {
				t.Fatal(err)
			}
			y := make([]float32, n)
			if err := Dequantize(c.t, q, y); err != nil {
				t.Fatal(err)
			}
			var se, sx float64
			for i := range x {
				e := float64(y[i] - x[i])
				se += e * e
				sx += float64(x[i]) * float64(x[i])
				if x[i] == 0 && y[i] != 0 && i >= 512 && i < 544 && c.t != Q4_K && c.t != Q5_K {
					t.Errorf("element %d: 0 became %g", i, y[i])
				}
			}
			rel := math.Sqrt(se / sx)
			t.Logf("%s: relative RMS error %.5f", c.t, rel)
			if rel > c.maxRel {
				t.Errorf("relative RMS error %.5f > %g", rel, c.maxRel)
			}
			if c.t == Q8_0 || c.t == Q8_K {
				// Each element is within half a step of its block's scale.
				bs := c.t.BlockSize()
				for i := range x {
					b := q[i/bs*c.t.TypeSize():]
					d := float64(F16ToF32(binary.LittleEndian.Uint16(b)))
					if c.t == Q8_K {
						d = math.Abs(float64(math.Float32frombits(binary.LittleEndian.Uint32(b))))
					}
					// Q8_0 rounds x/d with the unrounded d, then scales the
					// rounded q (|q| ≤ 127) by the f16 d: allow 127 f16 errors.
					if e := math.Abs(float64(y[i] - x[i])); e > d*(0.5+127*0x1p-11)+1e-12 {
						t.Fatalf("element %d: |%g − %g| = %g > d/2 = %g", i, y[i], x[i], e, d/2)
					}
				}
			}
		})
	}
}

// TestQuantizeKQuantsBeatNaive checks that the scale search pays: the
// K-quant quantizers must do better than rounding with the plain min/max
// grid of each sub-block.
func TestQuantizeKQuantsBeatNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	x := randNormal(r, 2048, 1)
	for _, ty := range []Type{Q4_K, Q5_K} {
		size, _ := ty.RowSize(int64(len(x)))
		q := make([]byte, size)
		y := make([]float32, len(x))
		if err := Quantize(ty, x, q); err != nil {
			t.Fatal(err)
		}
		if err := Dequantize(ty, q, y); err != nil {
			t.Fatal(err)
		}
		nmax := 15.0
		if ty == Q5_K {
			nmax = 31
		}
		var se, naive float64
		for s := 0; s < len(x); s += 32 {
			lo, hi := 0.0, math.Inf(-1)
			for _, v := range x[s : s+32] {
				lo, hi = math.Min(lo, float64(v)), math.Max(hi, float64(v))
			}
			step := (hi - lo) / nmax
			for i := s; i < s+32; i++ {
				e := float64(y[i] - x[i])
				se += e * e
				nv := math.Round((float64(x[i])-lo)/step)*step + lo
				naive += (nv - float64(x[i])) * (nv - float64(x[i]))
			}
		}
		t.Logf("%s: squared error %.4g, naive min/max grid %.4g", ty, se, naive)
		if se >= naive {
			t.Errorf("%s: squared error %.4g not below the naive %.4g", ty, se, naive)
		}
	}
}

func TestQuantizeErrors(t *testing.T) {
	for _, ty := range []Type{Q4_0, Q4_1, Q2_K, Q3_K, IQ4_NL, IQ4_XS, IQ2_XXS, I8, F64} {
		err := Quantize(ty, make([]float32, ty.BlockSize()), make([]byte, ty.TypeSize()))
		if !errors.Is(err, ErrNotSupported) {
			t.Errorf("%s: err = %v, want ErrNotSupported", ty, err)
		} else if want := "quantization to " + ty.String() + " is not supported yet"; err.Error() != want {
			t.Errorf("%s: err = %q, want %q", ty, err, want)
		}
	}
	for _, ty := range []Type{F32, F16, BF16, Q5_0, Q5_1, Q8_0, Q8_1, Q8_K, Q4_K, Q5_K, Q6_K} {
		bs, ts := ty.BlockSize(), ty.TypeSize()
		for _, c := range []struct{ n, nbytes int }{{bs, ts - 1}, {bs, ts + 1}, {bs + 1, ts}, {2 * bs, ts}, {bs, 0}} {
			if c.n%bs != 0 && bs == 1 {
				continue
			}
			if err := Quantize(ty, make([]float32, c.n), make([]byte, c.nbytes)); err == nil {
				t.Errorf("%s: %d elements into %d bytes: no error", ty, c.n, c.nbytes)
			}
		}
	}
}

// TestQuantizeNonFinite makes sure infinities and NaNs give some output
// rather than a panic.
func TestQuantizeNonFinite(t *testing.T) {
	x := make([]float32, 256)
	x[3] = float32(math.Inf(1))
	x[7] = float32(math.NaN())
	x[9] = -1e38
	for _, ty := range []Type{F16, BF16, Q5_0, Q5_1, Q8_0, Q8_K, Q4_K, Q5_K, Q6_K} {
		size, _ := ty.RowSize(256)
		if err := Quantize(ty, x, make([]byte, size)); err != nil {
			t.Errorf("%s: %v", ty, err)
		}
	}
}

func TestRoundAway(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	xs := []float32{0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999997, -0.49999997, 126.5, -127.5, 8388607.5, 1e9, -1e9}
	for range 10000 {
		xs = append(xs, float32(r.NormFloat64()*100), float32(int(r.IntN(255))-127)+0.5)
	}
	for _, x := range xs {
		if got, want := roundAway(x), int32(math.Round(float64(x))); got != want {
			t.Errorf("roundAway(%g) = %d, want %d", x, got, want)
		}
	}
}
