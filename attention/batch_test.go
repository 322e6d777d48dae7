package attention

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/backend"
	"github.com/glmrun/glmrun/backend/cpu"
	"github.com/glmrun/glmrun/tensor"
)

// plainDevice hides the CPU device's AttentionDecodeBatch, so that
// DecodeBatch takes its per-sequence fallback.
type plainDevice struct{ backend.Device }

// TestDecodeBatch: one batched decode step over sequences at different
// positions gives bit for bit each sequence's Forward output for its token
// alone, and leaves the same cache rows, with exact and fast products,
// with and without the device's batched attention, dense and with DSA
// selections (some sequences past top_k, some not), on all heads or on a
// device's share of them (groups of four heads and remainders).
func TestDecodeBatch(t *testing.T) {
	prompts := []int{3, 0, 7, 1, 5, 63, 70} // 63, 70: more than one key tile (64)
	const steps = 3
	for _, tc := range []struct {
		topK, heads int
		fast, plain bool
	}{
		{0, 6, true, false},
		{4, 6, true, false},
		{4, 5, false, false},
		{0, 4, false, false},
		{0, 4, true, false},
		{4, 4, false, false},
		{4, 4, true, false},
		{4, 2, true, false},
		{4, 4, false, true},
		{0, 2, true, true},
	} {
		t.Run(fmt.Sprintf("topK=%d/heads=%d/fast=%v/plain=%v", tc.topK, tc.heads, tc.fast, tc.plain), func(t *testing.T) {
			ly := wideLayer(11, tc.topK, 6)
			E := ly.c.Embd
			var dev backend.Device = cpu.NewDevice(0, 2, 0)
			if tc.fast {
				dev = cpu.NewFastDevice(0, 2, 0)
			}
			if tc.plain {
				dev = plainDevice{dev}
			}
			sh, err := ly.w.Upload(dev, ly.c, ly.c.Heads-tc.heads, tc.heads)
			if err != nil {
				t.Fatal(err)
			}
			a := &MLA{Cfg: ly.c, W: sh, Dev: dev}
			idx := []int{0}
			if tc.topK > 0 {
				idx[0] = ly.c.IndexDim
			}
			r := rand.New(rand.NewPCG(5, 5))
			n := len(prompts)
			batch, alone := make([]Seq, n), make([]*LatentCache, n)
			sBatch, sAlone := NewScratch(dev), NewScratch(dev)
			buf := func(v []float32) backend.Buffer {
				b, err := dev.Alloc(len(v))
				if err != nil {
					t.Fatal(err)
				}
				dev.Write(b, v)
				return b
			}
			for i, p := range prompts {
				for _, c := range []**LatentCache{&batch[i].Cache, &alone[i]} {
					if *c, err = NewLatentCache(dev, 1, 80, ly.c.KVRank, ly.c.DRope, idx, tensor.F32); err != nil {
						t.Fatal(err)
					}
				}
				batch[i].Pos = p
				if p == 0 {
					continue
				}
				x := buf(randVec(r, p*E, 0, 1))
				out := buf(make([]float32, p*E))
				for _, c := range []*LatentCache{batch[i].Cache, alone[i]} {
					if err := a.Forward(out, x, p, 0, c, sAlone, Prefill); err != nil {
						t.Fatal(err)
					}
				}
			}
			got, want := make([]float32, n*E), make([]float32, E)
			for step := range steps {
				xs := randVec(r, n*E, 0, 1)
				x, out := buf(xs), buf(make([]float32, n*E))
				if err := a.DecodeBatch(out, x, batch, sBatch); err != nil {
					t.Fatal(err)
				}
				dev.Read(got, out)
				for i := range batch {
					xi, oi := buf(xs[i*E:(i+1)*E]), buf(make([]float32, E))
					if err := a.Forward(oi, xi, 1, batch[i].Pos, alone[i], sAlone, Decode); err != nil {
						t.Fatal(err)
					}
					dev.Read(want, oi)
					for j := range want {
						if math.Float32bits(got[i*E+j]) != math.Float32bits(want[j]) {
							t.Fatalf("step %d sequence %d (position %d) value %d: batch %g, alone %g",
								step, i, batch[i].Pos, j, got[i*E+j], want[j])
						}
					}
					nKV := batch[i].Pos + 1
					for _, v := range [][2]backend.Buffer{
						{batch[i].Cache.Latent(0, nKV), alone[i].Latent(0, nKV)},
						{batch[i].Cache.IndexKeys(0, nKV), alone[i].IndexKeys(0, nKV)},
					} {
						if v[0] == nil {
							continue
						}
						b, w := make([]float32, v[0].Len()), make([]float32, v[1].Len())
						dev.Read(b, v[0])
						dev.Read(w, v[1])
						if maxDiff(b, w) != 0 || len(b) != len(w) {
							t.Fatalf("step %d sequence %d: caches differ", step, i)
						}
					}
					batch[i].Pos++
				}
			}
			if err := dev.Sync(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// wideLayer is testLayer with heads heads (more than four: a group of
// four heads and a remainder in the CPU's batched attention).
func wideLayer(seed uint64, topK, heads int) layer {
	ly := testLayer(seed, topK)
	c, w := ly.c, ly.w
	r := rand.New(rand.NewPCG(seed, 8))
	c.Heads = heads
	w.QB = randMatrix(r, "q_b", heads*(c.DNope+c.DRope), c.QRank)
	w.KB = randMatrix(r, "k_b", heads*c.KVRank, c.DNope)
	w.VB = randMatrix(r, "v_b", heads*c.DV, c.KVRank)
	w.Out = randMatrix(r, "out", c.Embd, heads*c.DV)
	return ly
}

// TestDecodeBatchFull: a sequence whose cache has no room left fails the
// step with an error naming it.
func TestDecodeBatchFull(t *testing.T) {
	ly := testLayer(2, 0)
	dev := cpu.NewDevice(0, 1, 0)
	sh, err := ly.w.Upload(dev, ly.c, 0, ly.c.Heads)
	if err != nil {
		t.Fatal(err)
	}
	a := &MLA{Cfg: ly.c, W: sh, Dev: dev}
	seqs := make([]Seq, 2)
	for i := range seqs {
		if seqs[i].Cache, err = NewLatentCache(dev, 1, 2, ly.c.KVRank, ly.c.DRope, nil, tensor.F32); err != nil {
			t.Fatal(err)
		}
	}
	seqs[1].Pos = 2
	x, _ := dev.Alloc(2 * ly.c.Embd)
	out, _ := dev.Alloc(2 * ly.c.Embd)
	err = a.DecodeBatch(out, x, seqs, NewScratch(dev))
	if !errors.Is(err, ErrContextFull) || !strings.Contains(err.Error(), "sequence 1") {
		t.Errorf("err = %v, want one naming sequence 1 and the cache size", err)
	}
}
