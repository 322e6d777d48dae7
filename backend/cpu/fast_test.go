package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"github.com/glmrun/glmrun/backend"
	"github.com/glmrun/glmrun/internal/mmap"
	"github.com/glmrun/glmrun/tensor"
)

// TestFastMatMul: with batch-invariant products every output of the fast
// product is, bit for bit, the single-row dot kernel on the weight row and
// the activation row quantized to the weight type's VecDotType, whatever
// the number of tokens and workers (so prefill and decode agree exactly);
// by default it is within float rounding of it (the sixteen-token tiles of
// tensor.BatchGemmKernel) and never depends on the workers; the scale
// applies.
func TestFastMatMul(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, typ := range []tensor.Type{tensor.Q4_K, tensor.Q6_K, tensor.Q5_K, tensor.Q8_0, tensor.F32, tensor.F16, tensor.Q2_K, tensor.Q3_K} {
		// 2000 rows of 16 tokens on 3 workers end on quarter-size chunks.
		for _, shape := range []struct{ rows, cols, n int }{{7, 256, 1}, {300, 512, 1}, {70, 256, 9}, {33, 768, 4}, {2000, 256, 16}, {90, 512, 35}} {
			var w backend.Matrix
			switch typ {
			case tensor.Q2_K, tensor.Q3_K: // no quantizer here: random blocks
				w = randomBlocks(t, r, typ, shape.rows, shape.cols)
			default:
				w = quantMatrix(t, typ, randVec(r, shape.rows*shape.cols), shape.rows, shape.cols)
			}
			w.Scale = 0.5
			x := randVec(r, shape.n*shape.cols)
			for _, invariant := range []bool{true, false} {
				var first []float32
				for _, workers := range []int{1, 3} {
					t.Run(fmt.Sprintf("%s/%dx%d/n%d/invariant=%v/w%d", typ, shape.rows, shape.cols, shape.n, invariant, workers), func(t *testing.T) {
						got := fastMatMulCase(t, w, x, shape.n, workers, invariant)
						if first == nil {
							first = got
						} else if !slices.Equal(got, first) {
							t.Fatalf("results differ between 1 and %d workers", workers)
						}
					})
				}
			}
		}
	}
}

// fastMatMulCase runs one case of TestFastMatMul, the product of w and
// the n rows of x, checks it and returns it.
func fastMatMulCase(t *testing.T, w backend.Matrix, x []float32, n, workers int, invariant bool) []float32 {
	t.Helper()
	typ, rows, cols := w.Type, w.Rows, w.Cols
	got := make([]float32, n*rows)
	cpu := NewFast(workers)
	cpu.SetBatchInvariant(invariant)
	cpu.MatMul(got, x, n, w)
	act := typ.VecDotType()
	rb, _ := act.RowSize(int64(cols))
	q := make([]byte, rb)
	wf := make([]float32, cols)
	qf := make([]float32, cols)
	for j := 0; j < n; j++ {
		if err := tensor.Quantize(act, x[j*cols:(j+1)*cols], q); err != nil {
			t.Fatal(err)
		}
		for row := 0; row < rows; row++ {
			want := 0.5 * tensor.DotRow(typ, w.Row(row), q, cols)
			g := got[j*rows+row]
			if g == want {
				continue
			}
			if invariant {
				t.Fatalf("token %d row %d: %g, dot kernel %g", j, row, g, want)
			}
			// Float rounding: a few units of 2⁻²⁴ of the products' magnitude
			// per block (as tensor's dotTolerance).
			if err := tensor.Dequantize(typ, w.Row(row), wf); err != nil {
				t.Fatal(err)
			}
			if err := tensor.Dequantize(act, q, qf); err != nil {
				t.Fatal(err)
			}
			var mag float64
			for i := range wf {
				mag += math.Abs(float64(wf[i]) * float64(qf[i]))
			}
			if d := math.Abs(float64(g - want)); d > 0.5*float64(cols/32+16)*0x1p-23*mag {
				t.Fatalf("token %d row %d: %g, dot kernel %g: differs by %g, magnitude %g", j, row, g, want, d, mag)
			}
		}
	}
	return got
}

// TestFastAttention: the fast device's attention (absorbed form with an
// online softmax over key tiles, quantized k_b/v_b products) agrees with
// the exact device's within the error of 8-bit activations, in both
// forms, with and without a DSA selection, over more keys than one tile.
func TestFastAttention(t *testing.T) {
	for _, heads := range []int{3, 8, 10} {
		for _, invariant := range []bool{false, true} {
			t.Run(fmt.Sprintf("heads%d/invariant=%v", heads, invariant), func(t *testing.T) {
				fastAttentionCase(t, heads, 5, 150, invariant)
			})
		}
	}
	// A prompt from an empty cache, more queries than a key tile and not
	// a multiple of four (the decompressed form's last block overlaps).
	t.Run("heads8/T70/pos0", func(t *testing.T) { fastAttentionCase(t, 8, 70, 0, false) })
	// More queries than attendQueryBlock: the blocks' queries get what
	// each gets alone too.
	t.Run("heads8/T70/pos30/invariant", func(t *testing.T) { fastAttentionCase(t, 8, 70, 30, true) })
}

func fastAttentionCase(t *testing.T, heads, T, pos0 int, invariant bool) {
	r := rand.New(rand.NewPCG(7, 8))
	// With unit-variance values q̃·c has a standard deviation of about
	// √(32·64) ≈ 45: Tau 0.02 makes the scores O(1), as a trained model's
	// are, so that the 8-bit activations' score errors (~1%) move the
	// softmax weights by about as much and not by the tens of percent a
	// saturated softmax turns them into.
	p := backend.MLAParams{Heads: heads, DNope: 32, DRope: 16, DV: 32, KVRank: 64, Tau: 0.02, TopK: 40}
	kb := quantMatrix(t, tensor.Q8_0, randVec(r, p.Heads*p.KVRank*p.DNope), p.Heads*p.KVRank, p.DNope)
	vb := quantMatrix(t, tensor.Q8_0, randVec(r, p.Heads*p.DV*p.KVRank), p.Heads*p.DV, p.KVRank)
	w := p.KVRank + p.DRope
	q := randVec(r, T*p.Heads*(p.DNope+p.DRope))
	lat := randVec(r, (pos0+T)*w)
	sel := make([]int32, T*p.TopK)
	for i := range sel {
		sel[i] = int32(r.IntN(pos0 + 1))
	}
	for _, withSel := range []bool{false, true} {
		var s ids
		if withSel {
			s = ids(sel)
		}
		exact, fast := NewDevice(0, 1, 0), NewFastDevice(0, 2, 0)
		fast.cpu.SetBatchInvariant(invariant)
		kbE, _ := exact.Upload(kb)
		vbE, _ := exact.Upload(vb)
		kbF, _ := fast.Upload(kb)
		vbF, _ := fast.Upload(vb)
		want := make(buf, T*p.Heads*p.DV)
		exact.AttentionDecode(want, buf(q), buf(lat), kbE, vbE, s, T, pos0, p)
		forms := map[string]attentionForm{"prefill": autoForm, "prefill absorbed": absorbedForm, "prefill decompressed": decompressedForm, "decode": autoForm}
		for _, form := range []string{"prefill", "prefill absorbed", "prefill decompressed", "decode"} {
			got := make(buf, len(want))
			fast.cpu.form = forms[form]
			if form == "decode" {
				fast.AttentionDecode(got, buf(q), buf(lat), kbF, vbF, s, T, pos0, p)
			} else {
				fast.AttentionPrefill(got, buf(q), buf(lat), kbF, vbF, s, T, pos0, p)
			}
			fast.cpu.form = autoForm
			var worst, scale float64
			for i := range want {
				worst = max(worst, math.Abs(float64(got[i]-want[i])))
				scale = max(scale, math.Abs(float64(want[i])))
			}
			if worst > 0.02*scale {
				t.Errorf("sel %v %s: max abs diff %.3g vs exact (max %.3g)", withSel, form, worst, scale)
			}
		}
		if !invariant {
			continue
		}
		// Batch-invariant: the queries of a prefill get what each gets
		// alone (the causal prefill takes four queries per key, a query
		// alone its heads in groups).
		all := make(buf, len(want))
		fast.AttentionPrefill(all, buf(q), buf(lat), kbF, vbF, s, T, pos0, p)
		dq, ov := p.Heads*(p.DNope+p.DRope), p.Heads*p.DV
		for tq := range T {
			var one ids
			if withSel {
				one = ids(sel[tq*p.TopK : (tq+1)*p.TopK])
			}
			got := make(buf, ov)
			fast.AttentionDecode(got, buf(q[tq*dq:(tq+1)*dq]), buf(lat), kbF, vbF, one, 1, pos0+tq, p)
			if !slices.Equal(got, all[tq*ov:(tq+1)*ov]) {
				t.Fatalf("sel %v: query %d alone differs from the prefill's", withSel, tq)
			}
		}
	}
}

// TestAxpy: the vector kernel equals the plain loop within FMA rounding
// for lengths around its 8- and 32-element steps.
func TestAxpy(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 7, 8, 9, 31, 32, 33, 100, 512, 576} {
		x, y := randVec(r, n), randVec(r, n)
		want := append([]float32(nil), y...)
		axpyGeneric(want, 0.37, x)
		axpy(y, 0.37, x)
		for i := range y {
			if d := math.Abs(float64(y[i] - want[i])); d > 1e-6*(1+math.Abs(float64(want[i]))) {
				t.Fatalf("n=%d i=%d: %g, want %g", n, i, y[i], want[i])
			}
		}
	}
}

// TestAxpyKeys4: the weighted sum over a tile of keys equals one axpy4 per
// key bit for bit (the same fused multiply-adds per element, in key
// order), for widths around its 64-column step, repeated and scattered
// rows, and one key or a whole tile.
func TestAxpyKeys4(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const w, rows = 600, 40
	lat := randVec(r, w*rows)
	for _, n := range []int{8, 16, 64, 80, 512, 520, 576} {
		for _, nk := range []int{1, 3, keyTile} {
			e := make([][4]float32, nk)
			offs := make([]int32, nk)
			for i := range e {
				for j := range e[i] {
					e[i][j] = r.Float32()
				}
				offs[i] = int32(r.IntN(rows) * w)
			}
			const ldo = 613
			o := randVec(r, 3*ldo+n)
			want := append([]float32(nil), o...)
			for i, off := range offs {
				axpy4(want, ldo, &e[i], lat[off:], n)
			}
			axpyKeys4(o, ldo, e, lat, offs, n)
			for i := range o {
				if math.Float32bits(o[i]) != math.Float32bits(want[i]) {
					t.Fatalf("n=%d keys=%d: element %d is %g, one axpy4 per key gives %g", n, nk, i, o[i], want[i])
				}
			}
		}
	}
}

// TestPool: every chunk runs exactly once, on workers of the pool, for
// chunk counts below, at and above the worker count.
func TestPool(t *testing.T) {
	p := newPool(3)
	defer p.stop()
	for _, chunks := range []int{0, 1, 2, 3, 7, 100} {
		c := &countTask{hits: make([]int, chunks)}
		p.do(c, chunks)
		for i, h := range c.hits {
			if h != 1 {
				t.Fatalf("%d chunks: chunk %d ran %d times", chunks, i, h)
			}
		}
	}
}

type countTask struct{ hits []int }

func (c *countTask) run(w, i int) {
	if w < 0 || w >= 3 {
		panic("bad worker")
	}
	c.hits[i]++ // chunks are distinct, so no two workers touch one entry
}

// BenchmarkFastMatMul reports the weight bytes read per second by the
// fast product for GLM-sized rows: decode (1 token) and prefill (64).
func BenchmarkFastMatMul(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, typ := range []tensor.Type{tensor.Q4_K, tensor.Q6_K, tensor.Q8_0} {
		const rows, cols = 2048, 2048
		w := quantMatrix(b, typ, randVec(r, rows*cols), rows, cols)
		for _, n := range []int{1, 64} {
			x := randVec(r, n*cols)
			dst := make([]float32, n*rows)
			for _, workers := range []int{1, 2} {
				c := NewFast(workers)
				b.Run(fmt.Sprintf("%s/n%d/t%d", typ, n, workers), func(b *testing.B) {
					b.SetBytes(int64(len(w.Data)))
					b.ReportAllocs()
					for b.Loop() {
						c.MatMul(dst, x, n, w)
					}
				})
			}
		}
	}
}

// BenchmarkDecodeMatMul reports the weight bytes read per second by
// single-token products of matrices larger than the caches (512 MB, about
// the weights one token of the bench shape reads), the regime of decode,
// where BenchmarkFastMatMul's 2048x2048 fits in L2/L3. The rows are copies
// of 512 quantized random rows. stream/tN is the yardstick, in the same
// run: N goroutines summing the 8-byte words of a buffer of the same size
// (streamRead: loads only, four independent sums, far more loads a cycle
// than DRAM can feed), so that kernel GB/s over stream GB/s says how close
// decode comes to the memory wall. On shared machines the wall itself
// moves from minute to minute, hence the same run.
// Types the CPU repacks run once more on the repacked copy (…/packed/tN,
// its bytes counted).
func BenchmarkDecodeMatMul(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	// The plain read rate, of the Go heap (where the file's layout is
	// read) and of memory in huge pages (where repacked copies are, see
	// packedMemory).
	huge, err := mmap.Anonymous(512 << 20)
	if err != nil {
		b.Fatal(err)
	}
	defer mmap.Release(huge)
	for _, src := range []struct {
		name string
		data []byte
	}{{"stream", make([]byte, 512<<20)}, {"stream/huge", huge}} {
		data := src.data
		for i := range data {
			data[i] = byte(i)
		}
		for _, workers := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/t%d", src.name, workers), func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				sums := make([]uint64, workers)
				for b.Loop() {
					var wg sync.WaitGroup
					part := len(data) / workers
					for w := range workers {
						wg.Go(func() { sums[w] += streamRead(data[w*part : (w+1)*part]) })
					}
					wg.Wait()
				}
				if sums[0] == 1 {
					b.Log("") // keeps the sums alive
				}
			})
		}
	}
	for _, typ := range []tensor.Type{tensor.Q4_K, tensor.Q6_K, tensor.Q8_0} {
		const cols = 2048
		small := quantMatrix(b, typ, randVec(r, 512*cols), 512, cols)
		rows := (512 << 20) / small.RowBytes &^ (tensor.PackRows - 1)
		data := make([]byte, rows*small.RowBytes)
		for off := 0; off < len(data); off += len(small.Data) {
			copy(data[off:], small.Data)
		}
		w, err := backend.NewMatrix("big", typ, rows, cols, data)
		if err != nil {
			b.Fatal(err)
		}
		x, dst := randVec(r, cols), make([]float32, rows)
		layouts := []backend.Matrix{w}
		if _, ok := tensor.PackedGemm(typ); ok && rows%tensor.PackRows == 0 {
			// The repacked copy (what a model load makes by default).
			size, _ := tensor.PackedSize(typ, rows, cols)
			d := NewFastDevice(0, 1, 0)
			defer d.Close()
			dst, err := d.packedMemory(int(size))
			if err != nil {
				b.Fatal(err)
			}
			pw, err := withPacked(w, dst)
			if err != nil {
				b.Fatal(err)
			}
			layouts = append(layouts, pw)
		}
		for _, m := range layouts {
			for _, workers := range []int{1, 2} {
				c := NewFast(workers)
				name, bytes := fmt.Sprintf("%s/t%d", typ, workers), len(m.Data)
				if m.Packed != nil {
					name, bytes = fmt.Sprintf("%s/packed/t%d", typ, workers), len(m.Packed)
				}
				b.Run(name, func(b *testing.B) {
					b.SetBytes(int64(bytes))
					b.ReportAllocs()
					for b.Loop() {
						c.MatMul(dst, x, 1, m)
					}
				})
				c.close()
			}
		}
	}
}

// TestFastMoE: the fast MoE (both phases over all experts at once) equals,
// bit for bit, running each routed slot through the fast MatMul, SwiGLU
// and the weighted sum in routing order; with the experts split over two
// devices the parts add up to it. Quantized experts (Q4_K gate/up, Q6_K
// down), several workers, tokens sharing experts and an expert unused.
func TestFastMoE(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 11))
	const E, F, X, K, T = 256, 512, 4, 2, 5
	var host [][3]backend.Matrix
	for range X {
		host = append(host, [3]backend.Matrix{
			quantMatrix(t, tensor.Q4_K, randVec(r, F*E), F, E),
			quantMatrix(t, tensor.Q4_K, randVec(r, F*E), F, E),
			quantMatrix(t, tensor.Q6_K, randVec(r, E*F), E, F),
		})
	}
	experts := func(d *Device, first, n int) *backend.Experts {
		e := &backend.Experts{First: first}
		for i := 0; i < n; i++ {
			g, _ := d.Upload(host[first+i][0])
			u, _ := d.Upload(host[first+i][1])
			dn, _ := d.Upload(host[first+i][2])
			e.Gate, e.Up, e.Down = append(e.Gate, g), append(e.Up, u), append(e.Down, dn)
		}
		return e
	}
	x := buf(randVec(r, T*E))
	top := ids{0, 3, 3, 0, 1, 3, 3, 1, 0, 1} // expert 2 unused
	w := buf(randVec(r, T*K))

	c := NewFast(1)
	want := make([]float32, T*E)
	g, u, o := make([]float32, F), make([]float32, F), make([]float32, E)
	for tk := 0; tk < T; tk++ {
		for j := 0; j < K; j++ {
			ex := host[top[tk*K+j]]
			c.MatMul(g, x[tk*E:(tk+1)*E], 1, ex[0])
			c.MatMul(u, x[tk*E:(tk+1)*E], 1, ex[1])
			SwiGLU(g, g, u)
			c.MatMul(o, g, 1, ex[2])
			Scale(o, w[tk*K+j])
			if j == 0 {
				copy(want[tk*E:(tk+1)*E], o)
			} else {
				Add(want[tk*E:(tk+1)*E], o)
			}
		}
	}
	d := NewFastDevice(0, 3, 0)
	got := make(buf, T*E)
	d.MoE(got, x, T, top, w, experts(d, 0, X))
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("value %d: %g, slot by slot %g", i, got[i], want[i])
		}
	}
	sum := make(buf, T*E)
	for dv := 0; dv < 2; dv++ {
		d := NewFastDevice(dv, 2, 0)
		part := make(buf, T*E)
		d.MoE(part, x, T, top, w, experts(d, 2*dv, 2))
		Add(sum, part)
	}
	for i := range want {
		if math.Abs(float64(want[i]-sum[i])) > 1e-4*(1+math.Abs(float64(want[i]))) {
			t.Fatalf("value %d: split %g, one device %g", i, sum[i], want[i])
		}
	}
}

// TestExpNeg: the attention's exponential is within 3e-7 relative of
// math.Exp over [−87, 0], and 0 below.
func TestExpNeg(t *testing.T) {
	for x := float32(-87); x <= 0; x += 0.001 {
		want := math.Exp(float64(x))
		if got := float64(expNeg(x)); math.Abs(got-want) > 3e-7*want {
			t.Fatalf("expNeg(%g) = %g, want %g", x, got, want)
		}
	}
	if expNeg(-100) != 0 || expNeg(0) != 1 {
		t.Errorf("expNeg(-100) = %g, expNeg(0) = %g", expNeg(-100), expNeg(0))
	}
}

// TestSwiGLUFast: the fast path's SwiGLU is within 1e-6 relative of the
// exact one.
func TestSwiGLUFast(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	g, u := randVec(r, 1000), randVec(r, 1000)
	for i := range g {
		g[i] *= 20
	}
	want, got := make([]float32, 1000), make([]float32, 1000)
	SwiGLU(want, g, u)
	swigluFast(got, g, u)
	for i := range want {
		if d := math.Abs(float64(got[i] - want[i])); d > 1e-6*(1e-3+math.Abs(float64(want[i]))) {
			t.Fatalf("%d: silu(%g)·%g = %g, exact %g", i, g[i], u[i], got[i], want[i])
		}
	}
}

// TestAttend4: the four-query kernels equal the one-query ones bit for bit
// (dot4 rows = dot1, axpy4 rows = axpy, attend4 = attendOnline per query),
// so prefill and decode attention give identical results; the twins agree
// within rounding. Lengths cover the 16/8-element steps and tails.
func TestAttend4(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	for _, n := range []int{1, 8, 13, 16, 24, 80, 576} {
		q, k := randVec(r, 4*n+3), randVec(r, n)
		var out [4]float32
		dot4(&out, q, n+1, k, n)
		for j := range 4 {
			row := q[j*(n+1) : j*(n+1)+n]
			if want := dot1(row, k, n); out[j] != want {
				t.Fatalf("n=%d row %d: dot4 %g, dot1 %g", n, j, out[j], want)
			}
			if g := dot1Generic(row, k, n); math.Abs(float64(g-out[j])) > 1e-4*math.Sqrt(float64(n)) {
				t.Fatalf("n=%d row %d: dot4 %g, generic %g", n, j, out[j], g)
			}
		}
		o := randVec(r, 4*(n+2))
		want := append([]float32(nil), o...)
		e := [4]float32{0.5, -1, 0, 2}
		axpy4(o, n+2, &e, k, n)
		for j := range 4 {
			axpy(want[j*(n+2):j*(n+2)+n], e[j], k)
		}
		for i := range o {
			if o[i] != want[i] {
				t.Fatalf("n=%d: axpy4 %g, axpy %g at %d", n, o[i], want[i], i)
			}
		}
	}
	const kr, dr, n0 = 64, 16, 150
	w := kr + dr
	lat, q := randVec(r, (n0+3)*w), randVec(r, 4*w)
	got := make([]float32, 4*kr)
	attend4(got, kr, q, w, rows{f32: lat, w: w}, w, nil, 0, kr, n0, 0.2, new([keyTile][4]float32), nil)
	for j := range 4 {
		want := make([]float32, kr)
		attendOnline(want, q[j*w:j*w+kr], q[j*w+kr:(j+1)*w], rows{f32: lat, w: w}, kr, dr, nil, n0+j, 0.2, make([]float32, keyTile), make([]float32, w), nil)
		for i := range want {
			if got[j*kr+i] != want[i] {
				t.Fatalf("query %d value %d: attend4 %g, attendOnline %g", j, i, got[j*kr+i], want[i])
			}
		}
	}
}

// TestDot4x4: four keys against four queries agree with the plain loops
// within float32 rounding, at the attention's and the indexer's widths and
// at widths the vector kernel leaves to dot4.
func TestDot4x4(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 5))
	for _, n := range []int{1, 13, 16, 48, 128, 576} {
		q, lat := randVec(r, 4*n+3), randVec(r, 9*n)
		offs := [4]int32{int32(3 * n), 0, int32(8 * n), int32(n + 1)}
		var got, want [16]float32
		dot4x4(&got, q, n+1, lat, &offs, n)
		dot4x4Generic(&want, q, n+1, lat, &offs, n)
		for i := range got {
			if math.Abs(float64(got[i]-want[i])) > 1e-5*math.Sqrt(float64(n))*float64(1+math.Abs(float64(want[i]))) {
				t.Fatalf("n=%d: out[%d] (query %d, key %d) %g, generic %g", n, i, i/4, i%4, got[i], want[i])
			}
		}
	}
}

// TestSwiGLUVec: the vector SwiGLU gives swigluGeneric's bits (NaN for
// NaN), over random magnitudes, both signs of zero, the exponential's
// cut-off at −87, huge values and infinities.
func TestSwiGLUVec(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const n = 4099
	g, u := make([]float32, n), make([]float32, n)
	special := []float32{0, float32(math.Copysign(0, -1)), 87, -87, 87.0001, -87.0001, 88, -88, 1e-40, -1e-40,
		1e30, -1e30, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 0.5, -0.5}
	for i := range g {
		switch {
		case i < len(special):
			g[i] = special[i]
		case i%3 == 0:
			g[i] = float32(r.NormFloat64() * 30)
		case i%3 == 1:
			g[i] = float32(r.NormFloat64() * math.Exp2(float64(r.IntN(40)-20)))
		default:
			g[i] = math.Float32frombits(r.Uint32())
		}
		u[i] = float32(r.NormFloat64())
	}
	for _, off := range []int{0, 1, 15, 16, 17} {
		want, got := make([]float32, n-off), make([]float32, n-off)
		swigluGeneric(want, g[off:], u[off:])
		swigluFast(got, g[off:], u[off:])
		for i := range want {
			w, v := want[i], got[i]
			if math.Float32bits(w) != math.Float32bits(v) && !(w != w && v != v) {
				t.Fatalf("offset %d, value %d: silu(%g)·%g = %g, one by one %g", off, i, g[off+i], u[off+i], v, w)
			}
		}
	}
}

// randomBlocks is a matrix of random blocks of a K-quant type that has no
// quantizer (Q2_K, Q3_K), its f16 scales small and finite.
func randomBlocks(t *testing.T, r *rand.Rand, typ tensor.Type, rows, cols int) backend.Matrix {
	t.Helper()
	rb, err := typ.RowSize(int64(cols))
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, int(rb)*rows)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	size := typ.TypeSize()
	scales := map[tensor.Type][]int{tensor.Q2_K: {80, 82}, tensor.Q3_K: {108}}[typ]
	for b := 0; b < len(data); b += size {
		for _, off := range scales {
			binary.LittleEndian.PutUint16(data[b+off:], tensor.F32ToF16(float32(r.NormFloat64())*0.01))
		}
	}
	m, err := backend.NewMatrix("w", typ, rows, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// streamRead returns the sum of d's 8-byte words (len(d) a multiple of
// 32): a plain read of every byte, its loads independent of each other.
func streamRead(d []byte) uint64 {
	w := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(d))), len(d)/8)
	var a, b, c, e uint64
	for i := 0; i+4 <= len(w); i += 4 {
		a += w[i]
		b += w[i+1]
		c += w[i+2]
		e += w[i+3]
	}
	return a + b + c + e
}

// TestMulRows4: four rows times a matrix agree with the plain loops within
// float32 rounding, at the decompressed prefill's shapes (dn columns of
// W_UK, the latent's rows) and at strides that are not the widths.
func TestMulRows4(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 13))
	for _, tc := range []struct{ kr, ncols int }{{1, 16}, {7, 32}, {64, 32}, {512, 128}, {512, 192}} {
		lda, ldb, ldo := tc.kr+3, tc.ncols+5, tc.ncols+16
		a, b := randVec(r, 4*lda), randVec(r, tc.kr*ldb)
		got, want := randVec(r, 4*ldo), randVec(r, 4*ldo)
		copy(want, got) // the columns past ncols stay as they were
		mulRows4(got, ldo, a, lda, b, ldb, tc.kr, tc.ncols)
		mulRows4Generic(want, ldo, a, lda, b, ldb, tc.kr, tc.ncols)
		for j := range 4 {
			for c := range ldo {
				g, w := got[j*ldo+c], want[j*ldo+c]
				if c >= tc.ncols {
					if g != w {
						t.Fatalf("kr=%d ncols=%d: row %d column %d past ncols written", tc.kr, tc.ncols, j, c)
					}
					continue
				}
				var exact float64
				for k := range tc.kr {
					exact += float64(a[j*lda+k]) * float64(b[k*ldb+c])
				}
				bound := 1e-6 * float64(tc.kr) * 4
				if math.Abs(float64(g)-exact) > bound || math.Abs(float64(w)-exact) > bound {
					t.Fatalf("kr=%d ncols=%d row %d column %d: kernel %g, generic %g, float64 %g", tc.kr, tc.ncols, j, c, g, w, exact)
				}
			}
		}
	}
}

// TestExpTile4: the vector weights are expNeg's bit for bit and the sums
// the scalar loop's, over scores that span expNeg's range, its cut-off,
// masked keys (−Inf) and both tile parities.
func TestExpTile4(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 15))
	inf := float32(math.Inf(-1))
	for _, nk := range []int{1, 2, 7, keyTile} {
		sc := make([][4]float32, nk)
		m := [4]float32{0, 3.5, -2, 90}
		for i := range sc {
			for j := range 4 {
				switch r.IntN(8) {
				case 0:
					sc[i][j] = inf
				case 1:
					sc[i][j] = m[j] + expLimit + float32(r.NormFloat64())*1e-3 // around the cut-off
				default:
					sc[i][j] = m[j] - float32(r.ExpFloat64()*10)
				}
			}
		}
		want := make([][4]float32, nk)
		var lw [4]float32
		for i := range sc {
			for j := range 4 {
				want[i][j] = expNeg(sc[i][j] - m[j])
				lw[j] += want[i][j]
			}
		}
		l := [4]float32{}
		expTile4(sc, &m, &l)
		for i := range sc {
			for j := range 4 {
				if math.Float32bits(sc[i][j]) != math.Float32bits(want[i][j]) {
					t.Fatalf("nk=%d key %d query %d: %g, expNeg %g", nk, i, j, sc[i][j], want[i][j])
				}
			}
		}
		if l != lw {
			t.Fatalf("nk=%d: sums %v, want %v", nk, l, lw)
		}
	}
}
