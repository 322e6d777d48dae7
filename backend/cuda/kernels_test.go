package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/backend"
	"github.com/glmrun/glmrun/backend/cpu"
	"github.com/glmrun/glmrun/tensor"
)

// Every kernel runs on the fake driver (the .cu sources executed on the
// CPU) and is compared with the Go CPU backend on the same random inputs.
// maxRel bounds max |cuda − cpu| / max |cpu|. The kernels repeat the CPU
// backend's arithmetic, so what is left is float32 rounding of sums
// reduced in another order across threads; 1e-5 (a few dozen float32
// ulps of the largest value) leaves room for that, while a wrong index,
// term or scale lands far above it (docs/CUDA.md section 2).
const maxRel = 1e-5

// pair is one CUDA device (fake driver) and one CPU device fed the same
// data.
type pair struct {
	t   *testing.T
	g   *Device
	c   backend.Device
	r   *rand.Rand
	err map[string]float64 // measured errors, reported at the end
}

func newPair(t *testing.T) *pair {
	g := openFake(t, backend.Config{Devices: 1})[0]
	c := cpu.NewDevice(0, 1, 0)
	t.Cleanup(func() { c.Close() })
	return &pair{t: t, g: g, c: c, r: rand.New(rand.NewPCG(7, 11)), err: map[string]float64{}}
}

func (p *pair) vec(n int, mean, std float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(mean + std*p.r.NormFloat64())
	}
	return v
}

// buf uploads v to both devices.
func (p *pair) buf(v []float32) (g, c backend.Buffer) {
	p.t.Helper()
	g, err := p.g.UploadVector("v", v)
	if err != nil {
		p.t.Fatal(err)
	}
	c, err = p.c.UploadVector("v", v)
	if err != nil {
		p.t.Fatal(err)
	}
	return g, c
}

func (p *pair) zeros(n int) (g, c backend.Buffer) { return p.buf(make([]float32, n)) }

func (p *pair) ids(n int) (g, c backend.IDs) {
	p.t.Helper()
	g, err := p.g.AllocIDs(n)
	if err != nil {
		p.t.Fatal(err)
	}
	c, err = p.c.AllocIDs(n)
	if err != nil {
		p.t.Fatal(err)
	}
	return g, c
}

func (p *pair) weight(m backend.Matrix) (g, c backend.Weight) {
	p.t.Helper()
	g, err := p.g.Upload(m)
	if err != nil {
		p.t.Fatal(err)
	}
	c, err = p.c.Upload(m)
	if err != nil {
		p.t.Fatal(err)
	}
	return g, c
}

// read returns the values of both buffers (a fault on the CUDA device
// ends the test).
func (p *pair) read(name string, g, c backend.Buffer) (got, want []float32) {
	p.t.Helper()
	got, want = make([]float32, g.Len()), make([]float32, c.Len())
	p.g.Read(got, g)
	p.c.Read(want, c)
	if err := p.g.Sync(); err != nil {
		p.t.Fatalf("%s: %v", name, err)
	}
	return got, want
}

// compare reads both buffers and records the relative error under name.
func (p *pair) compare(name string, g, c backend.Buffer) {
	p.t.Helper()
	got, want := p.read(name, g, c)
	e := relErr(got, want)
	p.err[name] = max(p.err[name], e)
	if !(e <= maxRel) {
		i := worst(got, want)
		p.t.Errorf("%s: relative error %.3g > %g (at %d: %g, cpu %g)", name, e, maxRel, i, got[i], want[i])
	}
}

// selection uploads the key selection sel to both devices.
func (p *pair) selection(sel []int32) (g, c backend.IDs) {
	g, c = p.ids(len(sel))
	p.g.writeIDs(p.g.ids(g), sel)
	copy(cpu.Int32(c), sel)
	return g, c
}

// compareAttention runs both forms of attention on both devices, every
// key visible and then with the selection gs/cs, and compares them under
// name.
func (p *pair) compareAttention(name string, T, pos0 int, mp backend.MLAParams, gq, cq, gl, cl backend.Buffer,
	gkb, ckb, gvb, cvb backend.Weight, gs, cs backend.IDs) {
	p.t.Helper()
	for _, sparse := range []bool{false, true} {
		var gsel, csel backend.IDs
		n := name
		if sparse {
			gsel, csel, n = gs, cs, name+" sparse"
		}
		gd, cd := p.zeros(T * mp.Heads * mp.DV)
		p.g.AttentionPrefill(gd, gq, gl, gkb, gvb, gsel, T, pos0, mp)
		p.c.AttentionPrefill(cd, cq, cl, ckb, cvb, csel, T, pos0, mp)
		p.compare("AttentionPrefill "+n, gd, cd)
		p.g.AttentionDecode(gd, gq, gl, gkb, gvb, gsel, T, pos0, mp)
		p.c.AttentionDecode(cd, cq, cl, ckb, cvb, csel, T, pos0, mp)
		p.compare("AttentionDecode "+n, gd, cd)
	}
}

// compareExact reads both buffers and requires the same bits.
func (p *pair) compareExact(name string, g, c backend.Buffer) {
	p.t.Helper()
	got, want := p.read(name, g, c)
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			p.t.Errorf("%s: value %d is %g, cpu %g", name, i, got[i], want[i])
			return
		}
	}
}

// cache makes a KV cache of rows rows of w values stored as typ on both
// devices and writes vals into it a row at a time through Copy.
func (p *pair) cache(typ tensor.Type, rows, w int, vals []float32) (g, c backend.Buffer) {
	p.t.Helper()
	g, err := p.g.AllocType(rows*w, typ)
	if err != nil {
		p.t.Fatal(err)
	}
	c, err = p.c.AllocType(rows*w, typ)
	if err != nil {
		p.t.Fatal(err)
	}
	for r := range rows {
		gs, cs := p.buf(vals[r*w : (r+1)*w])
		p.g.Copy(g.Slice(r*w, w), gs)
		p.c.Copy(c.Slice(r*w, w), cs)
	}
	return g, c
}

// compareIDs requires equal ids.
func (p *pair) compareIDs(name string, g, c backend.IDs) {
	p.t.Helper()
	got, want := make([]int32, g.Len()), make([]int32, c.Len())
	p.g.ReadIDs(got, g)
	p.c.ReadIDs(want, c)
	if err := p.g.Sync(); err != nil {
		p.t.Fatalf("%s: %v", name, err)
	}
	if !slices.Equal(got, want) {
		p.t.Errorf("%s: ids %v, cpu %v", name, got, want)
	}
}

func relErr(got, want []float32) float64 {
	var d, m float64
	for i := range want {
		d = max(d, math.Abs(float64(got[i])-float64(want[i])))
		m = max(m, math.Abs(float64(want[i])))
		if math.IsNaN(float64(got[i])) != math.IsNaN(float64(want[i])) {
			return math.Inf(1)
		}
	}
	if m == 0 {
		return d
	}
	return d / m
}

func worst(got, want []float32) int {
	w, wd := 0, -1.0
	for i := range want {
		if d := math.Abs(float64(got[i]) - float64(want[i])); d > wd || math.IsNaN(d) {
			w, wd = i, d
		}
	}
	return w
}

// report logs the measured errors (go test -v shows them).
func (p *pair) report() {
	names := make([]string, 0, len(p.err))
	for n := range p.err {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "\n  %-28s %.3g", n, p.err[n])
	}
	p.t.Logf("max relative error, CUDA kernels (CPU-simulated) vs backend/cpu:%s", b.String())
}

// randHalf returns a random positive binary16 in [2^-8, 2^-3).
func (p *pair) randHalf() uint16 {
	return uint16(7+p.r.IntN(5))<<10 | uint16(p.r.IntN(1024))
}

// randMatrix returns a rows × cols matrix of type typ with random
// contents: quantized blocks are random bytes with sane scales.
func (p *pair) randMatrix(typ tensor.Type, rows, cols int) backend.Matrix {
	p.t.Helper()
	rb, err := typ.RowSize(int64(cols))
	if err != nil {
		p.t.Fatal(err)
	}
	data := make([]byte, int(rb)*rows)
	switch typ {
	case tensor.F32:
		for i := 0; i < len(data); i += 4 {
			binary.LittleEndian.PutUint32(data[i:], math.Float32bits(float32(p.r.NormFloat64())))
		}
	case tensor.F16:
		for i := 0; i < len(data); i += 2 {
			binary.LittleEndian.PutUint16(data[i:], p.randHalf()|uint16(p.r.IntN(2))<<15)
		}
	case tensor.BF16:
		for i := 0; i < len(data); i += 2 {
			binary.LittleEndian.PutUint16(data[i:], uint16(math.Float32bits(float32(p.r.NormFloat64()))>>16))
		}
	default:
		for i := range data {
			data[i] = byte(p.r.IntN(256))
		}
		// The f16 fields of each block.
		var at []int
		switch typ {
		case tensor.Q4_0, tensor.Q5_0, tensor.Q8_0, tensor.IQ4_XS:
			at = []int{0}
		case tensor.Q4_1, tensor.Q5_1, tensor.Q4_K, tensor.Q5_K:
			at = []int{0, 2}
		case tensor.Q6_K:
			at = []int{208}
		default:
			p.t.Fatalf("no random generator for %v", typ)
		}
		bs := typ.TypeSize()
		for b := 0; b < len(data); b += bs {
			for _, o := range at {
				binary.LittleEndian.PutUint16(data[b+o:], p.randHalf())
			}
		}
	}
	m, err := backend.NewMatrix(typ.String(), typ, rows, cols, data)
	if err != nil {
		p.t.Fatal(err)
	}
	return m
}

func sortedTypes() []tensor.Type {
	var ts []tensor.Type
	for t := range mmTypes {
		ts = append(ts, t)
	}
	slices.Sort(ts)
	return ts
}

func TestKernels(t *testing.T) {
	p := newPair(t)
	defer p.report()

	t.Run("MatMul+GetRows", func(t *testing.T) {
		types := sortedTypes()
		if os.Getenv("GLMRUN_TSAN_CHILD") == "1" {
			// Under ThreadSanitizer: the block reduction is the same for
			// every type; the dequantizers share no memory.
			types = []tensor.Type{tensor.F32, tensor.Q8_0, tensor.Q4_K}
		}
		for _, typ := range types {
			cols := 512
			if typ.BlockSize() == 1 {
				cols = 70 // a partial 32-element chunk
			}
			for _, n := range []int{1, 6} {
				m := p.randMatrix(typ, 9, cols)
				m.Scale = map[bool]float32{true: 0.5, false: 0}[n == 6]
				gw, cw := p.weight(m)
				gx, cx := p.buf(p.vec(n*cols, 0, 1))
				gd, cd := p.zeros(n * 9)
				p.g.MatMul(gd, gx, n, gw)
				p.c.MatMul(cd, cx, n, cw)
				p.compare("MatMul "+typ.String(), gd, cd)
			}
			m := p.randMatrix(typ, 9, cols)
			gw, cw := p.weight(m)
			gd, cd := p.zeros(3 * cols)
			p.g.GetRows(gd, gw, []int32{4, 0, 8})
			p.c.GetRows(cd, cw, []int32{4, 0, 8})
			p.compare("GetRows "+typ.String(), gd, cd)
		}
	})

	t.Run("MatMul wide", func(t *testing.T) {
		// GLM-5 row length: 192 chunks, more than a block's 128 threads.
		for _, typ := range []tensor.Type{tensor.Q4_K, tensor.Q8_0} {
			gw, cw := p.weight(p.randMatrix(typ, 3, 6144))
			gx, cx := p.buf(p.vec(5*6144, 0, 1))
			gd, cd := p.zeros(5 * 3)
			p.g.MatMul(gd, gx, 5, gw)
			p.c.MatMul(cd, cx, 5, cw)
			p.compare("MatMul 6144 "+typ.String(), gd, cd)
		}
	})

	t.Run("norms", func(t *testing.T) {
		const rows, n, stride = 3, 100, 120
		gx, cx := p.buf(p.vec(rows*stride, 0.3, 2))
		gw, cw := p.buf(p.vec(n, 1, 0.2))
		gb, cb := p.buf(p.vec(n, 0, 0.2))
		gd, cd := p.zeros(rows * stride)
		p.g.RMSNorm(gd, gx, rows, stride, gw, 1e-6)
		p.c.RMSNorm(cd, cx, rows, stride, cw, 1e-6)
		p.compare("RMSNorm", gd, cd)
		p.g.LayerNorm(gd, gx, rows, stride, gw, gb, 0)
		p.c.LayerNorm(cd, cx, rows, stride, cw, cb, 0)
		p.compare("LayerNorm", gd, cd)
		p.g.RMSNorm(gx, gx, rows, stride, gw, 1e-5) // in place
		p.c.RMSNorm(cx, cx, rows, stride, cw, 1e-5)
		p.compare("RMSNorm", gx, cx)

		// The fused residual add and norm: against the CPU's, and
		// against add_f32 then rmsnorm_f32 on the device, bit for bit.
		h := p.vec(rows*n, 0.3, 2)
		delta := p.vec(rows*n, 0, 1)
		gh, ch := p.buf(h)
		ge, ce := p.buf(delta)
		gd, cd = p.zeros(rows * n)
		p.g.AddRMSNorm(gd, gh, ge, rows, n, gw, 1e-6)
		p.c.AddRMSNorm(cd, ch, ce, rows, n, cw, 1e-6)
		p.compare("AddRMSNorm sum", gh, ch)
		p.compare("AddRMSNorm", gd, cd)
		gh2, _ := p.buf(h)
		gd2, _ := p.zeros(rows * n)
		p.g.Add(gh2, ge)
		p.g.RMSNorm(gd2, gh2, rows, n, gw, 1e-6)
		for _, c := range [][2]backend.Buffer{{gh, gh2}, {gd, gd2}} {
			a, b := make([]float32, rows*n), make([]float32, rows*n)
			p.g.Read(a, c[0])
			p.g.Read(b, c[1])
			if !slices.Equal(a, b) {
				t.Errorf("add_rmsnorm_f32 differs from add_f32, rmsnorm_f32")
			}
		}
	})

	t.Run("Rope", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			r    backend.Rope
		}{
			{"Rope NORM", backend.Rope{Dims: 16, Base: 10000, FreqScale: 1, AttnFactor: 1}},
			{"Rope YaRN", backend.Rope{Dims: 16, Base: 1e6, FreqScale: 0.25, ExtFactor: 1,
				AttnFactor: 1 / (1 + 0.1*float32(math.Log(4))), CorrDims: backend.YaRNCorrDims(16, 1024, 1e6, 32, 1)}},
		} {
			const rows, heads, stride, off = 3, 2, 24, 8
			gx, cx := p.buf(p.vec(rows*heads*stride, 0, 1))
			p.g.Rope(gx, rows, heads, stride, off, 1000, tc.r)
			p.c.Rope(cx, rows, heads, stride, off, 1000, tc.r)
			p.compare(tc.name, gx, cx)
		}
	})

	t.Run("elementwise", func(t *testing.T) {
		const n = 1000
		gx, cx := p.buf(p.vec(n, 0, 3))
		gy, cy := p.buf(p.vec(n, 0, 3))
		gd, cd := p.zeros(n)
		p.g.Add(gy, gx)
		p.c.Add(cy, cx)
		p.compare("Add", gy, cy)
		p.g.Scale(gy, 0.37)
		p.c.Scale(cy, 0.37)
		p.compare("Scale", gy, cy)
		p.g.Copy(gd, gy)
		p.c.Copy(cd, cy)
		p.compare("Copy", gd, cd)
		p.g.SwiGLU(gd, gx, gy)
		p.c.SwiGLU(cd, cx, cy)
		p.compare("SwiGLU", gd, cd)
	})

	t.Run("Softmax", func(t *testing.T) {
		const rows, n = 3, 300
		v := p.vec(rows*n, 0, 4)
		v[7] = float32(math.Inf(-1))
		gx, _ := p.buf(v)
		p.g.Softmax(gx, rows, n, n)
		for r := 0; r < rows; r++ {
			cpu.Softmax(v[r*n : (r+1)*n])
		}
		_, cx := p.buf(v)
		p.compare("Softmax", gx, cx)
	})

	t.Run("RouterTopK", func(t *testing.T) {
		const T, X, K = 5, 16, 4
		bias := p.vec(X, 0, 0.05)
		gBias, cBias := p.buf(bias)
		for _, r := range []backend.Router{
			{Experts: X, Used: K, Gating: backend.GatingSoftmax, Groups: 1},
			{Experts: X, Used: K, Gating: backend.GatingSigmoid, NormWeights: true, Scale: 2.5},
			{Experts: X, Used: K, Gating: backend.GatingSqrtSoftplus, NormWeights: true, Groups: 4, GroupsUse: 2},
		} {
			gl, cl := p.buf(p.vec(T*X, 0, 2))
			gi, ci := p.ids(T * K)
			gw, cw := p.zeros(T * K)
			gr, cr := r, r
			if r.Gating != backend.GatingSoftmax {
				gr.Bias, cr.Bias = gBias, cBias
			}
			p.g.RouterTopK(gi, gw, gl, T, &gr)
			p.c.RouterTopK(ci, cw, cl, T, &cr)
			name := fmt.Sprintf("RouterTopK gating %d", r.Gating)
			p.compareIDs(name, gi, ci)
			p.compare(name, gw, cw)
		}
	})

	t.Run("IndexerTopK", func(t *testing.T) {
		const T, pos0 = 5, 7
		ip := backend.IndexerParams{Heads: 4, Dim: 16, TopK: 6}
		gq, cq := p.buf(p.vec(T*ip.Heads*ip.Dim, 0, 1))
		gw, cw := p.buf(p.vec(T*ip.Heads, 0, 0.5))
		gk, ck := p.buf(p.vec((pos0+T)*ip.Dim, 0, 1))
		gs, cs := p.ids(T * ip.TopK)
		p.g.IndexerTopK(gs, gq, gw, gk, T, pos0, ip)
		p.c.IndexerTopK(cs, cq, cw, ck, T, pos0, ip)
		p.compareIDs("IndexerTopK", gs, cs)
		// Queries that see no more than TopK keys: all of them, then −1.
		p.g.IndexerTopK(gs, gq, gw, gk, T, 0, ip)
		p.c.IndexerTopK(cs, cq, cw, ck, T, 0, ip)
		p.compareIDs("IndexerTopK short", gs, cs)
	})

	// The radix select past one scan chunk (256 keys), with the K-th best
	// score shared by many keys: 700 keys that repeat 9 distinct rows (and
	// the scores that relu leaves at 0), so the selection must take the
	// lowest-indexed of the tied keys, and the keys above the K-th, in
	// index order. 70 queries: two blocks of the scores' query blocking.
	t.Run("IndexerTopKTies", func(t *testing.T) {
		const T, pos0 = indexQueryBlock + 6, 697
		ip := backend.IndexerParams{Heads: 4, Dim: 16, TopK: 150}
		gq, cq := p.buf(p.vec(T*ip.Heads*ip.Dim, 0, 1))
		gw, cw := p.buf(p.vec(T*ip.Heads, 0.5, 0.5))
		rows := p.vec(9*ip.Dim, 0, 1)
		keys := make([]float32, 0, (pos0+T)*ip.Dim)
		for k := range pos0 + T {
			keys = append(keys, rows[k%9*ip.Dim:][:ip.Dim]...)
		}
		gk, ck := p.buf(keys)
		gs, cs := p.ids(T * ip.TopK)
		p.g.IndexerTopK(gs, gq, gw, gk, T, pos0, ip)
		p.c.IndexerTopK(cs, cq, cw, ck, T, pos0, ip)
		p.compareIDs("IndexerTopK ties", gs, cs)
	})

	t.Run("Attention", func(t *testing.T) {
		const T, pos0 = 4, 5
		mp := backend.MLAParams{Heads: 2, DNope: 32, DRope: 8, DV: 32, KVRank: 64, Tau: 0.15, TopK: 5}
		H, dn, dr, dv, kr := mp.Heads, mp.DNope, mp.DRope, mp.DV, mp.KVRank
		nKV := pos0 + T
		for _, typ := range []tensor.Type{tensor.F32, tensor.Q8_0} {
			gkb, ckb := p.weight(p.randMatrix(typ, H*kr, dn))
			gvb, cvb := p.weight(p.randMatrix(typ, H*dv, kr))
			gq, cq := p.buf(p.vec(T*H*(dn+dr), 0, 0.3))
			gl, cl := p.buf(p.vec(nKV*(kr+dr), 0, 1))
			// A sparse selection: the first key, then every other one.
			sel := make([]int32, T*mp.TopK)
			for t := 0; t < T; t++ {
				n := 0
				for k := 0; k <= pos0+t && n < mp.TopK; k += 2 {
					sel[t*mp.TopK+n] = int32(k)
					n++
				}
				for ; n < mp.TopK; n++ {
					sel[t*mp.TopK+n] = -1
				}
			}
			gs, cs := p.selection(sel)
			p.compareAttention(typ.String(), T, pos0, mp, gq, cq, gl, cl, gkb, ckb, gvb, cvb, gs, cs)
		}
	})

	// Past one tile of mla_attend_f32's online softmax: keys whose scores
	// grow with their position make every tile raise the running maximum,
	// so the sums of the tiles before are rescaled. The device's scratch
	// does not grow with the keys: no score matrix, no per-key k_nope or v.
	t.Run("AttentionLong", func(t *testing.T) {
		const T, pos0 = 3, 2*attnThreads + 41
		mp := backend.MLAParams{Heads: 2, DNope: 32, DRope: 8, DV: 32, KVRank: 64, Tau: 0.15, TopK: attnThreads + 20}
		H, dn, dr, dv, kr := mp.Heads, mp.DNope, mp.DRope, mp.DV, mp.KVRank
		nKV := pos0 + T
		gkb, ckb := p.weight(p.randMatrix(tensor.F32, H*kr, dn))
		gvb, cvb := p.weight(p.randMatrix(tensor.F32, H*dv, kr))
		// q_pe near 1 and k_pe growing with the key's position.
		q := make([]float32, 0, T*H*(dn+dr))
		for range T * H {
			q = append(append(q, p.vec(dn, 0, 0.3)...), p.vec(dr, 1, 0.3)...)
		}
		gq, cq := p.buf(q)
		lat := make([]float32, 0, nKV*(kr+dr))
		for k := range nKV {
			lat = append(append(lat, p.vec(kr, 0, 1)...), p.vec(dr, 10*float64(k)/float64(nKV), 1)...)
		}
		gl, cl := p.buf(lat)
		sel := make([]int32, T*mp.TopK)
		for t := range T {
			for i := range mp.TopK {
				sel[t*mp.TopK+i] = int32(2 * i) // every other key, past the first tile
			}
		}
		gs, cs := p.selection(sel)
		scratch := func() (n int64) {
			for _, m := range p.g.scratch {
				n += m.bytes
			}
			return n
		}
		gd, _ := p.zeros(T * H * dv)
		p.g.AttentionPrefill(gd, gq, gl, gkb, gvb, nil, T, 0, mp)
		p.g.AttentionDecode(gd, gq, gl, gkb, gvb, nil, T, 0, mp)
		before := scratch()
		p.compareAttention("long", T, pos0, mp, gq, cq, gl, cl, gkb, ckb, gvb, cvb, gs, cs)
		if after := scratch(); after != before {
			t.Errorf("scratch grew from %d to %d bytes with %d keys instead of %d", before, after, nKV, T)
		}
	})

	t.Run("AttentionHeadGroups", func(t *testing.T) {
		// More heads than a block serves (two groups, the second
		// partial) and a context spread over several splits per group,
		// merged by mla_combine_f32.
		const T, pos0 = 2, 3*attnThreads + 5
		mp := backend.MLAParams{Heads: 11, DNope: 16, DRope: 8, DV: 16, KVRank: 32, Tau: 0.2, TopK: attnThreads + 7}
		H, dn, dr, dv, kr := mp.Heads, mp.DNope, mp.DRope, mp.DV, mp.KVRank
		if heads, _, splits := attnSplit(T, H, kr, dr, pos0+T); heads >= H || splits < 2 {
			t.Fatalf("the case has %d heads a block, %d splits: want fewer than %d, several", heads, splits, H)
		}
		nKV := pos0 + T
		gkb, ckb := p.weight(p.randMatrix(tensor.F32, H*kr, dn))
		gvb, cvb := p.weight(p.randMatrix(tensor.F32, H*dv, kr))
		gq, cq := p.buf(p.vec(T*H*(dn+dr), 0, 0.5))
		gl, cl := p.buf(p.vec(nKV*(kr+dr), 0, 1))
		sel := make([]int32, T*mp.TopK)
		for i := range sel {
			sel[i] = int32(3 * (i % mp.TopK) % (pos0 + 1))
		}
		gs, cs := p.selection(sel)
		p.compareAttention("head groups", T, pos0, mp, gq, cq, gl, cl, gkb, ckb, gvb, cvb, gs, cs)
	})

	t.Run("CacheTypes", func(t *testing.T) {
		// Rows written through Copy into views of a cache, as the
		// attention layers do, read back bit for bit as the CPU stores
		// them; specials included: signed zeros, values that round to
		// f16 subnormals, to zero and to infinity, and ties of f16 and
		// of Q8_0's quants.
		special := []float32{0, float32(math.Copysign(0, -1)), 1e-6, -3e-8, 7e-9, 70000, -1e6, 1 + 0x1p-11, 1 + 3*0x1p-11,
			1 + 0x1p-8, 0.5, -2.5 / 127, 1e-30, 3.0e38, 65519, 65520}
		for _, typ := range []tensor.Type{tensor.F16, tensor.BF16, tensor.Q8_0} {
			const rows, w = 5, 64
			vals := p.vec(rows*w, 0, 1)
			copy(vals[w:], special)
			// A Q8_0 block of scale 1 whose quants are ties: round away
			// from zero.
			copy(vals[2*w:], []float32{127, 2.5, -3.5, 0.5, -0.5, 126.5, -1.5})
			gc, cc := p.cache(typ, rows, w, vals)
			p.compareExact("Copy into "+typ.String(), gc, cc)
			host := make([]float32, rows*w)
			p.g.Read(host, gc)
			if slices.Equal(host, vals) {
				t.Errorf("%s: the cache holds the float32 values unconverted", typ)
			}
			// Write converts on the host, the same way.
			p.g.Write(gc, vals)
			p.c.Write(cc, vals)
			p.compareExact("Write into "+typ.String(), gc, cc)
		}
		for _, typ := range []tensor.Type{tensor.F16, tensor.BF16, tensor.Q8_0} {
			const T, pos0 = 5, 7
			ip := backend.IndexerParams{Heads: 4, Dim: 32, TopK: 6}
			gq, cq := p.buf(p.vec(T*ip.Heads*ip.Dim, 0, 1))
			gw, cw := p.buf(p.vec(T*ip.Heads, 0, 0.5))
			gk, ck := p.cache(typ, pos0+T, ip.Dim, p.vec((pos0+T)*ip.Dim, 0, 1))
			gs, cs := p.ids(T * ip.TopK)
			p.g.IndexerTopK(gs, gq, gw, gk, T, pos0, ip)
			p.c.IndexerTopK(cs, cq, cw, ck, T, pos0, ip)
			p.compareIDs("IndexerTopK keys "+typ.String(), gs, cs)

			mp := backend.MLAParams{Heads: 2, DNope: 32, DRope: 8, DV: 32, KVRank: 56, Tau: 0.15, TopK: 5}
			H, dn, dr, dv, kr := mp.Heads, mp.DNope, mp.DRope, mp.DV, mp.KVRank
			nKV := pos0 + T
			gkb, ckb := p.weight(p.randMatrix(tensor.Q8_0, H*kr, dn))
			gvb, cvb := p.weight(p.randMatrix(tensor.F16, H*dv, kr)) // kr is not whole Q8_0 blocks
			gmq, cmq := p.buf(p.vec(T*H*(dn+dr), 0, 0.3))
			gl, cl := p.cache(typ, nKV, kr+dr, p.vec(nKV*(kr+dr), 0, 1))
			sel := make([]int32, T*mp.TopK)
			for i := range sel {
				sel[i] = int32(i%mp.TopK) * 2 // keys 0, 2, …, 8: every query sees them
			}
			gsel, csel := p.selection(sel)
			p.compareAttention("latent "+typ.String(), T, pos0, mp, gmq, cmq, gl, cl, gkb, ckb, gvb, cvb, gsel, csel)
		}
		// A cache buffer is no float32 buffer: an operation that is not
		// one of the cache's readers refuses it.
		gc, _ := p.cache(tensor.F16, 1, 64, p.vec(64, 0, 1))
		func() {
			defer func() {
				if recover() == nil {
					t.Error("Scale of an f16 cache buffer did not panic")
				}
			}()
			p.g.Scale(gc, 2)
		}()
		if _, err := p.g.AllocType(64, tensor.Q4_K); err == nil {
			t.Error("AllocType took Q4_K")
		}
	})

	t.Run("MoE", func(t *testing.T) { p.moe(tensor.Q8_0, 4, 5, 2, 64, 32, [][2]int{{0, 4}, {2, 2}}) })
	// More experts than routed slots: most have no rows, and the launches'
	// expert dimension covers only those with rows (moe_sort_i32's list);
	// a device may hold only experts that got no token.
	t.Run("MoEManyExperts", func(t *testing.T) { p.moe(tensor.Q8_0, 16, 3, 2, 64, 32, [][2]int{{0, 16}, {8, 8}, {12, 4}}) })
}

// moe compares MoE with X experts of width F over E-wide rows, in weight
// type typ, of which each of T tokens uses K, for devices holding the
// experts spans[i] = {first, count}.
func (p *pair) moe(typ tensor.Type, X, T, K, E, F int, spans [][2]int) {
	p.t.Helper()
	var gate, up, down []backend.Matrix
	for range X {
		gate = append(gate, p.randMatrix(typ, F, E))
		up = append(up, p.randMatrix(typ, F, E))
		down = append(down, p.randMatrix(typ, E, F))
	}
	gl, cl := p.buf(p.vec(T*X, 0, 2))
	gi, ci := p.ids(T * K)
	gwt, cwt := p.zeros(T * K)
	r := backend.Router{Experts: X, Used: K, Gating: backend.GatingSoftmax, Groups: 1, NormWeights: true}
	p.g.RouterTopK(gi, gwt, gl, T, &r)
	p.c.RouterTopK(ci, cwt, cl, T, &r)
	gx, cx := p.buf(p.vec(T*E, 0, 1))
	for _, span := range spans {
		var ge, ce backend.Experts
		ge.First, ce.First = span[0], span[0]
		for i := span[0]; i < span[0]+span[1]; i++ {
			g, c := p.weight(gate[i])
			ge.Gate, ce.Gate = append(ge.Gate, g), append(ce.Gate, c)
			g, c = p.weight(up[i])
			ge.Up, ce.Up = append(ge.Up, g), append(ce.Up, c)
			g, c = p.weight(down[i])
			ge.Down, ce.Down = append(ge.Down, g), append(ce.Down, c)
		}
		gd, cd := p.zeros(T * E)
		p.g.MoE(gd, gx, T, gi, gwt, &ge)
		p.c.MoE(cd, cx, T, ci, cwt, &ce)
		p.compare(fmt.Sprintf("MoE %s of %d experts: %d+%d", typ, X, span[0], span[1]), gd, cd)
	}
}

// TestFastMatMul: on the fast path (Config.Fast) a Q8_0 product quantizes
// the activations to Q8_0 and takes integer dot products (mmvq_q8_0), a
// Q4_K one to Q8_K (mmvq_q4_k), as the CPU's fast device does: the two agree within float rounding of the
// block sums, which a quant rounded the other way would exceed. Rows that
// do not fill the block's warps, rows shorter than a warp's 32 blocks and
// rows of several blocks a lane, one token and several.
func TestFastMatMul(t *testing.T) {
	g := openFake(t, backend.Config{Devices: 1, Fast: true})[0]
	c := cpu.NewFastDevice(0, 1, 0)
	t.Cleanup(func() { c.Close() })
	p := &pair{t: t, g: g, c: c, r: rand.New(rand.NewPCG(5, 9)), err: map[string]float64{}}
	defer p.report()
	for _, sh := range []struct {
		typ           tensor.Type
		rows, cols, n int
	}{
		{tensor.Q8_0, 37, 96, 1}, {tensor.Q8_0, 8, 4096, 1}, {tensor.Q8_0, 13, 1056, 3}, {tensor.Q8_0, 5, 2048, 7},
		// Q4_K: four lanes a 256-value block, eight blocks a pass of the warp.
		{tensor.Q4_K, 9, 256, 1}, {tensor.Q4_K, 37, 512, 2}, {tensor.Q4_K, 5, 2304, 3}, {tensor.Q4_K, 4, 6144, 1},
		// Q6_K: eight lanes a block, four blocks a pass.
		{tensor.Q6_K, 9, 256, 1}, {tensor.Q6_K, 37, 1280, 2}, {tensor.Q6_K, 4, 6144, 3},
		{tensor.Q5_K, 9, 256, 1}, {tensor.Q5_K, 13, 2304, 2},
		{tensor.IQ4_XS, 9, 256, 1}, {tensor.IQ4_XS, 13, 1280, 3}, {tensor.IQ4_XS, 4, 6144, 1},
	} {
		gw, cw := p.weight(p.randMatrix(sh.typ, sh.rows, sh.cols))
		gx, cx := p.buf(p.vec(sh.n*sh.cols, 0, 1))
		gd, cd := p.zeros(sh.n * sh.rows)
		p.g.MatMul(gd, gx, sh.n, gw)
		p.c.MatMul(cd, cx, sh.n, cw)
		p.compare(fmt.Sprintf("fast MatMul %s %dx%d, %d tokens", sh.typ, sh.rows, sh.cols, sh.n), gd, cd)
	}
	// The experts' products (mmvq_experts_*): every expert with rows in one
	// launch, the gathered rows and the SwiGLU output quantized once each.
	p.moe(tensor.Q8_0, 16, 3, 2, 64, 32, [][2]int{{0, 16}, {8, 8}})
	p.moe(tensor.Q4_K, 8, 5, 2, 256, 512, [][2]int{{0, 8}, {4, 4}})
	p.moe(tensor.Q6_K, 8, 3, 2, 256, 256, [][2]int{{0, 8}})
	p.moe(tensor.Q5_K, 8, 3, 2, 256, 256, [][2]int{{0, 8}})
	p.moe(tensor.IQ4_XS, 8, 3, 2, 256, 256, [][2]int{{0, 8}})
}
