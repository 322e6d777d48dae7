package tensor

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// gemmCase is one multi-token product of test blocks: rows weight rows and
// m activation rows of nb blocks, with padded strides.
type gemmCase struct {
	wt               Type
	rows, m, nb      int
	w, act           []byte
	ldw, lda, ldo    int
	wsize, asize, bs int
	// rounds: the implementation under test has a tile that agrees with
	// the single-row kernel within float rounding (gemmKernel.rounds).
	rounds bool
}

// newGemmCase fills a case from the dot tests' generators; each row and
// token gets its own blocks, and the strides leave gaps after each row.
func newGemmCase(wt Type, rows, m, nb int, f *dotFill, r *rand.Rand) *gemmCase {
	c := &gemmCase{wt: wt, rows: rows, m: m, nb: nb, bs: wt.BlockSize()}
	c.wsize = nb * wt.TypeSize()
	c.asize = nb * wt.VecDotType().TypeSize()
	c.ldw, c.lda, c.ldo = c.wsize+5, c.asize+3, rows+2
	c.w = make([]byte, rows*c.ldw)
	for i := range rows {
		copy(c.w[i*c.ldw:], dotWeights(wt, nb, f, r))
	}
	c.act = make([]byte, m*c.lda)
	for j := range m {
		copy(c.act[j*c.lda:], dotActs(wt, nb, f, r))
	}
	return c
}

// run computes the case with f into a fresh output whose gaps hold NaN.
func (c *gemmCase) run(f func(w []byte, ldw int, act []byte, lda int, out []float32, ldo int, rows, m, n int)) []float32 {
	out := make([]float32, c.m*c.ldo)
	for i := range out {
		out[i] = float32(math.NaN())
	}
	f(c.w, c.ldw, c.act, c.lda, out, c.ldo, c.rows, c.m, c.nb*c.bs)
	return out
}

// check compares out with dot applied to each (row, token) pair, bit for
// bit (within dotTolerance where c.rounds), and the gaps with NaN.
func (c *gemmCase) check(t *testing.T, out []float32, dot func(x, y []byte, nb int) float32) {
	t.Helper()
	for j := range c.m {
		for r := range c.ldo {
			got := out[j*c.ldo+r]
			if r >= c.rows {
				if !math.IsNaN(float64(got)) {
					t.Fatalf("rows %d tokens %d blocks %d: wrote %g into the gap at token %d, offset %d", c.rows, c.m, c.nb, got, j, r)
				}
				continue
			}
			want := dot(c.w[r*c.ldw:], c.act[j*c.lda:], c.nb)
			if c.rounds && math.Float32bits(got) != math.Float32bits(want) {
				w, a := c.w[r*c.ldw:r*c.ldw+c.wsize], c.act[j*c.lda:j*c.lda+c.asize]
				mag := dotMagnitude(t, c.wt, w, a, c.nb*c.bs)
				if math.Abs(float64(got)-float64(want)) <= dotTolerance(c.nb, mag) {
					continue
				}
			}
			if math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("rows %d tokens %d blocks %d: row %d token %d: %g, single-row kernel %g (differ by %g)",
					c.rows, c.m, c.nb, r, j, got, want, got-want)
			}
		}
	}
}

// gemmLengths returns the block counts tested for weight type t: short rows
// and a GLM-5 row of 6144 elements.
func gemmLengths(t Type) []int {
	switch t.BlockSize() {
	case 1:
		return []int{1, 9, 33, 6144}
	case 32:
		return []int{1, 3, 11, 6144 / 32}
	}
	return []int{1, 2, 24}
}

// gemmFills are the dot test fills the multi-token tests use.
var gemmFills = []string{"random", "unit", "max", "extreme", "mixed"}

func gemmFill(t *testing.T, name string) *dotFill {
	for i := range dotFills {
		if dotFills[i].name == name {
			return &dotFills[i]
		}
	}
	t.Fatalf("no fill %q", name)
	return nil
}

// TestGemmVariants checks every implementation that runs on this CPU
// against the single-row kernel it pairs with, bit for bit, for token
// counts 1 to 13 (full tiles of 8, 4 and 2 and tails), and 16 to 35 in
// steps of 3 where the tiles of 16 come in, with one to three rows; the
// twin variant is thereby held to the pure-Go dot twin.
func TestGemmVariants(t *testing.T) {
	for _, wt := range dotTypes {
		impls := gemmImpls(wt)
		if len(impls) == 0 || impls[0].name != "generic" {
			t.Fatalf("%s: no twin among %d variants", wt, len(impls))
		}
		for _, impl := range impls {
			for _, fill := range gemmFills {
				f := gemmFill(t, fill)
				t.Run(fmt.Sprintf("%s/%s/%s", wt, impl.name, fill), func(t *testing.T) {
					r := rand.New(rand.NewPCG(uint64(wt), uint64(len(impl.name))*7+uint64(len(fill))))
					for _, nb := range gemmLengths(wt) {
						for m := 1; m <= 35; m++ {
							if m > 13 && (m < 16 || (m-16)%3 != 0) {
								continue
							}
							rows := 1 + m%3
							if nb*wt.BlockSize() >= 6144 && m != 4 && m != 13 && m != 34 {
								continue // long rows: full tiles and ones with a tail
							}
							c := newGemmCase(wt, rows, m, nb, f, r)
							c.rounds = impl.rounds
							c.check(t, c.run(impl.run), impl.dot)
						}
					}
				})
			}
		}
	}
}

// TestGemmSmallPacked: with enough rows (GemmPackRows) the tokens
// past the groups of eight go through the packed four- and two-token
// tiles, each token in its own slot of a group of its own; every result
// still equals the single-row kernel's, for every remainder and with
// groups of eight before it.
func TestGemmSmallPacked(t *testing.T) {
	for _, wt := range []Type{Q4_K, Q6_K} {
		for _, impl := range gemmImpls(wt) {
			if impl.small == nil {
				continue
			}
			t.Run(wt.String()+"/"+impl.name, func(t *testing.T) {
				f := gemmFill(t, "random")
				r := rand.New(rand.NewPCG(uint64(wt), 77))
				for _, m := range []int{2, 3, 4, 5, 6, 7, 10, 13, 15, 22} {
					for _, nb := range []int{1, 3} {
						c := newGemmCase(wt, GemmPackRows+1, m, nb, f, r)
						c.rounds = impl.rounds
						c.check(t, c.run(impl.run), impl.dot)
					}
				}
			})
		}
	}
}

// TestGemmNearTwin checks the fastest implementation against the pure-Go
// twin within the dot tests' bound (the single-row assembly kernels may
// round differently from the twin; see dotTolerance), and exactly where the
// float math is exact.
func TestGemmNearTwin(t *testing.T) {
	for _, wt := range dotTypes {
		t.Run(wt.String(), func(t *testing.T) {
			impls := gemmImpls(wt)
			twin, best := impls[0].dot, gemmBest(wt)
			for _, fill := range []string{"random", "unit"} {
				f := gemmFill(t, fill)
				r := rand.New(rand.NewPCG(uint64(wt)+100, uint64(len(fill))))
				nb := gemmLengths(wt)[2]
				c := newGemmCase(wt, 3, 6, nb, f, r)
				out := c.run(best.run)
				n := nb * c.bs
				for j := range c.m {
					for row := range c.rows {
						w, a := c.w[row*c.ldw:row*c.ldw+c.wsize], c.act[j*c.lda:j*c.lda+c.asize]
						got, want := out[j*c.ldo+row], twin(w, a, nb)
						mag := dotMagnitude(t, wt, w, a, n)
						exact := f.unit && mag < 1<<24 && c.bs > 1
						if exact && got != want || math.Abs(float64(got)-float64(want)) > dotTolerance(nb, mag) {
							t.Errorf("%s: row %d token %d: %g, twin %g (magnitude %g)", fill, row, j, got, want, mag)
						}
					}
				}
			}
		})
	}
}

// TestGemmKernel checks the public entry point: GemmKernel's function
// equals DotKernel's per (row, token), its tile is positive, and types
// without a dot kernel fail with ErrNotSupported.
func TestGemmKernel(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for _, wt := range dotTypes {
		t.Run(wt.String(), func(t *testing.T) {
			g, tile, err := GemmKernel(wt)
			if err != nil {
				t.Fatal(err)
			}
			if tile < 1 {
				t.Fatalf("tile %d", tile)
			}
			d, err := DotKernel(wt)
			if err != nil {
				t.Fatal(err)
			}
			nb := gemmLengths(wt)[2]
			c := newGemmCase(wt, 5, 2*tile+3, nb, &dotFills[0], r)
			c.rounds = gemmBest(wt).rounds
			c.check(t, c.run(g), func(x, y []byte, nb int) float32 { return d(x, y, nb*c.bs) })
		})
	}
	for _, wt := range []Type{TQ1_0, TQ2_0, Q8_K, Type(99)} {
		if _, _, err := GemmKernel(wt); !errors.Is(err, ErrNotSupported) {
			t.Errorf("GemmKernel(%s) = %v, want ErrNotSupported", wt, err)
		}
	}
}

// TestBatchGemmKernel checks the batch entry point: each output agrees
// with DotKernel's within dotTolerance (bit for bit where it returns
// GemmKernel's own product), across tile sizes and tails and row counts
// below, at and past a multiple of the lanes kernels' four rows, and types
// without a dot kernel fail with ErrNotSupported.
func TestBatchGemmKernel(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	for _, wt := range dotTypes {
		t.Run(wt.String(), func(t *testing.T) {
			g, tile, err := BatchGemmKernel(wt)
			if err != nil {
				t.Fatal(err)
			}
			_, exactTile, _ := GemmKernel(wt)
			if tile != exactTile {
				t.Errorf("tile %d, GemmKernel's %d", tile, exactTile)
			}
			d, err := DotKernel(wt)
			if err != nil {
				t.Fatal(err)
			}
			impls := gemmImpls(wt)
			nb := gemmLengths(wt)[2]
			for _, m := range []int{1, 16, 2*tile + 3, 37} {
				for _, rows := range []int{1, 3, 4, 5, 8, 11} {
					c := newGemmCase(wt, rows, m, nb, &dotFills[0], r)
					c.rounds = impls[len(impls)-1].rounds
					c.check(t, c.run(g), func(x, y []byte, nb int) float32 { return d(x, y, nb*c.bs) })
				}
			}
		})
	}
	for _, wt := range []Type{TQ1_0, TQ2_0, Q8_K, Type(99)} {
		if _, _, err := BatchGemmKernel(wt); !errors.Is(err, ErrNotSupported) {
			t.Errorf("BatchGemmKernel(%s) = %v, want ErrNotSupported", wt, err)
		}
	}
}

// TestGemmBlocking runs enough rows and tokens to span several row and
// token blocks of the blocked loops, with tiles and tails in each token
// block.
func TestGemmBlocking(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 44))
	for _, wt := range []Type{Q4_K, Q8_0} {
		g, tile, _ := GemmKernel(wt)
		d, _ := DotKernel(wt)
		nb := 4096 / wt.BlockSize()
		wsize, asize := nb*wt.TypeSize(), nb*wt.VecDotType().TypeSize()
		rows := gemmRowBytes/wsize + 7
		// Rows repeat five distinct rows and tokens three (the strides stay
		// those of real rows), so the test stays small.
		c := &gemmCase{wt: wt, rows: rows, m: gemmTokenBytes/asize + tile + 3, nb: nb, bs: wt.BlockSize(),
			wsize: wsize, asize: asize, ldw: wsize, lda: asize, ldo: rows, rounds: gemmBest(wt).rounds}
		ws := dotWeights(wt, 5*nb, &dotFills[0], r)
		c.w = make([]byte, rows*wsize)
		for i := range rows {
			copy(c.w[i*wsize:], ws[i%5*wsize:(i%5+1)*wsize])
		}
		acts := dotActs(wt, 3*nb, &dotFills[0], r)
		c.act = make([]byte, c.m*asize)
		for j := range c.m {
			copy(c.act[j*asize:], acts[j%3*asize:(j%3+1)*asize])
		}
		c.check(t, c.run(g), func(x, y []byte, nb int) float32 { return d(x, y, nb*c.bs) })
	}
}

// TestGemmShapes checks the edge cases: nothing to do, empty rows, and
// arguments that must panic instead of reading or writing out of bounds.
func TestGemmShapes(t *testing.T) {
	g, _, err := GemmKernel(Q4_K)
	if err != nil {
		t.Fatal(err)
	}
	g(nil, 0, nil, 0, nil, 0, 0, 5, 256) // no rows
	g(nil, 0, nil, 0, nil, 0, 5, 0, 256) // no tokens
	out := []float32{1, 2, 3, 4}
	g(nil, 0, nil, 0, out, 2, 2, 2, 0) // empty rows: zeros
	for i, v := range out {
		if v != 0 {
			t.Errorf("empty rows: out[%d] = %g", i, v)
		}
	}
	for _, tc := range []struct {
		name          string
		w, act, out   int // lengths
		ldw, lda, ldo int
		rows, m, n    int
	}{
		{"partial block", 144, 292, 1, 144, 292, 1, 1, 1, 128},
		{"negative n", 144, 292, 1, 144, 292, 1, 1, 1, -256},
		{"negative stride", 288, 292, 2, -144, 292, 1, 2, 1, 256},
		{"short weights", 287, 292, 2, 144, 292, 2, 2, 1, 256},
		{"short activations", 144, 583, 2, 144, 292, 1, 1, 2, 256},
		{"short output", 144, 584, 2, 144, 292, 2, 1, 2, 256},
		{"overflowing stride", 288, 292, 2, math.MaxInt / 2, 292, 1, 3, 1, 256},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			g(make([]byte, tc.w), tc.ldw, make([]byte, tc.act), tc.lda, make([]float32, tc.out), tc.ldo, tc.rows, tc.m, tc.n)
		})
	}
}

func TestGemmNoAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(45, 46))
	for _, wt := range dotTypes {
		g, tile, _ := GemmKernel(wt)
		nb := 2048 / wt.BlockSize()
		c := newGemmCase(wt, 4, tile+1, nb, &dotFills[0], r)
		out := make([]float32, c.m*c.ldo)
		if a := testing.AllocsPerRun(5, func() {
			g(c.w, c.ldw, c.act, c.lda, out, c.ldo, c.rows, c.m, nb*c.bs)
		}); a != 0 {
			t.Errorf("%s: %g allocations per call", wt, a)
		}
	}
}

// BenchmarkGemm measures a block of 16 weight rows of 6144 elements against
// 8 tokens, for each implementation ("dot8": its single-row kernel called
// for each token instead). The bytes are the weight bytes, read once per
// call, so MB/s is weight bandwidth; GOPS counts a multiply and an add per
// weight and token.
func BenchmarkGemm(b *testing.B) {
	const rows, m, n = 16, 8, 6144
	r := rand.New(rand.NewPCG(47, 48))
	for _, wt := range dotTypes {
		nb := n / wt.BlockSize()
		c := newGemmCase(wt, rows, m, nb, &dotFills[0], r)
		c.ldw, c.lda, c.ldo = c.wsize, c.asize, rows
		c.w = dotWeights(wt, rows*nb, &dotFills[0], r)
		c.act = dotActs(wt, m*nb, &dotFills[0], r)
		out := make([]float32, m*rows)
		for _, impl := range gemmImpls(wt) {
			ops := float64(2 * rows * m * n)
			b.Run(wt.String()+"/"+impl.name, func(b *testing.B) {
				b.SetBytes(int64(rows * c.wsize))
				b.ReportAllocs()
				for b.Loop() {
					impl.run(c.w, c.ldw, c.act, c.lda, out, c.ldo, rows, m, n)
				}
				b.ReportMetric(ops*float64(b.N)/float64(b.Elapsed().Nanoseconds()), "GOPS")
			})
			b.Run(wt.String()+"/"+impl.name+"/dot8", func(b *testing.B) {
				b.SetBytes(int64(rows * c.wsize))
				b.ReportAllocs()
				for b.Loop() {
					for j := range m {
						a := c.act[j*c.lda:]
						for row := range rows {
							out[j*rows+row] = impl.dot(c.w[row*c.ldw:], a, nb)
						}
					}
				}
				b.ReportMetric(ops*float64(b.N)/float64(b.Elapsed().Nanoseconds()), "GOPS")
			})
		}
	}
}

// BenchmarkGemmMatrix measures whole matrix products of the reference bench
// shape (an expert's 2048 → 1536 projection) against 128 tokens, through
// GemmKernel on one thread: the blocked loops at work. The bytes are the
// weight bytes.
// BenchmarkGemm16 compares the implementations on the shape of a batched
// decode step of sixteen sequences: 512 rows of 2048 values (in cache)
// against 16 tokens, where the AVX-512 Q4_K and Q6_K tiers have an exact
// sixteen-token tile and the lanes one (BatchGemmKernel). It reports
// ns per row block of 256 values and 16 tokens.
func BenchmarkGemm16(b *testing.B) {
	const rows, m, n = 512, 16, 2048
	r := rand.New(rand.NewPCG(53, 54))
	for _, wt := range []Type{Q4_K, Q6_K} {
		nb := n / wt.BlockSize()
		w := dotWeights(wt, rows*nb, &dotFills[0], r)
		act := dotActs(wt, m*nb, &dotFills[0], r)
		ldw, lda := len(w)/rows, len(act)/m
		out := make([]float32, m*rows)
		for _, impl := range gemmImpls(wt) {
			b.Run(wt.String()+"/"+impl.name, func(b *testing.B) {
				for b.Loop() {
					impl.run(w, ldw, act, lda, out, rows, rows, m, n)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows*nb), "ns/rowblock")
			})
		}
	}
}

func BenchmarkGemmMatrix(b *testing.B) {
	const rows, m, n = 1536, 128, 2048
	r := rand.New(rand.NewPCG(49, 50))
	for _, wt := range []Type{Q4_K, Q6_K, Q8_0} {
		g, _, err := GemmKernel(wt)
		if err != nil {
			b.Fatal(err)
		}
		nb := n / wt.BlockSize()
		w := dotWeights(wt, rows*nb, &dotFills[0], r)
		act := dotActs(wt, m*nb, &dotFills[0], r)
		ldw, lda := len(w)/rows, len(act)/m
		out := make([]float32, m*rows)
		b.Run(wt.String(), func(b *testing.B) {
			b.SetBytes(int64(len(w)))
			b.ReportAllocs()
			for b.Loop() {
				g(w, ldw, act, lda, out, rows, rows, m, n)
			}
			b.ReportMetric(float64(2*rows*m*n)*float64(b.N)/float64(b.Elapsed().Nanoseconds()), "GOPS")
		})
	}
}
