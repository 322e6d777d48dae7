package model

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"sort"
	"sync"
	"testing"

	"github.com/glmrun/glmrun/backend/cpu"
	"github.com/glmrun/glmrun/tensor"
)

// Activation roundings near ties: why glm5-dense P2 is not within 1e-2 of
// llama.cpp's quantized references, and the proof that the fast path is
// otherwise ggml's quantized path.
//
// An activation x is quantized to q = round(x·id). When x·id lies within
// float noise of k+½ (a few 1e-6 relative), the side it rounds to depends
// on the float summation order of everything upstream (attention sums,
// norms, SiLU), which differs between any two engines, and between our
// own assembly and pure-Go kernels. One flipped int8 moves this random
// model's logits by 0.01–0.1. P2 (40 tokens) meets a few such near-ties;
// P1 (20 tokens) meets none that matter.
//
// llamaTies lists, per model, the near-ties where llama.cpp rounded the
// other way from at least one of our kernel tiers (AVX-512, AVX2, pure
// Go), found by the search below (go test ./model -run TestFastDenseTies
// -tiesearch -v, on each tier). With just those roundings forced to
// llama.cpp's side every position of P1 and P2 matches its references to
// ~1e-6, in prefill and decode: everything else — activation
// quantization, integer block products, scales — is exactly ggml's.
var llamaTies = map[string][]nearTie{
	"glm5-dense.Q8_0": {
		{tensor.Q8_0, 256, 2, 4, 5},
		{tensor.Q8_0, 256, 86, -39, -38},
		{tensor.Q8_0, 256, 120, 101, 101},
		{tensor.Q8_0, 256, 245, -27, -26},
		{tensor.Q8_0, 256, 250, 42, 43},
		{tensor.Q8_0, 256, 250, 83, 83},
		{tensor.Q8_0, 256, -3, 8026, 8026}, // f16 scale of block 2
		{tensor.Q8_0, 256, -4, 8349, 8350}, // f16 scale of block 3
		{tensor.Q8_0, 512, 229, -33, -33},
		{tensor.Q8_0, 512, 438, -46, -45},
		{tensor.Q8_0, 512, -12, 9202, 9203}, // f16 scale of block 11
	},
	"glm5-dense.Q4_K_M": {
		{tensor.Q8_K, 256, 6, -9, -9},
		{tensor.Q8_K, 256, 46, -55, -55},
		{tensor.Q8_K, 256, 109, 87, 88},
		{tensor.Q8_K, 256, 138, -46, -46},
	},
}

var tieSearch = flag.Bool("tiesearch", false, "TestFastDenseTies: search the near-tie roundings that make glm5-dense match llama.cpp and print them")

// nearTie is one activation rounding within float noise of a tie, keyed by
// what identifies it in a row: the activation type, the row length, the
// element (or −1−block for a Q8_0 block's f16 scale), and k, the integer
// below x·id (or the f16 scale rounded down); want is llama.cpp's value
// (the int8 quant, or the f16 bits).
type nearTie struct {
	t          tensor.Type
	cols, elem int
	k, want    int
}

type tieKey struct {
	t          tensor.Type
	cols, elem int
	k          int
}

// tieEps is how close to ½ the fractional part of x·id must be for a
// rounding to count as a near-tie (in quant units; float noise is ≲1e-4
// at |x·id| ≤ 127). A Q8_0 scale counts when d is within 32 float32 ulps
// of the midpoint between two f16 values.
const tieEps = 3e-4

// tieCand is a near-tie met while recording.
type tieCand struct {
	key      tieKey
	xid      float64
	cur, alt int
	dist     float64
}

// tieForcer is a cpu.ActivationHook that sets the listed near-ties to
// llama.cpp's values and can record the near-ties it meets.
type tieForcer struct {
	mu     sync.Mutex
	force  map[tieKey]int
	hits   map[tieKey]float64 // the largest tie distance seen per forced key
	record bool
	cands  []tieCand
}

func newTieForcer(ties []nearTie) *tieForcer {
	f := &tieForcer{force: map[tieKey]int{}, hits: map[tieKey]float64{}}
	for _, t := range ties {
		f.force[tieKey{t.t, t.cols, t.elem, t.k}] = t.want
	}
	return f
}

func (f *tieForcer) hook(t tensor.Type, x []float32, q []byte) {
	switch t {
	case tensor.Q8_0: // d = amax/127 as f16, q = round(x·(1/d))
		for b := range len(x) / 32 {
			blk := q[b*34 : b*34+34]
			var amax float32
			for _, v := range x[b*32 : b*32+32] {
				amax = max(amax, float32(math.Abs(float64(v))))
			}
			d := amax / 127
			if d == 0 {
				continue
			}
			id := 1 / d
			for j := range 32 {
				xid := float64(x[b*32+j] * id)
				k := math.Floor(xid)
				if dist := math.Abs(xid - k - 0.5); dist < tieEps {
					f.visit(tieKey{t, len(x), b*32 + j, int(k)}, xid, dist, int(int8(blk[2+j])), int(k), int(k)+1,
						func(v int) { blk[2+j] = byte(int8(v)) })
				}
			}
			bits := math.Float32bits(d)
			if low := int(bits & 0x1fff); low > 0x1000-32 && low < 0x1000+32 {
				lo := int(tensor.F32ToF16(math.Float32frombits(bits &^ 0x1fff)))
				f.visit(tieKey{t, len(x), -1 - b, lo}, float64(d), math.Abs(float64(low-0x1000)),
					int(binary.LittleEndian.Uint16(blk)), lo, lo+1,
					func(v int) { binary.LittleEndian.PutUint16(blk, uint16(v)) })
			}
		}
	case tensor.Q8_K: // iscale = −127/max (signed), q = min(127, round(iscale·x)), bsums per 16
		for b := range len(x) / 256 {
			blk := q[b*292 : b*292+292]
			xs := x[b*256 : b*256+256]
			var amax, vmax float32
			for _, v := range xs {
				if a := float32(math.Abs(float64(v))); a > amax {
					amax, vmax = a, v
				}
			}
			if amax == 0 {
				continue
			}
			iscale := -127 / vmax
			for j := range 256 {
				xid := float64(iscale * xs[j])
				k := math.Floor(xid)
				if dist := math.Abs(xid - k - 0.5); dist < tieEps {
					f.visit(tieKey{t, len(x), b*256 + j, int(k)}, xid, dist, int(int8(blk[4+j])), int(k), min(int(k)+1, 127),
						func(v int) {
							off := 4 + 256 + 2*(j/16)
							s := int16(binary.LittleEndian.Uint16(blk[off:]))
							binary.LittleEndian.PutUint16(blk[off:], uint16(s+int16(v-int(int8(blk[4+j])))))
							blk[4+j] = byte(int8(v))
						})
				}
			}
		}
	}
}

func (f *tieForcer) visit(k tieKey, xid, dist float64, cur, lo, hi int, set func(int)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if v, ok := f.force[k]; ok {
		set(v)
		f.hits[k] = max(f.hits[k], dist)
		return
	}
	if f.record {
		alt := lo
		if cur == lo {
			alt = hi
		}
		f.cands = append(f.cands, tieCand{k, xid, cur, alt, dist})
	}
}

// install sets f as the activation hook of m's CPU devices.
func (f *tieForcer) install(t *testing.T, m *Model) {
	t.Helper()
	for _, d := range m.devs {
		c, ok := d.(*cpu.Device)
		if !ok {
			t.Fatalf("device %s is not a CPU", d.Name())
		}
		c.CPU().SetActivationHook(f.hook)
		t.Cleanup(func() { c.CPU().SetActivationHook(nil) })
	}
}

// TestFastDenseTies: with the near-ties of llamaTies forced to
// llama.cpp's side, the fast path matches glm5-dense's quantized
// one-token-at-a-time references at every position of P1 and P2 within
// 1e-4 (measured ~1e-6), in prefill and decode; each forced rounding lies
// within 1e-4 of a tie (a scale within 32 ulps of an f16 midpoint). It
// runs the row-major kernels (Options.NoRepack).
func TestFastDenseTies(t *testing.T) {
	const tol = 1e-4
	for _, name := range []string{"glm5-dense.Q8_0", "glm5-dense.Q4_K_M"} {
		t.Run(name, func(t *testing.T) {
			// The row-major kernels: they add in ggml's order, which is
			// what this test proves; the repacked ones round otherwise and
			// meet other near-ties.
			m, err := Load(modelPath(t, name), Options{Fast: true, Threads: 2, NoRepack: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			f := newTieForcer(llamaTies[name])
			f.install(t, m)
			if *tieSearch {
				searchTies(t, m, f, name)
				return
			}
			for _, p := range []string{"P1", "P2"} {
				d := denseSeqDiffs(t, m, name, p)
				if d.preMax > tol || d.decMax > tol {
					t.Errorf("%s with llama.cpp's near-tie roundings: prefill max abs %.3g, decode %.3g; limit %g", p, d.preMax, d.decMax, tol)
				}
				t.Logf("%s with llama.cpp's near-tie roundings: prefill max abs %.2g, decode %.2g", p, d.preMax, d.decMax)
			}
			for k, dist := range f.hits {
				if lim := 1e-4; k.elem >= 0 && dist > lim || k.elem < 0 && dist > 32 {
					t.Errorf("forced rounding %+v is %.3g from its tie: not a near-tie", k, dist)
				}
			}
			t.Logf("%d of %d listed near-ties met on this CPU's kernels", len(f.hits), len(llamaTies[name]))
		})
	}
}

// searchTies finds, position by position in the decode path, the fewest
// near-tie roundings to flip so that each position's logits match the
// reference within 1e-4, and prints them in llamaTies' format. Greedy:
// at a mismatching position it flips the near-tie of that token that
// helps most, up to three times.
func searchTies(t *testing.T, m *Model, f *tieForcer, name string) {
	const tol = 1e-4
	for _, p := range []string{"P1", "P2"} {
		ref, ok := readRef(t, name+"."+p+".seq")
		if !ok {
			t.Fatalf("no ref %s.%s.seq", name, p)
		}
		for pos := range ref.Prompt {
			want := ref.PromptLogits[pos].Logits
			d := maxAbsDiff(decodeLast(t, m, f, ref.Prompt[:pos+1]), want)
			for try := 0; try < 3 && d > tol; try++ {
				cands := append([]tieCand(nil), f.cands...)
				sort.Slice(cands, func(i, j int) bool { return cands[i].dist < cands[j].dist })
				best, bestD := -1, d
				for i, c := range cands[:min(len(cands), 40)] {
					f.force[c.key] = c.alt
					if dd := maxAbsDiff(decodeLast(t, m, f, ref.Prompt[:pos+1]), want); dd < bestD {
						best, bestD = i, dd
					}
					delete(f.force, c.key)
				}
				if best < 0 {
					break
				}
				c := cands[best]
				f.force[c.key] = c.alt
				t.Logf("%s position %d: x·id %.7f rounds to %d in llama.cpp (here %d): max abs %.3g -> %.3g", p, pos, c.xid, c.alt, c.cur, d, bestD)
				d = maxAbsDiff(decodeLast(t, m, f, ref.Prompt[:pos+1]), want)
			}
			if d > tol {
				t.Errorf("%s position %d: no near-tie flips found, max abs %.3g", p, pos, d)
			}
		}
	}
	keys := make([]tieKey, 0, len(f.force))
	for k := range f.force {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		return fmt.Sprint(a.t, a.cols, a.elem, a.k) < fmt.Sprint(b.t, b.cols, b.elem, b.k)
	})
	for _, k := range keys {
		fmt.Printf("\t\t{tensor.%s, %d, %d, %d, %d},\n", k.t, k.cols, k.elem, k.k, f.force[k])
	}
}

// decodeLast decodes tokens one at a time and returns the last logits,
// recording the near-ties met by the last token in f.cands.
func decodeLast(t *testing.T, m *Model, f *tieForcer, tokens []int32) []float32 {
	t.Helper()
	s, err := m.NewSession(SessionOptions{ContextSize: len(tokens)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var row []float32
	for i, tok := range tokens {
		f.mu.Lock()
		f.record = i == len(tokens)-1
		f.cands = f.cands[:0]
		f.mu.Unlock()
		if row, err = s.Decode(tok); err != nil {
			t.Fatal(err)
		}
	}
	f.record = false
	return row
}
