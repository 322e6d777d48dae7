package cpu

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/glmrun/glmrun/backend"
	"github.com/glmrun/glmrun/tensor"
)

func randVec(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// quantMatrix stores w (rows × cols) as type t.
func quantMatrix(t testing.TB, typ tensor.Type, w []float32, rows, cols int) backend.Matrix {
	t.Helper()
	rb, err := typ.RowSize(int64(cols))
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, int(rb)*rows)
	if err := tensor.Quantize(typ, w, data); err != nil {
		t.Fatal(err)
	}
	m, err := backend.NewMatrix("w", typ, rows, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMatMul checks MatMul against a float64 product with the dequantized
// weights, serial and parallel, for several shapes and types.
func TestMatMul(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, typ := range []tensor.Type{tensor.F32, tensor.F16, tensor.Q8_0, tensor.Q4_K} {
		for _, sh := range []struct{ rows, cols, n int }{{1, 256, 1}, {7, 256, 3}, {300, 512, 5}, {1024, 256, 1}} {
			for _, workers := range []int{1, 3} {
				w := randVec(r, sh.rows*sh.cols)
				m := quantMatrix(t, typ, w, sh.rows, sh.cols)
				deq := make([]float32, len(w))
				Dequantize(deq, m)
				x := randVec(r, sh.n*sh.cols)
				dst := make([]float32, sh.n*sh.rows)
				New(workers).MatMul(dst, x, sh.n, m)
				var worst float64
				for tk := 0; tk < sh.n; tk++ {
					for o := 0; o < sh.rows; o++ {
						var want float64
						for i := 0; i < sh.cols; i++ {
							want += float64(deq[o*sh.cols+i]) * float64(x[tk*sh.cols+i])
						}
						worst = max(worst, math.Abs(want-float64(dst[tk*sh.rows+o])))
					}
				}
				if worst > 1e-4 {
					t.Errorf("%v %dx%d n=%d workers=%d: max error %g", typ, sh.rows, sh.cols, sh.n, workers, worst)
				}
			}
		}
	}
}

func TestMatrixSliceAndCheck(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	w := randVec(r, 4*64)
	m := quantMatrix(t, tensor.Q8_0, w, 4, 64)
	s := m.Slice(2, 2)
	row := make([]float32, 64)
	full := make([]float32, 64)
	DequantizeRow(row, s, 1)
	DequantizeRow(full, m, 3)
	for i := range row {
		if row[i] != full[i] {
			t.Fatalf("Slice row 1 != row 3 at %d", i)
		}
	}
	if err := CheckType(m); err != nil {
		t.Error(err)
	}
	if _, err := backend.NewMatrix("bad", tensor.Q8_0, 4, 64, m.Data[:10]); err == nil {
		t.Error("NewMatrix accepted short data")
	}
	if _, err := backend.NewMatrix("bad", tensor.Q8_0, 4, 60, m.Data); err == nil {
		t.Error("NewMatrix accepted a partial block")
	}
}

func TestNorms(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	x, w, b := randVec(r, 64), randVec(r, 64), randVec(r, 64)
	dst := make([]float32, 64)
	var ss, sum float64
	for _, v := range x {
		ss += float64(v) * float64(v)
		sum += float64(v)
	}
	RMSNorm(dst, x, w, 1e-5)
	scale := 1 / math.Sqrt(ss/64+1e-5)
	for i := range x {
		if want := float64(x[i]) * scale * float64(w[i]); math.Abs(want-float64(dst[i])) > 1e-5 {
			t.Fatalf("RMSNorm[%d] = %g, want %g", i, dst[i], want)
		}
	}
	LayerNorm(dst, x, w, b, 0)
	mean := sum / 64
	var vs float64
	for _, v := range x {
		vs += (float64(v) - mean) * (float64(v) - mean)
	}
	for i := range x {
		want := (float64(x[i])-mean)/math.Sqrt(vs/64)*float64(w[i]) + float64(b[i])
		if math.Abs(want-float64(dst[i])) > 1e-5 {
			t.Fatalf("LayerNorm[%d] = %g, want %g", i, dst[i], want)
		}
	}
}

func TestSoftmaxAndActivations(t *testing.T) {
	x := []float32{1, 2, float32(math.Inf(-1)), 3}
	Softmax(x)
	e := []float64{math.Exp(-2), math.Exp(-1), 0, 1}
	s := e[0] + e[1] + e[3]
	for i := range x {
		if math.Abs(float64(x[i])-e[i]/s) > 1e-7 {
			t.Errorf("Softmax[%d] = %g, want %g", i, x[i], e[i]/s)
		}
	}
	for _, v := range []float32{-30, -1, 0, 0.5, 30} {
		sig := 1 / (1 + math.Exp(-float64(v)))
		if math.Abs(float64(Sigmoid(v))-sig) > 1e-7 || math.Abs(float64(SiLU(v))-float64(v)*sig) > 1e-5 {
			t.Errorf("Sigmoid/SiLU(%g) = %g, %g", v, Sigmoid(v), SiLU(v))
		}
	}
	dst := make([]float32, 2)
	SwiGLU(dst, []float32{1, -2}, []float32{3, 4})
	if math.Abs(float64(dst[0])-3*float64(SiLU(1))) > 1e-6 || math.Abs(float64(dst[1])-4*float64(SiLU(-2))) > 1e-6 {
		t.Errorf("SwiGLU = %v", dst)
	}
}

func TestRope(t *testing.T) {
	r := Rope{Dims: 8, Base: 10000, FreqScale: 1, AttnFactor: 1}
	tab := make([]float32, 8)
	x := []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	RopeTable(tab, &r, 0)
	y := append([]float32(nil), x...)
	RopeNorm(y, tab)
	for i := range x {
		if y[i] != x[i] {
			t.Fatalf("position 0 changed element %d: %g", i, y[i])
		}
	}
	// Position 3: pair i rotates by 3·10000^(−2i/8); elements past Dims stay.
	RopeTable(tab, &r, 3)
	y = append([]float32(nil), x...)
	RopeNorm(y, tab)
	for i := 0; i < 4; i++ {
		th := 3 * math.Pow(10000, -2*float64(i)/8)
		x0, x1 := float64(x[2*i]), float64(x[2*i+1])
		w0, w1 := x0*math.Cos(th)-x1*math.Sin(th), x0*math.Sin(th)+x1*math.Cos(th)
		if math.Abs(w0-float64(y[2*i])) > 1e-5 || math.Abs(w1-float64(y[2*i+1])) > 1e-5 {
			t.Errorf("pair %d: (%g, %g), want (%g, %g)", i, y[2*i], y[2*i+1], w0, w1)
		}
	}
	if y[8] != 9 || y[9] != 10 {
		t.Errorf("elements past Dims changed: %v", y[8:])
	}
}

// TestYaRN checks the ramp ends (ds2-mini: c(32) ≈ 0.94 and c(1) ≈ 2.95
// round out to 0 and 3, docs/MATH.md section 5.3) and that YaRN keeps the
// rotation magnitude at attn_factor·(1+0.1·ln f).
func TestYaRN(t *testing.T) {
	cd := YaRNCorrDims(16, 1024, 1e6, 32, 1)
	if cd != [2]float32{0, 3} {
		t.Errorf("ds2-mini corr dims %v, want [0 3]", cd)
	}
	f := float32(4)
	r := Rope{Dims: 16, Base: 1e6, FreqScale: 1 / f, ExtFactor: 1, CorrDims: cd,
		AttnFactor: 1 / (1 + 0.1*float32(math.Log(4)))}
	tab := make([]float32, 16)
	RopeTable(tab, &r, 17)
	for i := 0; i < 8; i++ {
		th := 17 * math.Pow(1e6, -2*float64(i)/16)
		ramp := 1 - math.Min(1, math.Max(0, float64(i)/3))
		want := th/4*(1-ramp) + th*ramp
		got := math.Atan2(float64(tab[2*i+1]), float64(tab[2*i]))
		if mag := math.Hypot(float64(tab[2*i]), float64(tab[2*i+1])); math.Abs(mag-1) > 1e-6 {
			t.Errorf("pair %d magnitude %g, want 1", i, mag)
		}
		if d := math.Remainder(got-want, 2*math.Pi); math.Abs(d) > 1e-5 {
			t.Errorf("pair %d angle %g, want %g", i, got, want)
		}
	}
}

func TestTopK(t *testing.T) {
	var order []int32
	scores := []float32{0.5, 2, -1, 2, 7, 0}
	for _, tc := range []struct {
		k    int
		want []int32
	}{
		{3, []int32{1, 3, 4}},
		{2, []int32{1, 4}}, // tie: lower index
		{10, []int32{0, 1, 2, 3, 4, 5}},
	} {
		if got := topK(nil, scores, tc.k, &order); !slices.Equal(got, tc.want) {
			t.Errorf("topK %d = %v, want %v", tc.k, got, tc.want)
		}
	}
}

// TestTopKSelection compares the selection with the definition: a stable
// sort by score, largest first (cmp.Compare's order: NaN lowest, -0 equal
// to +0), its first k indices in ascending order. Scores with many ties,
// infinities, NaNs and signed zeros, lengths around k.
func TestTopKSelection(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var order []int32
	special := []float32{float32(math.Inf(-1)), float32(math.Inf(1)), float32(math.NaN()), float32(math.Copysign(0, -1)), 0, 1, -1}
	for trial := range 3000 {
		n := 1 + r.IntN(300)
		scores := make([]float32, n)
		for i := range scores {
			switch trial % 3 {
			case 0:
				scores[i] = float32(r.NormFloat64())
			case 1:
				scores[i] = float32(r.IntN(4)) // many ties
			default:
				scores[i] = special[r.IntN(len(special))]
			}
		}
		k := r.IntN(n + 2)
		idx := make([]int32, n)
		for i := range idx {
			idx[i] = int32(i)
		}
		slices.SortStableFunc(idx, func(a, b int32) int { return cmp.Compare(scores[b], scores[a]) })
		want := slices.Clone(idx[:min(k, n)])
		slices.Sort(want)
		got := topK(nil, scores, k, &order)
		if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("trial %d: topK(%v, %d) = %v, want %v", trial, scores, k, got, want)
		}
	}
}

// BenchmarkTopK is the DSA selection of one query: top_k 2048 of a
// context's indexer scores, by selection (topK) and by the stable sort that
// defines it.
func BenchmarkTopK(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, n := range []int{8192, 65536} {
		scores := make([]float32, n)
		for i := range scores {
			scores[i] = float32(r.NormFloat64())
		}
		var order []int32
		dst := make([]int32, 0, 2048)
		b.Run(fmt.Sprintf("select/n%d", n), func(b *testing.B) {
			for b.Loop() {
				dst = topK(dst[:0], scores, 2048, &order)
			}
		})
		b.Run(fmt.Sprintf("sort/n%d", n), func(b *testing.B) {
			idx := make([]int32, n)
			for b.Loop() {
				for i := range idx {
					idx[i] = int32(i)
				}
				slices.SortStableFunc(idx, func(a, c int32) int { return cmp.Compare(scores[c], scores[a]) })
				dst = append(dst[:0], idx[:2048]...)
				slices.Sort(dst)
			}
		})
	}
}
