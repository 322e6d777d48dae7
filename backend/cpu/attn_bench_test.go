package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/glmrun/glmrun/backend"
	"github.com/glmrun/glmrun/tensor"
)

// glm5MLA is GLM-5's attention on one device: 64 heads, a 512-wide latent
// with a 64-wide shared rope key, top_k 2048.
var glm5MLA = backend.MLAParams{Heads: 64, DNope: 192, DRope: 64, DV: 256, KVRank: 512, Tau: 0.07, TopK: 2048}

// BenchmarkAttentionDecode is one decode step's sparse attention at GLM-5's
// shapes on the fast device: one query over the 2,048 keys the indexer
// chose out of depth cached positions (spread over the whole context).
func BenchmarkAttentionDecode(b *testing.B) {
	p := glm5MLA
	r := rand.New(rand.NewPCG(3, 4))
	kb := quantMatrix(b, tensor.Q8_0, randVec(r, p.Heads*p.KVRank*p.DNope), p.Heads*p.KVRank, p.DNope)
	vb := quantMatrix(b, tensor.Q8_0, randVec(r, p.Heads*p.DV*p.KVRank), p.Heads*p.DV, p.KVRank)
	for _, depth := range []int{8192, 32768} {
		w := p.KVRank + p.DRope
		lat := randVec(r, depth*w)
		q := randVec(r, p.Heads*(p.DNope+p.DRope))
		sel := make([]int32, 0, p.TopK)
		for _, i := range r.Perm(depth)[:p.TopK] {
			sel = append(sel, int32(i))
		}
		slices.Sort(sel)
		d := NewFastDevice(0, 0, 0)
		kbW, _ := d.Upload(kb)
		vbW, _ := d.Upload(vb)
		kqv := make(buf, p.Heads*p.DV)
		b.Run(fmt.Sprintf("depth%d", depth), func(b *testing.B) {
			for b.Loop() {
				d.AttentionDecode(kqv, buf(q), buf(lat), kbW, vbW, ids(sel), 1, depth-1, p)
			}
		})
	}
}

// BenchmarkIndexerTopK is one decode step's DSA selection at GLM-5's
// indexer shape (32 heads of 128, top_k 2048) over depth cached keys.
func BenchmarkIndexerTopK(b *testing.B) {
	const heads, dim, k = 32, 128, 2048
	r := rand.New(rand.NewPCG(5, 6))
	for _, depth := range []int{8192, 32768} {
		keys := randVec(r, depth*dim)
		q := randVec(r, heads*dim)
		wt := randVec(r, heads)
		sel := make(ids, k)
		d := NewFastDevice(0, 0, 0)
		b.Run(fmt.Sprintf("depth%d", depth), func(b *testing.B) {
			for b.Loop() {
				d.IndexerTopK(sel, buf(q), buf(wt), buf(keys), 1, depth-1, backend.IndexerParams{Heads: heads, Dim: dim, TopK: k})
			}
		})
	}
}

// TestSparseDecodeAllocs: a decode step's DSA selection and sparse
// attention on the fast device allocate nothing once warm, over a float32
// cache and over each cache type.
func TestSparseDecodeAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	p := backend.MLAParams{Heads: 8, DNope: 32, DRope: 32, DV: 32, KVRank: 64, Tau: 0.1, TopK: 16}
	r := rand.New(rand.NewPCG(9, 9))
	kb := quantMatrix(t, tensor.Q8_0, randVec(r, p.Heads*p.KVRank*p.DNope), p.Heads*p.KVRank, p.DNope)
	vb := quantMatrix(t, tensor.Q8_0, randVec(r, p.Heads*p.DV*p.KVRank), p.Heads*p.DV, p.KVRank)
	const depth, ih, id = 100, 4, 64
	for _, typ := range backend.CacheTypes() {
		d := NewFastDevice(0, 2, 0)
		kbW, _ := d.Upload(kb)
		vbW, _ := d.Upload(vb)
		// Device values as the engine holds them: interfaces made once.
		lat, err := d.AllocType(depth*(p.KVRank+p.DRope), typ)
		if err != nil {
			t.Fatal(err)
		}
		keys, _ := d.AllocType(depth*id, typ)
		d.Write(lat, randVec(r, lat.Len()))
		d.Write(keys, randVec(r, keys.Len()))
		var iq, iw, q, kqv backend.Buffer = buf(randVec(r, ih*id)), buf(randVec(r, ih)),
			buf(randVec(r, p.Heads*(p.DNope+p.DRope))), make(buf, p.Heads*p.DV)
		var sel backend.IDs = make(ids, p.TopK)
		step := func() {
			d.IndexerTopK(sel, iq, iw, keys, 1, depth-1, backend.IndexerParams{Heads: ih, Dim: id, TopK: p.TopK})
			d.AttentionDecode(kqv, q, lat, kbW, vbW, sel, 1, depth-1, p)
		}
		step()
		if n := testing.AllocsPerRun(20, step); n != 0 {
			t.Errorf("%s cache: sparse decode step: %v allocations, want 0", typ, n)
		}
	}
}

// TestFastIndexer: the fast device's DSA selection takes the keys of the
// top_k best float64 scores (up to keys within rounding of the k-th), for
// a prefill of several queries and for one query at a time, and the
// prefill selects for each query exactly what the query alone does.
func TestFastIndexer(t *testing.T) {
	const heads, dim, k, T, pos0 = 6, 64, 40, 7, 300
	r := rand.New(rand.NewPCG(10, 11))
	keys, q, w := randVec(r, (pos0+T)*dim), randVec(r, T*heads*dim), randVec(r, T*heads)
	p := backend.IndexerParams{Heads: heads, Dim: dim, TopK: k}
	d := NewFastDevice(0, 2, 0)
	prefill := make(ids, T*k)
	d.IndexerTopK(prefill, buf(q), buf(w), buf(keys), T, pos0, p)
	for tq := range T {
		one := make(ids, k)
		d.IndexerTopK(one, buf(q[tq*heads*dim:(tq+1)*heads*dim]), buf(w[tq*heads:(tq+1)*heads]), buf(keys), 1, pos0+tq, p)
		if got := prefill[tq*k : (tq+1)*k]; !slices.Equal(got, []int32(one)) {
			t.Fatalf("query %d: prefill selects %v, alone %v", tq, got, one)
		}
		n := pos0 + tq + 1
		score := make([]float64, n)
		for s := range n {
			for h := range heads {
				var dot float64
				for i := range dim {
					dot += float64(q[(tq*heads+h)*dim+i]) * float64(keys[s*dim+i])
				}
				score[s] += float64(w[tq*heads+h]) * max(dot, 0)
			}
		}
		sorted := slices.Sorted(slices.Values(score))
		kth := sorted[n-k]
		chosen := map[int32]bool{}
		for _, s := range one {
			chosen[s] = true
		}
		for s := range n {
			near := math.Abs(score[s]-kth) <= 1e-4*(1+math.Abs(kth))
			if !near && chosen[int32(s)] != (score[s] > kth) {
				t.Fatalf("query %d key %d: score %g against the k-th %g, chosen %v", tq, s, score[s], kth, chosen[int32(s)])
			}
		}
	}
}
