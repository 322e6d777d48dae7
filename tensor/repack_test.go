package tensor

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// packedTypes are the weight types with a repacked layout.
var packedTypes = []Type{Q4_K, Q5_K, Q8_0, Q5_0, Q6_K, IQ4_XS}

// packedCase is a matrix of test blocks, its repacked copy and m tokens.
type packedCase struct {
	wt           Type
	rows, m, nb  int
	data, packed []byte
	act          []byte
	rb, lda      int
	dot          func(x, y []byte, nb int) float32 // the row-major twin
	k            *packedKernel
}

func newPackedCase(t *testing.T, wt Type, rows, m, nb int, f *dotFill, r *rand.Rand) *packedCase {
	t.Helper()
	c := &packedCase{wt: wt, rows: rows, m: m, nb: nb, k: packedKernelOf(wt), dot: dotImpls(wt)[0].fn}
	c.rb = nb * wt.TypeSize()
	for range rows {
		c.data = append(c.data, dotWeights(wt, nb, f, r)...)
	}
	c.lda = nb*wt.VecDotType().TypeSize() + 7
	c.act = make([]byte, m*c.lda)
	for j := range m {
		copy(c.act[j*c.lda:], dotActs(wt, nb, f, r))
	}
	c.packed = make([]byte, rows/PackRows*nb*c.k.block)
	if err := repackLayout(wt, c.packed, c.data, rows, nb*wt.BlockSize()); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRepackRoundTrip checks that UnpackRow gives every row back as it was.
func TestRepackRoundTrip(t *testing.T) {
	for _, wt := range packedTypes {
		r := rand.New(rand.NewPCG(7, uint64(wt)))
		c := newPackedCase(t, wt, 16, 1, 3, &dotFills[0], r)
		row := make([]byte, c.rb)
		for i := range c.rows {
			UnpackRow(wt, row, c.packed, c.nb*wt.BlockSize(), i)
			if !bytes.Equal(row, c.data[i*c.rb:(i+1)*c.rb]) {
				t.Fatalf("%s: row %d differs after repacking", wt, i)
			}
		}
	}
}

// TestPackedTwin checks the repacked layout's pure-Go product against the
// row-major twin: equal where the float math is exact (unit scales), within
// dotTolerance otherwise (both add the same integers, then round their
// float steps in another order).
func TestPackedTwin(t *testing.T) {
	for _, wt := range packedTypes {
		for fi := range dotFills {
			f := &dotFills[fi]
			t.Run(fmt.Sprintf("%s/%s", wt, f.name), func(t *testing.T) {
				r := rand.New(rand.NewPCG(uint64(fi), uint64(wt)))
				c := newPackedCase(t, wt, 8, 3, 5, f, r)
				for j := range c.m {
					a := c.act[j*c.lda:]
					got := c.k.twin(c.packed, c.nb, a)
					for i := range PackRows {
						w := c.data[i*c.rb : (i+1)*c.rb]
						want := c.dot(w, a, c.nb)
						mag := dotMagnitude(t, wt, w, a[:c.nb*wt.VecDotType().TypeSize()], c.nb*wt.BlockSize())
						exact := f.unit && mag < 1<<24
						if exact && got[i] != want || math.Abs(float64(got[i])-float64(want)) > dotTolerance(c.nb, mag) {
							t.Errorf("row %d token %d: %g, row-major twin %g (magnitude %g)", i, j, got[i], want, mag)
						}
					}
				}
			})
		}
	}
}

// TestPackedGemm checks this CPU's repacked product against the layout's
// twin (bit for bit where the float math is exact, within dotTolerance
// otherwise), that every token gets the same bits whatever the number of
// tokens in the call (prefill equals decoding), and that the gaps of the
// output stay untouched.
func TestPackedGemm(t *testing.T) {
	for _, wt := range packedTypes {
		impls := packedImpls(wt)
		if len(impls) == 0 {
			t.Logf("%s: no packed product on this CPU", wt)
		}
		for name, gemm := range impls {
			for _, fill := range []string{"random", "unit", "max", "extreme"} {
				t.Run(fmt.Sprintf("%s/%s/%s", wt, name, fill), func(t *testing.T) {
					f := gemmFill(t, fill)
					r := rand.New(rand.NewPCG(uint64(wt), uint64(len(fill))))
					c := newPackedCase(t, wt, 24, 15, 4, f, r) // 15 tokens: an eight-token tile, a four-token one and three alone
					n := c.nb * wt.BlockSize()
					ldo := c.rows + 3
					out := make([]float32, c.m*ldo)
					for i := range out {
						out[i] = float32(math.NaN())
					}
					gemm(c.packed, c.act, c.lda, out, ldo, c.rows, c.m, n)
					gb := c.nb * c.k.block
					for j := range c.m {
						a := c.act[j*c.lda:]
						one := make([]float32, c.rows)
						gemm(c.packed, a, c.lda, one, c.rows, c.rows, 1, n)
						for g := range c.rows / PackRows {
							want := c.k.twin(c.packed[g*gb:(g+1)*gb], c.nb, a)
							for i := range PackRows {
								row := g*PackRows + i
								got := out[j*ldo+row]
								w := c.data[row*c.rb : (row+1)*c.rb]
								mag := dotMagnitude(t, wt, w, a[:c.nb*wt.VecDotType().TypeSize()], n)
								exact := f.unit && mag < 1<<24
								if exact && got != want[i] || math.Abs(float64(got)-float64(want[i])) > dotTolerance(c.nb, mag) {
									t.Errorf("row %d token %d: %g, twin %g (magnitude %g)", row, j, got, want[i], mag)
								}
								if math.Float32bits(one[row]) != math.Float32bits(got) {
									t.Errorf("row %d token %d: %g alone, %g among %d tokens", row, j, one[row], got, c.m)
								}
							}
						}
						for r := c.rows; r < ldo; r++ {
							if v := out[j*ldo+r]; !math.IsNaN(float64(v)) {
								t.Fatalf("token %d: gap %d written (%g)", j, r, v)
							}
						}
					}
				})
			}
		}
	}
}

// TestRepackErrors checks the shapes Repack refuses.
func TestRepackErrors(t *testing.T) {
	if _, ok := PackedGemm(Q8_0); !ok {
		t.Skip("no repacked product on this CPU")
	}
	for _, tc := range []struct {
		wt         Type
		rows, cols int
	}{{Q8_0, 12, 256}, {Q8_0, 8, 100}, {Q8_0, 0, 256}, {F32, 8, 256}, {Q4_1, 8, 256}} {
		if _, err := PackedSize(tc.wt, tc.rows, tc.cols); err == nil {
			t.Errorf("PackedSize(%s, %d, %d): no error", tc.wt, tc.rows, tc.cols)
		}
	}
	if err := Repack(Q8_0, make([]byte, 10), make([]byte, 8*8*34), 8, 256); err == nil {
		t.Error("Repack into a short buffer: no error")
	}
}

// BenchmarkPackedGemm compares, on one thread, a prompt-sized product with
// the repacked layout against the row-major kernels of the same type
// (BatchGemmKernel's, as the fast path runs them), in multiply-adds per
// second (GOPS counts two operations each).
func BenchmarkPackedGemm(b *testing.B) {
	const rows, n = 1536, 2048
	r := rand.New(rand.NewPCG(49, 50))
	for _, wt := range packedTypes {
		packed, ok := PackedGemm(wt)
		if !ok {
			if packed, ok = packedImpls(wt)["avx2"]; !ok {
				b.Skipf("%s: no packed product on this CPU", wt)
			}
		}
		row, _, err := BatchGemmKernel(wt)
		if err != nil {
			b.Fatal(err)
		}
		nb := n / wt.BlockSize()
		w := dotWeights(wt, rows*nb, &dotFills[0], r)
		pw := make([]byte, rows/PackRows*nb*packedKernelOf(wt).block)
		if err := repackLayout(wt, pw, w, rows, n); err != nil {
			b.Fatal(err)
		}
		for _, m := range []int{1, 4, 128} {
			act := dotActs(wt, m*nb, &dotFills[0], r)
			lda := len(act) / m
			out := make([]float32, m*rows)
			for _, layout := range []string{"rows", "packed"} {
				b.Run(fmt.Sprintf("%s/%s/m=%d", wt, layout, m), func(b *testing.B) {
					b.SetBytes(int64(len(w)))
					for b.Loop() {
						if layout == "packed" {
							packed(pw, act, lda, out, rows, rows, m, n)
						} else {
							row(w, len(w)/rows, act, lda, out, rows, rows, m, n)
						}
					}
					b.ReportMetric(float64(2*rows*m*n)*float64(b.N)/float64(b.Elapsed().Nanoseconds()), "GOPS")
				})
			}
		}
	}
}
