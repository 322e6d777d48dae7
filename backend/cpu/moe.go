package cpu

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/glmrun/glmrun/backend"
)

// RouterTopK is the routing of docs/MATH.md section 7: gating
// probabilities, the selection-only bias, the group limit, the top K (ties:
// lower id first), then the weights, normalized and scaled as r says.
func (d *Device) RouterTopK(idsB backend.IDs, wB, logitsB backend.Buffer, T int, r *backend.Router) {
	top, wts, logits := Int32(idsB), F32(wB), F32(logitsB)
	X, K := r.Experts, r.Used
	if len(top) < T*K || len(wts) < T*K || len(logits) < T*X {
		panic(fmt.Sprintf("cpu: RouterTopK: bad shapes: ids %d, weights %d, logits %d for %d tokens, %d of %d experts",
			len(top), len(wts), len(logits), T, K, X))
	}
	s := d.getScratch()
	defer d.putScratch(s)
	s.probs = grow(s.probs, X)
	s.sel = grow(s.sel, X)
	bias := F32(r.Bias)
	for t := 0; t < T; t++ {
		z := logits[t*X : (t+1)*X]
		p := s.probs
		switch r.Gating {
		case backend.GatingSoftmax:
			copy(p, z)
			Softmax(p)
		case backend.GatingSigmoid:
			for i, v := range z {
				p[i] = Sigmoid(v)
			}
		case backend.GatingSqrtSoftplus:
			for i, v := range z {
				p[i] = float32(math.Sqrt(softplus(float64(v))))
			}
		default:
			panic(fmt.Sprintf("cpu: RouterTopK: gating %d", r.Gating))
		}
		sel := s.sel
		copy(sel, p)
		if bias != nil {
			Add(sel, bias) // selection only
		}
		if r.Groups > 1 {
			s.limitGroups(sel, r)
		}
		s.order = s.order[:0]
		for i := range X {
			s.order = append(s.order, int32(i))
		}
		slices.SortStableFunc(s.order, func(a, b int32) int { return cmp.Compare(sel[b], sel[a]) })
		tk := top[t*K : (t+1)*K]
		copy(tk, s.order[:K])

		wt := wts[t*K : (t+1)*K]
		var sum float32
		for j, e := range tk {
			wt[j] = p[e]
			sum += wt[j]
		}
		if r.NormWeights {
			sum = max(sum, 6.103515625e-5)
			for j := range wt {
				wt[j] /= sum
			}
		}
		if sc := r.Scale; sc != 0 && sc != 1 {
			Scale(wt, sc)
		}
	}
}

// limitGroups keeps the GroupsUse expert groups with the largest sum of
// their two best selection scores and sets the others' scores to −Inf.
func (s *scratch) limitGroups(sel []float32, r *backend.Router) {
	G := r.Groups
	per := r.Experts / G
	s.groupScore = grow(s.groupScore, G)
	for g := range G {
		grp := sel[g*per : (g+1)*per]
		b1, b2 := float32(math.Inf(-1)), float32(math.Inf(-1))
		for _, v := range grp {
			if v > b1 {
				b1, b2 = v, b1
			} else if v > b2 {
				b2 = v
			}
		}
		if per == 1 {
			b2 = 0
		}
		s.groupScore[g] = b1 + b2
	}
	s.order = s.order[:0]
	for g := range G {
		s.order = append(s.order, int32(g))
	}
	slices.SortStableFunc(s.order, func(a, b int32) int {
		return cmp.Compare(s.groupScore[b], s.groupScore[a])
	})
	for _, g := range s.order[r.GroupsUse:] {
		for i := int(g) * per; i < int(g+1)*per; i++ {
			sel[i] = float32(math.Inf(-1))
		}
	}
}

// softplus returns log(1 + e^x) without overflow.
func softplus(x float64) float64 {
	if x > 20 {
		return x
	}
	return math.Log1p(math.Exp(x))
}

// MoE runs each local expert on the (token, slot) pairs routed to it and
// sums each token's local slots in routing order.
func (d *Device) MoE(dstB, xB backend.Buffer, T int, idsB backend.IDs, wB backend.Buffer, e *backend.Experts) {
	out, y, top, wts := F32(dstB), F32(xB), Int32(idsB), F32(wB)
	if T <= 0 || len(top)%T != 0 || len(wts) != len(top) || len(y)%T != 0 || len(out) != len(y) {
		panic(fmt.Sprintf("cpu: MoE: bad shapes: dst %d, x %d, ids %d, weights %d for %d tokens", len(out), len(y), len(top), len(wts), T))
	}
	if d.cpu.fast {
		d.moeFast(out, y, T, top, wts, e)
		return
	}
	K, E := len(top)/T, len(y)/T
	s := d.getScratch()
	defer d.putScratch(s)
	s.slotOut = grow(s.slotOut, T*K*E)
	if cap(s.local) < T*K {
		s.local = make([]bool, T*K)
	}
	s.local = s.local[:T*K]
	clear(s.local)
	for i := range e.Gate {
		id := int32(e.First + i)
		s.slots = s.slots[:0]
		for j, te := range top {
			if te == id {
				s.slots = append(s.slots, j)
			}
		}
		n := len(s.slots)
		if n == 0 {
			continue
		}
		s.in = grow(s.in, n*E)
		s.out = grow(s.out, n*E)
		for r, j := range s.slots {
			t := j / K
			copy(s.in[r*E:(r+1)*E], y[t*E:(t+1)*E])
		}
		d.swiglu(s.out, s.in, n, e.Gate[i], e.Up[i], e.Down[i])
		for r, j := range s.slots {
			dst := s.slotOut[j*E : (j+1)*E]
			copy(dst, s.out[r*E:(r+1)*E])
			Scale(dst, wts[j])
			s.local[j] = true
		}
	}
	// Sum the local slots in routing order.
	for t := 0; t < T; t++ {
		o := out[t*E : (t+1)*E]
		first := true
		for j := 0; j < K; j++ {
			if !s.local[t*K+j] {
				continue
			}
			slot := s.slotOut[(t*K+j)*E : (t*K+j+1)*E]
			if first {
				copy(o, slot)
				first = false
			} else {
				Add(o, slot)
			}
		}
		if first {
			clear(o)
		}
	}
}

// swiglu computes out = Down · (silu(Gate·y) ⊙ Up·y) for n rows y.
func (d *Device) swiglu(out, y []float32, n int, gate, up, down backend.Weight) {
	g, u := Mat(gate), Mat(up)
	F := g.Rows
	s := d.getScratch()
	defer d.putScratch(s)
	s.gate = grow(s.gate, n*F)
	s.up = grow(s.up, n*F)
	d.cpu.MatMul(s.gate, y, n, g)
	d.cpu.MatMul(s.up, y, n, u)
	SwiGLU(s.gate, s.gate, s.up)
	d.cpu.MatMul(out, s.gate, n, Mat(down))
}
