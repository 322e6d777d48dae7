package cpu

import (
	"fmt"
	"slices"

	"github.com/glmrun/glmrun/backend"
	"github.com/glmrun/glmrun/tensor"
)

// moeChunk is one block of output rows of one local expert's matrix.
type moeChunk struct{ e, r0, r1 int }

// moeTask runs the experts of one MoE call on the fast path in two
// parallel phases: gate and up of every (expert, routed token) pair, then
// down. Each expert's tokens are contiguous (slots sorted by expert), so
// one expert's rows are a matrix product over all its tokens: decode reads
// the selected experts' rows once across the workers, prefill multiplies
// each expert with every token routed to it (tokens grouped by expert).
type moeTask struct {
	ex     *backend.Experts
	start  []int // expert i's sorted slots are [start[i], start[i+1])
	down   bool  // phase
	chunks []moeChunk

	actG, actU, actD []byte // quantized inputs, one row per sorted slot
	ldG, ldU, ldD    int
	g, u, o          []float32 // [slots, F], [slots, F], [slots, E]
	kG, kU, kD       *kernel
}

func (t *moeTask) run(_, i int) {
	ch := t.chunks[i]
	s0, n := t.start[ch.e], t.start[ch.e+1]-t.start[ch.e]
	if t.down {
		w := Mat(t.ex.Down[ch.e])
		gemmRows(t.kD, t.o[s0*w.Rows:], t.actD[s0*t.ldD:], t.ldD, n, w, ch.r0, ch.r1)
		return
	}
	g, u := Mat(t.ex.Gate[ch.e]), Mat(t.ex.Up[ch.e])
	gemmRows(t.kG, t.g[s0*g.Rows:], t.actG[s0*t.ldG:], t.ldG, n, g, ch.r0, ch.r1)
	gemmRows(t.kU, t.u[s0*u.Rows:], t.actU[s0*t.ldU:], t.ldU, n, u, ch.r0, ch.r1)
	// SwiGLU of the chunk's rows, in place of the gate: elementwise, so
	// the same values as over whole rows, and off the caller's serial path.
	F := g.Rows
	for p := s0; p < s0+n; p++ {
		row := t.g[p*F+ch.r0 : p*F+ch.r1]
		swigluFast(row, row, t.u[p*F+ch.r0:p*F+ch.r1])
	}
}

// moeScratch holds the buffers of moeFast, grown on demand.
type moeScratch struct {
	task           moeTask
	slots, pos     []int // sorted slot → routing slot; routing slot → sorted slot (−1: not local)
	start          []int
	chunks         []moeChunk
	xq             []byte // the T input rows quantized
	actG, actU, ad []byte
	g, u, o        []float32
}

func growBytes(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

func growInts(b []int, n int) []int {
	if cap(b) < n {
		return make([]int, n)
	}
	return b[:n]
}

// moeFast is Device.MoE on the fast path (see moeTask); the sum over a
// token's slots is in routing order as in the exact MoE.
func (d *Device) moeFast(out, y []float32, T int, top []int32, wts []float32, e *backend.Experts) {
	c := d.cpu
	c.mu.Lock()
	defer c.mu.Unlock()
	K, E := len(top)/T, len(y)/T
	nExp := len(e.Gate)
	if nExp == 0 {
		clear(out)
		return
	}
	g0, u0, d0 := Mat(e.Gate[0]), Mat(e.Up[0]), Mat(e.Down[0])
	F := g0.Rows
	kG, kU, kD := kernelOf(g0.Type, c.invariant), kernelOf(u0.Type, c.invariant), kernelOf(d0.Type, c.invariant)
	if kG == nil || kU == nil || kD == nil {
		panic(fmt.Sprintf("cpu: MoE: no fast kernel for %s/%s/%s", g0.Type, u0.Type, d0.Type))
	}
	s := &c.moe

	// Sort the local slots by expert (stable: routing order within one),
	// each expert's group padded (with copies of its last slot) to a token
	// count that the tile kernels take faster than the exact one.
	tile := max(kG.tile, kD.tile)
	s.pos = growInts(s.pos, T*K)
	s.slots = s.slots[:0]
	s.start = growInts(s.start, nExp+1)
	real := 0
	for i := range nExp {
		s.start[i] = len(s.slots)
		id := int32(e.First + i)
		for j, te := range top {
			if te == id {
				s.slots = append(s.slots, j)
			}
		}
		if c := len(s.slots) - s.start[i]; c > 0 {
			real += c
			last := s.slots[len(s.slots)-1]
			for range padTokens(c, tile) - c {
				s.slots = append(s.slots, -1-last) // a copy of slot last, not summed
			}
		}
	}
	s.start[nExp] = len(s.slots)
	for j := range s.pos {
		s.pos[j] = -1
	}
	for p, j := range s.slots {
		if j >= 0 {
			s.pos[j] = p
		}
	}
	n := len(s.slots)
	if real == 0 {
		clear(out)
		return
	}

	// Inputs: each token's row quantized once per activation type, then
	// gathered in sorted slot order.
	gather := func(k *kernel, buf *[]byte) ([]byte, int) {
		if k.act == tensor.F32 {
			*buf = growBytes(*buf, n*4*E)
			for p, j := range s.slots {
				t := slotToken(j, K)
				copy((*buf)[p*4*E:(p+1)*4*E], tensor.F32Bytes(y[t*E:(t+1)*E]))
			}
			return *buf, 4 * E
		}
		rb := rowSize(k.act, E)
		s.xq = growBytes(s.xq, T*rb)
		quantizeRows(k.act, s.xq, y, E, rb, 0, T, d.cpu.hook)
		*buf = growBytes(*buf, n*rb)
		for p, j := range s.slots {
			t := slotToken(j, K)
			copy((*buf)[p*rb:(p+1)*rb], s.xq[t*rb:(t+1)*rb])
		}
		return *buf, rb
	}
	t := &s.task
	*t = moeTask{ex: e, start: s.start, kG: kG, kU: kU, kD: kD}
	t.actG, t.ldG = gather(kG, &s.actG)
	if kU.act == kG.act {
		t.actU, t.ldU = t.actG, t.ldG
	} else {
		t.actU, t.ldU = gather(kU, &s.actU)
	}
	s.g, s.u, s.o = grow(s.g, n*F), grow(s.u, n*F), grow(s.o, n*E)
	t.g, t.u, t.o = s.g, s.u, s.o

	// Phase 1: gate and up.
	t.chunks = s.moeChunks(nExp, F, g0.RowBytes+u0.RowBytes, n, c.workers)
	c.pool.do(t, len(t.chunks)) // g = silu(g)·u, chunk by chunk

	// Phase 2: down, on the activations quantized per slot.
	if kD.act == tensor.F32 {
		t.actD, t.ldD = tensor.F32Bytes(s.g), 4*F
	} else {
		rb := rowSize(kD.act, F)
		s.ad = growBytes(s.ad, n*rb)
		c.quantizeTo(s.ad, s.g, n, F, rb, kD.act)
		t.actD, t.ldD = s.ad, rb
	}
	t.down = true
	t.chunks = s.moeChunks(nExp, d0.Rows, d0.RowBytes, n, c.workers)
	c.pool.do(t, len(t.chunks))

	// Weighted sum of each token's local slots in routing order.
	for tk := 0; tk < T; tk++ {
		o := out[tk*E : (tk+1)*E]
		first := true
		for j := tk * K; j < (tk+1)*K; j++ {
			p := s.pos[j]
			if p < 0 {
				continue
			}
			row := s.o[p*E : (p+1)*E]
			if first {
				for i, v := range row {
					o[i] = v * wts[j]
				}
				first = false
			} else {
				for i, v := range row {
					o[i] += float32(v * wts[j]) // rounded, as Scale then Add: never fused
				}
			}
		}
		if first {
			clear(o)
		}
	}
	*t = moeTask{}
}

// moeChunks splits the rows (rows each, of rb weight bytes) of the
// experts that have tokens into blocks for the workers.
func (s *moeScratch) moeChunks(nExp, rows, rb, n, workers int) []moeChunk {
	active := 0
	for i := range nExp {
		if s.start[i+1] > s.start[i] {
			active++
		}
	}
	per := fastRowsPer(rows*active, rb, max(1, n/max(active, 1)), workers)
	per = min(per, rows)
	// An expert with a few tokens past its groups of eight (most of those
	// of a batched decode step have two to four) runs tiles that pack
	// their tokens when a chunk has tensor.GemmPackRows rows or more: its
	// chunks are twice that, and come first, so that the small chunks of
	// the single-token experts even out the workers at the end.
	few := func(i int) bool { return (s.start[i+1]-s.start[i])%8 >= 2 }
	fewPer := max(per, min(rows, 2*tensor.GemmPackRows))
	s.chunks = s.chunks[:0]
	for _, first := range []bool{true, false} {
		for i := range nExp {
			if s.start[i+1] == s.start[i] || few(i) != first {
				continue
			}
			p := per
			if first {
				p = fewPer
			}
			for r := 0; r < rows; r += p {
				s.chunks = append(s.chunks, moeChunk{e: i, r0: r, r1: min(r+p, rows)})
			}
		}
	}
	return slices.Clip(s.chunks)
}

// slotToken returns the token of a sorted slot entry: routing slot j, or
// −1−j for a padding copy of slot j.
func slotToken(j, K int) int {
	if j < 0 {
		j = -1 - j
	}
	return j / K
}

// padTokens returns the number of token rows to multiply an expert with
// when n tokens are routed to it, for a kernel whose largest tile is tile
// tokens: n, or a little more where the padded count runs in tiles faster
// than n does with single rows left over (with the AVX-512 Q4_K and Q6_K
// kernels 3 tokens take longer than 4, and 6 or 7 longer than 8).
func padTokens(n, tile int) int {
	if tile < 4 {
		return n
	}
	switch r := n % 8; {
	case tile >= 8 && r >= 6:
		return n + 8 - r
	case r == 3 || r == 7:
		return n + 1
	}
	return n
}
