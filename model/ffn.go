package model

import (
	"cmp"
	"math"
	"slices"

	"github.com/glmrun/glmrun/backend/cpu"
)

// ffnState holds the buffers of a SwiGLU FFN.
type ffnState struct {
	gate, up []float32 // [n, F]
}

// swiglu computes out = Down · (silu(Gate·y) ⊙ Up·y) for n rows y [n, E].
func (s *Session) swiglu(out, y []float32, n int, f *FFN, st *ffnState) {
	F := f.Gate.Rows
	st.gate = grow(st.gate, n*F)
	st.up = grow(st.up, n*F)
	s.m.cpu.MatMul(st.gate, y, n, f.Gate)
	s.m.cpu.MatMul(st.up, y, n, f.Up)
	cpu.SwiGLU(st.gate, st.gate, st.up)
	s.m.cpu.MatMul(out, st.gate, n, f.Down)
}

// denseFFN is the dense feed-forward network of the leading layers.
func (s *Session) denseFFN(out, y []float32, T int, f *FFN) {
	s.swiglu(out, y, T, f, &s.st.ffn)
}

// moeState holds the routing buffers.
type moeState struct {
	logits, probs, sel []float32 // [T, X]
	topk               []int32   // [T, K]
	weights            []float32 // [T, K]
	slotOut            []float32 // [T, K, E] weighted expert outputs
	rows               []int     // (token, slot) pairs of one expert
	in, out            []float32 // gathered rows [n, E]
	shared             []float32 // [T, E]
	order              []int32
	groupScore         []float32
}

// moe is GLM5-MATH section 7: route each token to ExpertsUsed experts,
// weight their outputs and add the shared experts.
func (s *Session) moe(l int, out, y []float32, T int, w *MoE) {
	c, ms := &s.m.cfg, &s.st.moe
	E, X, K := c.Embd, c.Experts, c.ExpertsUsed
	ms.logits = grow(ms.logits, T*X)
	ms.probs = grow(ms.probs, T*X)
	ms.sel = grow(ms.sel, T*X)
	s.m.cpu.MatMul(ms.logits, y, T, w.Router)
	if cap(ms.topk) < T*K {
		ms.topk = make([]int32, T*K)
	}
	ms.topk = ms.topk[:T*K]
	ms.weights = grow(ms.weights, T*K)

	for t := 0; t < T; t++ {
		z := ms.logits[t*X : (t+1)*X]
		p := ms.probs[t*X : (t+1)*X]
		switch c.Gating {
		case GatingSoftmax:
			copy(p, z)
			cpu.Softmax(p)
		case GatingSigmoid:
			for i, v := range z {
				p[i] = cpu.Sigmoid(v)
			}
		case GatingSqrtSoftplus:
			for i, v := range z {
				p[i] = float32(math.Sqrt(softplus(float64(v))))
			}
		}
		sel := ms.sel[t*X : (t+1)*X]
		copy(sel, p)
		if w.Bias != nil {
			cpu.Add(sel, w.Bias) // selection only
		}
		if c.ExpGroups > 1 {
			s.limitGroups(sel)
		}
		top := ms.topk[t*K : (t+1)*K]
		ms.order = ms.order[:0]
		for i := range X {
			ms.order = append(ms.order, int32(i))
		}
		slices.SortStableFunc(ms.order, func(a, b int32) int { return cmp.Compare(sel[b], sel[a]) })
		copy(top, ms.order[:K])

		wt := ms.weights[t*K : (t+1)*K]
		var sum float32
		for j, e := range top {
			wt[j] = p[e]
			sum += wt[j]
		}
		if c.ExpWeightsNorm {
			sum = max(sum, 6.103515625e-5)
			for j := range wt {
				wt[j] /= sum
			}
		}
		if sc := c.ExpWeightsScale; sc != 0 && sc != 1 {
			cpu.Scale(wt, sc)
		}
	}
	s.emitIDs(l, "ffn_moe_topk", ms.topk, T, K)

	// Run each expert on the (token, slot) pairs routed to it.
	ms.slotOut = grow(ms.slotOut, T*K*E)
	for e := range X {
		ms.rows = ms.rows[:0]
		for i, te := range ms.topk {
			if int(te) == e {
				ms.rows = append(ms.rows, i)
			}
		}
		n := len(ms.rows)
		if n == 0 {
			continue
		}
		ms.in = grow(ms.in, n*E)
		ms.out = grow(ms.out, n*E)
		for r, i := range ms.rows {
			t := i / K
			copy(ms.in[r*E:(r+1)*E], y[t*E:(t+1)*E])
		}
		s.swiglu(ms.out, ms.in, n, &w.Experts[e], &s.st.ffn)
		for r, i := range ms.rows {
			dst := ms.slotOut[i*E : (i+1)*E]
			copy(dst, ms.out[r*E:(r+1)*E])
			cpu.Scale(dst, ms.weights[i])
		}
	}
	// Sum the slots in routing order.
	for t := 0; t < T; t++ {
		o := out[t*E : (t+1)*E]
		copy(o, ms.slotOut[t*K*E:(t*K+1)*E])
		for j := 1; j < K; j++ {
			cpu.Add(o, ms.slotOut[(t*K+j)*E:(t*K+j+1)*E])
		}
	}
	s.emit(l, "ffn_moe_out", out, T, E)
	if w.Shared != nil {
		ms.shared = grow(ms.shared, T*E)
		s.swiglu(ms.shared, y, T, w.Shared, &s.st.ffn)
		s.emit(l, "ffn_shexp", ms.shared, T, E)
		cpu.Add(out[:T*E], ms.shared)
	}
}

// limitGroups keeps the ExpGroupsUse expert groups with the largest sum of
// their two best selection scores and sets the others' scores to −Inf.
func (s *Session) limitGroups(sel []float32) {
	c, ms := &s.m.cfg, &s.st.moe
	G := c.ExpGroups
	per := c.Experts / G
	ms.groupScore = grow(ms.groupScore, G)
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
		ms.groupScore[g] = b1 + b2
	}
	ms.order = ms.order[:0]
	for g := range G {
		ms.order = append(ms.order, int32(g))
	}
	slices.SortStableFunc(ms.order, func(a, b int32) int {
		return cmp.Compare(ms.groupScore[b], ms.groupScore[a])
	})
	for _, g := range ms.order[c.ExpGroupsUse:] {
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
