package attention

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/backend"
	"github.com/glmrun/glmrun/backend/cpu"
	"github.com/glmrun/glmrun/tensor"
)

// randMatrix returns a random F32 [rows, cols] matrix with entries of
// standard deviation 1/sqrt(cols).
func randMatrix(r *rand.Rand, name string, rows, cols int) backend.Matrix {
	b := make([]byte, 4*rows*cols)
	s := 1 / math.Sqrt(float64(cols))
	for i := 0; i < rows*cols; i++ {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(r.NormFloat64()*s)))
	}
	m, err := backend.NewMatrix(name, tensor.F32, rows, cols, b)
	if err != nil {
		panic(err)
	}
	return m
}

func randVec(r *rand.Rand, n int, mean, std float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(mean + std*r.NormFloat64())
	}
	return v
}

// layer is a random MLA layer: config and host weights.
type layer struct {
	c *Config
	w *Weights
}

// testLayer builds a small random MLA layer, with a DSA indexer keeping
// topK keys when topK > 0.
func testLayer(seed uint64, topK int) layer {
	r := rand.New(rand.NewPCG(seed, 7))
	c := &Config{Embd: 64, Heads: 4, QRank: 48, KVRank: 32, DNope: 16, DRope: 8, DV: 12, RMSEps: 1e-5,
		Tau: 1 / float32(math.Sqrt(24)), Rope: backend.Rope{Dims: 8, Base: 10000, FreqScale: 1, AttnFactor: 1}}
	H, kr := c.Heads, c.KVRank
	w := &Weights{
		QA:      randMatrix(r, "q_a", c.QRank, c.Embd),
		QANorm:  randVec(r, c.QRank, 1, 0.1),
		QB:      randMatrix(r, "q_b", H*(c.DNope+c.DRope), c.QRank),
		KVA:     randMatrix(r, "kv_a", kr+c.DRope, c.Embd),
		KVANorm: randVec(r, kr, 1, 0.1),
		KB:      randMatrix(r, "k_b", H*kr, c.DNope),
		VB:      randMatrix(r, "v_b", H*c.DV, kr),
		Out:     randMatrix(r, "out", c.Embd, H*c.DV),
	}
	if topK > 0 {
		c.IndexHeads, c.IndexDim, c.IndexTopK, c.IndexRope = 4, 16, topK, c.Rope
		w.Indexer = &IndexerWeights{
			QB:     randMatrix(r, "iq", 4*16, c.QRank),
			K:      randMatrix(r, "ik", 16, c.Embd),
			KNormW: randVec(r, 16, 1, 0.1),
			KNormB: randVec(r, 16, 0, 0.1),
			Proj:   randMatrix(r, "iw", 4, c.Embd),
		}
	}
	return layer{c, w}
}

// run feeds x [T, E] through the layer in chunks (sizes in chunks) with the
// given form, its heads split evenly over devs devices whose partial
// outputs are summed, and returns the outputs [T, E] and each query's
// selected keys (nil: all causal keys).
func run(t *testing.T, ly layer, x []float32, chunks []int, form Form, devs int) ([]float32, [][]int32) {
	t.Helper()
	E := ly.c.Embd
	T := len(x) / E
	idx := []int{0}
	if ly.w.Indexer != nil {
		idx[0] = ly.c.IndexDim
	}
	out := make([]float32, T*E)
	var sel [][]int32
	per := ly.c.Heads / devs
	for d := 0; d < devs; d++ {
		dev := cpu.NewDevice(d, 2, 0)
		sh, err := ly.w.Upload(dev, ly.c, d*per, per)
		if err != nil {
			t.Fatal(err)
		}
		a := &MLA{Cfg: ly.c, W: sh, Dev: dev}
		cache, err := NewLatentCache(dev, 1, T, ly.c.KVRank, ly.c.DRope, idx, tensor.F32)
		if err != nil {
			t.Fatal(err)
		}
		s := NewScratch(dev)
		part, _ := dev.Alloc(T * E)
		xb, _ := dev.Alloc(T * E)
		dev.Write(xb, x)
		pos := 0
		for _, n := range chunks {
			if err := a.Forward(part.Slice(pos*E, n*E), xb.Slice(pos*E, n*E), n, pos, cache, s, form); err != nil {
				t.Fatal(err)
			}
			if d == 0 {
				K := ly.c.IndexTopK
				for i := 0; i < n; i++ {
					if s.Sel == nil {
						sel = append(sel, nil)
						continue
					}
					row := make([]int32, K)
					dev.ReadIDs(row, s.Sel.Slice(i*K, K))
					if j := slices.Index(row, -1); j >= 0 {
						row = row[:j]
					}
					if len(row) == pos+i+1 {
						row = nil // all causal keys
					}
					sel = append(sel, row)
				}
			}
			pos += n
		}
		if err := dev.Sync(); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, T*E)
		dev.Read(got, part)
		cpu.Add(out, got)
	}
	return out, sel
}

func maxDiff(a, b []float32) float64 {
	var d float64
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

// TestFormsAgree: the prefill (decompressed) and decode (absorbed) forms
// give the same output, in one batch or split into pieces, dense and with
// a sparse DSA selection.
func TestFormsAgree(t *testing.T) {
	const T = 12
	for _, topK := range []int{0, 5, 100} {
		a := testLayer(uint64(topK)+1, topK)
		x := randVec(rand.New(rand.NewPCG(9, 9)), T*a.c.Embd, 0, 1)
		want, wantSel := run(t, a, x, []int{T}, Prefill, 1)
		for _, tc := range []struct {
			name   string
			chunks []int
			form   Form
			devs   int
		}{
			{"decode batch", []int{T}, Decode, 1},
			{"decode one by one", []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, Decode, 1},
			{"prefill pieces", []int{3, 4, 5}, Prefill, 1},
			{"prefill 2 devices", []int{T}, Prefill, 2},
			{"decode 4 devices", []int{5, 1, 6}, Decode, 4},
		} {
			got, gotSel := run(t, a, x, tc.chunks, tc.form, tc.devs)
			if d := maxDiff(got, want); d > 1e-5 {
				t.Errorf("topK %d %s: outputs differ by %g", topK, tc.name, d)
			}
			for i := range wantSel {
				if !slices.Equal(gotSel[i], wantSel[i]) {
					t.Errorf("topK %d %s: query %d keys %v, batch %v", topK, tc.name, i, gotSel[i], wantSel[i])
				}
			}
		}
		// Selection: nil (all keys) while a query sees ≤ topK keys, topK keys after.
		for i, sel := range wantSel {
			switch {
			case topK == 0 || i+1 <= topK:
				if sel != nil {
					t.Errorf("topK %d query %d: selection %v, want all keys", topK, i, sel)
				}
			case len(sel) != topK || !slices.IsSorted(sel) || sel[len(sel)-1] > int32(i):
				t.Errorf("topK %d query %d: selection %v", topK, i, sel)
			}
		}
	}
}

// TestSparseChangesOutput: a selection that drops keys changes the output
// of later queries only.
func TestSparseChangesOutput(t *testing.T) {
	const T = 12
	dense, sparse := testLayer(3, 0), testLayer(3, 5)
	x := randVec(rand.New(rand.NewPCG(9, 9)), T*dense.c.Embd, 0, 1)
	d, _ := run(t, dense, x, []int{T}, Prefill, 1)
	s, _ := run(t, sparse, x, []int{T}, Prefill, 1)
	E := dense.c.Embd
	if diff := maxDiff(d[:5*E], s[:5*E]); diff != 0 {
		t.Errorf("first 5 queries differ by %g", diff)
	}
	if diff := maxDiff(d[5*E:], s[5*E:]); diff < 1e-3 {
		t.Errorf("later queries differ by only %g", diff)
	}
}

// TestLatentCache: the cache allocates all its positions when it is made,
// keeps what was written as positions are reached, refuses a position
// beyond its size with ErrContextFull, and Free returns the memory.
func TestLatentCache(t *testing.T) {
	dev := cpu.NewDevice(0, 1, 0)
	for _, tc := range []struct {
		name                     string
		layers, size, rank, rope int
		idx                      []int
	}{
		{"no layers", 0, 4, 8, 2, nil},
		{"no positions", 2, 0, 8, 2, nil},
		{"wrong indexer widths", 2, 4, 8, 2, []int{1}},
		{"negative indexer width", 2, 4, 8, 2, []int{0, -1}},
		{"too large", 1, math.MaxInt32, 8, 2, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewLatentCache(dev, tc.layers, tc.size, tc.rank, tc.rope, tc.idx, tensor.F32); err == nil {
				t.Error("accepted")
			}
			if dev.Used() != 0 {
				t.Errorf("%d bytes in use after a refused cache", dev.Used())
			}
		})
	}
	c, err := NewLatentCache(dev, 2, 4, 8, 2, []int{0, 3}, tensor.F32)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.BytesPerToken(); got != 4*(10+10+3) {
		t.Errorf("BytesPerToken %d, want %d", got, 4*23)
	}
	want := int64(4 * (2*4*10 + 4*3))
	if dev.Used() != want || c.Bytes() != want {
		t.Errorf("device holds %d bytes, Bytes %d, want %d before any position", dev.Used(), c.Bytes(), want)
	}
	if err := c.room(1, 3); err != nil {
		t.Fatal(err)
	}
	if c.Latent(1, 3).Len() != 30 || c.IndexKeys(1, 3).Len() != 9 || c.IndexKeys(0, 0) != nil {
		t.Errorf("sizes: %d latent, %d keys", c.Latent(1, 3).Len(), c.IndexKeys(1, 3).Len())
	}
	first := &cpu.F32(c.Latent(1, 1))[0]
	cpu.F32(c.Latent(1, 3))[29] = 5
	if err := c.room(1, 4); err != nil {
		t.Fatal(err)
	}
	if cpu.F32(c.Latent(1, 4))[29] != 5 || &cpu.F32(c.Latent(1, 4))[0] != first {
		t.Error("reaching a new position moved the rows")
	}
	err = c.room(1, 5)
	if !errors.Is(err, ErrContextFull) || !strings.Contains(err.Error(), "4 positions") {
		t.Errorf("position 4 of 4: error %v, want one wrapping ErrContextFull naming the size", err)
	}
	if dev.Used() != want {
		t.Errorf("device holds %d bytes after use, want %d", dev.Used(), want)
	}
	c.Free()
	if dev.Used() != 0 {
		t.Errorf("%d bytes in use after Free", dev.Used())
	}
}

// countingDevice counts the allocations made through it.
type countingDevice struct {
	backend.Device
	allocs, frees int
}

func (d *countingDevice) Alloc(n int) (backend.Buffer, error) {
	d.allocs++
	return d.Device.Alloc(n)
}

func (d *countingDevice) AllocType(n int, t tensor.Type) (backend.Buffer, error) {
	d.allocs++
	return d.Device.AllocType(n, t)
}

func (d *countingDevice) Free(b backend.Buffer) {
	d.frees++
	d.Device.Free(b)
}

// TestCacheAllocatedOnce: running a layer over every position of its
// cache (a prefill, then decode steps one by one and batched, past the DSA
// top_k) allocates nothing more for the cache and keeps its rows in place;
// the position after the last is refused with ErrContextFull.
func TestCacheAllocatedOnce(t *testing.T) {
	const size = 40
	ly := testLayer(5, 4)
	dev := cpu.NewDevice(0, 1, 0)
	sh, err := ly.w.Upload(dev, ly.c, 0, ly.c.Heads)
	if err != nil {
		t.Fatal(err)
	}
	a := &MLA{Cfg: ly.c, W: sh, Dev: dev}
	cdev := &countingDevice{Device: dev}
	cache, err := NewLatentCache(cdev, 1, size, ly.c.KVRank, ly.c.DRope, []int{ly.c.IndexDim}, tensor.F32)
	if err != nil {
		t.Fatal(err)
	}
	if cdev.allocs != 2 {
		t.Fatalf("%d allocations for one layer's latent and indexer keys, want 2", cdev.allocs)
	}
	lat0 := &cpu.F32(cache.latent[0])[0]
	idx0 := &cpu.F32(cache.index[0])[0]
	E := ly.c.Embd
	x := randVec(rand.New(rand.NewPCG(1, 2)), E, 0, 1)
	xb, _ := dev.Alloc(8 * E)
	out, _ := dev.Alloc(8 * E)
	for i := range 8 {
		dev.Write(xb.Slice(i*E, E), x)
	}
	s := NewScratch(dev)
	if err := a.Forward(out, xb, 8, 0, cache, s, Prefill); err != nil {
		t.Fatal(err)
	}
	pos := 8
	for ; pos < 24; pos++ {
		if err := a.Forward(out.Slice(0, E), xb.Slice(0, E), 1, pos, cache, s, Decode); err != nil {
			t.Fatal(err)
		}
	}
	for ; pos < size; pos++ {
		if err := a.DecodeBatch(out.Slice(0, E), xb.Slice(0, E), []Seq{{Cache: cache, Pos: pos}}, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := dev.Sync(); err != nil {
		t.Fatal(err)
	}
	if cdev.allocs != 2 || cdev.frees != 0 {
		t.Errorf("after %d positions: %d allocations and %d frees, want 2 and 0", size, cdev.allocs, cdev.frees)
	}
	if &cpu.F32(cache.Latent(0, size))[0] != lat0 || &cpu.F32(cache.IndexKeys(0, size))[0] != idx0 {
		t.Error("the cache's rows moved")
	}
	err = a.Forward(out.Slice(0, E), xb.Slice(0, E), 1, size, cache, s, Decode)
	if !errors.Is(err, ErrContextFull) {
		t.Errorf("position %d of %d: error %v, want ErrContextFull", size, size, err)
	}
	err = a.Forward(out, xb, 8, size-4, cache, s, Prefill)
	if !errors.Is(err, ErrContextFull) {
		t.Errorf("positions [%d, %d) of %d: error %v, want ErrContextFull", size-4, size+4, size, err)
	}
	if cdev.allocs != 2 {
		t.Errorf("%d allocations after the refused positions, want 2", cdev.allocs)
	}
	cache.Free()
	if cdev.frees != 2 {
		t.Errorf("Free made %d frees, want 2", cdev.frees)
	}
}

// TestBudget: a cache that does not fit the device's budget fails when it
// is made, with an error naming the device and the layer, and gives back
// the layers it had allocated.
func TestBudget(t *testing.T) {
	dev := cpu.NewDevice(3, 1, 500) // one layer of 10 positions of 10 values: 400 bytes
	if _, err := NewLatentCache(dev, 1, 10, 8, 2, nil, tensor.F32); err != nil {
		t.Fatal(err)
	}
	dev = cpu.NewDevice(3, 1, 500)
	_, err := NewLatentCache(dev, 2, 10, 8, 2, nil, tensor.F32)
	if err == nil || !strings.Contains(err.Error(), "cpu:3") || !strings.Contains(err.Error(), "do not fit") ||
		!strings.Contains(err.Error(), "layer 1") {
		t.Errorf("error %v, want a budget error naming cpu:3 and layer 1", err)
	}
	if dev.Used() != 0 {
		t.Errorf("%d bytes in use after the refused cache", dev.Used())
	}
}

// TestLongContextCache: a 100k-token KV cache of the GLM-5-shaped model
// glmrun synth --arch glm-dsa writes (GLM-5's 512-wide latent, 64-wide
// rope key and 128-wide indexer keys; 4 layers) is allocated in full, at
// the bytes its type gives per position, in f16 and in q8_0.
func TestLongContextCache(t *testing.T) {
	if raceEnabled {
		t.Skip("no concurrency here, and 850 MB of instrumented writes")
	}
	const layers, size, rank, rope, index = 4, 102400, 512, 64, 128
	for _, tc := range []struct {
		typ      tensor.Type
		perToken int64 // per layer: latent row and indexer key
	}{
		{tensor.F16, 2*(rank+rope) + 2*index},
		{tensor.Q8_0, (rank+rope)/32*34 + index/32*34},
	} {
		dev := cpu.NewDevice(0, 1, 0)
		c, err := NewLatentCache(dev, layers, size, rank, rope, []int{index, index, index, index}, tc.typ)
		if err != nil {
			t.Fatalf("%s: %v", tc.typ, err)
		}
		want := int64(layers) * tc.perToken * size
		if c.BytesPerToken() != layers*tc.perToken || c.Bytes() != want || dev.Used() != want {
			t.Errorf("%s: %d bytes per token, %d in all, %d allocated; want %d per token, %d", tc.typ,
				c.BytesPerToken(), c.Bytes(), dev.Used(), layers*tc.perToken, want)
		}
		t.Logf("%s: %d positions, %.0f MiB", tc.typ, size, float64(c.Bytes())/(1<<20))
		c.Free()
		if dev.Used() != 0 {
			t.Errorf("%s: %d bytes in use after Free", tc.typ, dev.Used())
		}
	}
}

// TestCacheExportImport: rows exported from a cache of each type and
// imported into another of the same shape export again unchanged (the
// float32 values of a stored row convert back to the same row), which is
// what the server's prefix cache relies on.
func TestCacheExportImport(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for _, typ := range []tensor.Type{tensor.F32, tensor.F16, tensor.BF16, tensor.Q8_0} {
		dev := cpu.NewDevice(0, 1, 0)
		a, err := NewLatentCache(dev, 2, 8, 64, 32, []int{0, 64}, typ)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := NewLatentCache(dev, 2, 8, 64, 32, []int{0, 64}, typ)
		vals := randVec(r, 5*a.PositionValues(), 0, 1)
		if err := a.Import(vals, 1, 5); err != nil {
			t.Fatal(err)
		}
		first := make([]float32, len(vals))
		if err := a.Export(first, 1, 5); err != nil {
			t.Fatal(err)
		}
		if err := b.Import(first, 2, 5); err != nil {
			t.Fatal(err)
		}
		again := make([]float32, len(vals))
		if err := b.Export(again, 2, 5); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(first, again) {
			t.Errorf("%s: rows change on a second export and import", typ)
		}
		if typ != tensor.F32 && slices.Equal(first, vals) {
			t.Errorf("%s: stored values equal the float32 ones", typ)
		}
	}
}
