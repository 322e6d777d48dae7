package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/glmrun/glmrun/backend"
	"github.com/glmrun/glmrun/tensor"
)

// TestConvertRow: the vector conversions of cache rows give
// tensor.Dequantize's values bit for bit (NaN for NaN), over random bit
// patterns of every kind of value.
func TestConvertRow(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 13))
	for _, typ := range []tensor.Type{tensor.F16, tensor.BF16, tensor.Q8_0} {
		for _, n := range []int{32, 64, 576, 40} {
			size, err := typ.RowSize(int64(n))
			if err != nil {
				continue // 40 values are not Q8_0 blocks
			}
			src := make([]byte, size)
			for i := range src {
				src[i] = byte(r.Uint32())
			}
			if typ == tensor.Q8_0 { // finite scales, some subnormal
				for b := 0; b < len(src); b += 34 {
					binary.LittleEndian.PutUint16(src[b:], uint16(r.IntN(0x7c00)))
				}
			}
			got, want := make([]float32, n), make([]float32, n)
			convertRow(got, typ, src)
			if err := tensor.Dequantize(typ, src, want); err != nil {
				t.Fatal(err)
			}
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
					t.Fatalf("%s n=%d: value %d: %g (%#x), want %g (%#x)", typ, n, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
				}
			}
		}
	}
}

// TestCacheTypes: attention and the DSA indexer over a latent (and keys)
// stored as F16, BF16 or Q8_0 give, on both devices, in both forms, with
// and without a selection, exactly what they give over a float32 buffer
// holding the same (converted) values: the cache types change what is
// stored, never the arithmetic.
func TestCacheTypes(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 15))
	// Rows of 96 values: three Q8_0 blocks.
	p := backend.MLAParams{Heads: 8, DNope: 32, DRope: 32, DV: 32, KVRank: 64, Tau: 0.02, TopK: 40}
	kb := quantMatrix(t, tensor.Q8_0, randVec(r, p.Heads*p.KVRank*p.DNope), p.Heads*p.KVRank, p.DNope)
	vb := quantMatrix(t, tensor.Q8_0, randVec(r, p.Heads*p.DV*p.KVRank), p.Heads*p.DV, p.KVRank)
	const T, pos0, ih, id = 5, 150, 4, 64
	w := p.KVRank + p.DRope
	q := randVec(r, T*p.Heads*(p.DNope+p.DRope))
	latVals, keyVals := randVec(r, (pos0+T)*w), randVec(r, (pos0+T)*id)
	iq, iw := randVec(r, T*ih*id), randVec(r, T*ih)
	ip := backend.IndexerParams{Heads: ih, Dim: id, TopK: p.TopK}
	for _, typ := range backend.CacheTypes()[1:] {
		for _, fast := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/fast=%v", typ, fast), func(t *testing.T) {
				d := NewDevice(0, 2, 0)
				if fast {
					d = NewFastDevice(0, 2, 0)
				}
				lat, err := d.AllocType(len(latVals), typ)
				if err != nil {
					t.Fatal(err)
				}
				keys, _ := d.AllocType(len(keyVals), typ)
				// The rows go in the way the attention writes them: one
				// position at a time through Copy.
				for pos := range pos0 + T {
					d.Copy(lat.Slice(pos*w, w), buf(latVals[pos*w:(pos+1)*w]))
					d.Copy(keys.Slice(pos*id, id), buf(keyVals[pos*id:(pos+1)*id]))
				}
				latF, keysF := make(buf, len(latVals)), make(buf, len(keyVals))
				d.Read(latF, lat)
				d.Read(keysF, keys)
				if typ == tensor.F16 {
					if want := tensor.F16ToF32(tensor.F32ToF16(latVals[7])); latF[7] != want {
						t.Fatalf("value 7 reads back as %g, want %g", latF[7], want)
					}
				}
				kbW, _ := d.Upload(kb)
				vbW, _ := d.Upload(vb)
				selT, selF := make(ids, T*p.TopK), make(ids, T*p.TopK)
				d.IndexerTopK(selT, buf(iq), buf(iw), keys, T, pos0, ip)
				d.IndexerTopK(selF, buf(iq), buf(iw), keysF, T, pos0, ip)
				if !slices.Equal(selT, selF) {
					t.Fatalf("indexer over %s keys selects otherwise than over their float32 values", typ)
				}
				one, oneF := make(ids, p.TopK), make(ids, p.TopK)
				d.IndexerTopK(one, buf(iq[:ih*id]), buf(iw[:ih]), keys, 1, pos0, ip)
				d.IndexerTopK(oneF, buf(iq[:ih*id]), buf(iw[:ih]), keysF, 1, pos0, ip)
				if !slices.Equal(one, oneF) {
					t.Fatalf("indexer (one query) over %s keys selects otherwise than over their float32 values", typ)
				}
				for _, s := range []backend.IDs{nil, selT} {
					for _, form := range []string{"prefill", "decode"} {
						run := d.AttentionDecode
						if form == "prefill" {
							run = d.AttentionPrefill
						}
						got, want := make(buf, T*p.Heads*p.DV), make(buf, T*p.Heads*p.DV)
						run(got, buf(q), lat, kbW, vbW, s, T, pos0, p)
						run(want, buf(q), latF, kbW, vbW, s, T, pos0, p)
						if !slices.Equal(got, want) {
							t.Fatalf("%s, selection %v: attention over the %s latent differs from over its float32 values", form, s != nil, typ)
						}
						got1, want1 := make(buf, p.Heads*p.DV), make(buf, p.Heads*p.DV)
						dq := p.Heads * (p.DNope + p.DRope)
						var s1 backend.IDs
						if s != nil {
							s1 = selT[:p.TopK]
						}
						run(got1, buf(q[:dq]), lat, kbW, vbW, s1, 1, pos0, p)
						run(want1, buf(q[:dq]), latF, kbW, vbW, s1, 1, pos0, p)
						if !slices.Equal(got1, want1) {
							t.Fatalf("%s, selection %v, one query: attention over the %s latent differs", form, s != nil, typ)
						}
					}
				}
				used := d.Used()
				d.Free(lat)
				d.Free(keys)
				size, _ := typ.RowSize(int64(len(latVals) + len(keyVals)))
				if d.Used() != used-size {
					t.Errorf("Free released %d bytes, want %d", used-d.Used(), size)
				}
			})
		}
	}
}

// TestAllocTypeErrors: a type that is no cache type, or a size that is
// not whole blocks, is an error naming it.
func TestAllocTypeErrors(t *testing.T) {
	d := NewDevice(0, 1, 0)
	if _, err := d.AllocType(64, tensor.Q4_K); err == nil {
		t.Error("AllocType(Q4_K): no error")
	}
	if _, err := d.AllocType(40, tensor.Q8_0); err == nil {
		t.Error("AllocType(40 values of Q8_0): no error")
	}
}

// BenchmarkConvertRow converts one GLM-5 latent row (576 values) from each
// cache type to float32.
func BenchmarkConvertRow(b *testing.B) {
	for _, typ := range backend.CacheTypes()[1:] {
		size, _ := typ.RowSize(576)
		src := make([]byte, size)
		dst := make([]float32, 576)
		b.Run(typ.String(), func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				convertRow(dst, typ, src)
			}
		})
	}
}
