package model

import (
	"errors"
	"fmt"

	"github.com/glmrun/glmrun/attention"
	"github.com/glmrun/glmrun/backend"
)

// step holds one device's activation views for one forward call.
type step struct {
	h, x, attnOut, ffnOut backend.Buffer // [T, E]
}

// stepBuffers fills steps (one per device) with the session's activation
// buffers for T rows.
func (s *Session) stepBuffers(steps []step, T int) ([]step, error) {
	E := s.m.cfg.Embd
	var g getter
	for d, ss := range s.shards {
		steps[d] = step{h: g.get(&ss.h, T*E), x: g.get(&ss.x, T*E), attnOut: g.get(&ss.attnOut, T*E), ffnOut: g.get(&ss.ffnOut, T*E)}
	}
	return steps, g.err
}

// getter takes scratch buffers, keeping the first error.
type getter struct{ err error }

func (g *getter) get(s *backend.Scratch, n int) backend.Buffer {
	if g.err != nil {
		return nil
	}
	b, err := s.Get(n)
	if err != nil {
		g.err = fmt.Errorf("model: %w", err)
	}
	return b
}

func (g *getter) ids(s *backend.ScratchIDs, n int) backend.IDs {
	if g.err != nil {
		return nil
	}
	b, err := s.Get(n)
	if err != nil {
		g.err = fmt.Errorf("model: %w", err)
	}
	return b
}

// forward runs the trunk for tokens at the current position and returns
// the logits [T, V] (a new slice owned by the caller). Every device runs
// the replicated parts on the same inputs and its shard of the rest; the
// partial sums of attn_output and of the FFN are added by an all-reduce,
// after which the residual stream is identical everywhere. Operations are
// issued device by device, phase by phase; the devices run them
// asynchronously, and one Sync per device ends the step.
//
// The logits go to out when it holds T·V values (a decode step then
// allocates nothing), else to a new slice. With last set (and no hook)
// only the last token's row goes through the final norm and output head,
// and only it is returned.
func (s *Session) forward(tokens []int32, form attention.Form, out []float32, last bool) ([]float32, error) {
	if err := s.check(tokens); err != nil {
		return nil, err
	}
	if s.shards == nil {
		return nil, errors.New("model: the session is closed")
	}
	c := &s.m.cfg
	T, E, pos0 := len(tokens), c.Embd, s.pos
	steps, err := s.stepBuffers(s.steps, T)
	if err != nil {
		return nil, err
	}
	var g getter
	sh0, st0 := s.shards[0], &steps[0]
	all := func(f func(st *step) backend.Buffer) []backend.Buffer {
		for d := range steps {
			s.parts[d] = f(&steps[d])
		}
		return s.parts
	}

	// Token embedding on device 0, broadcast to the others.
	sh0.dev.GetRows(st0.h, sh0.sh.embd, tokens)
	if len(steps) > 1 {
		if err := s.m.coll.Broadcast(all(func(st *step) backend.Buffer { return st.h }), 0); err != nil {
			return nil, fmt.Errorf("model: %w", err)
		}
	}
	s.emit(-1, "embd", sh0, st0.h, T, E)

	for l := 0; l < c.Layers; l++ {
		err := s.block(l, T, steps, func(d int, ss *sessionShard, st *step) error {
			return ss.mla[l].Forward(st.attnOut, st.x, T, pos0, ss.cache, ss.scratch, form)
		}, func() {
			s.emitKQV(l, T)
			s.emitSelected(l, T, pos0)
		})
		if err != nil {
			return nil, err
		}
	}

	// Final norm and output head on device 0.
	nOut, xOut, hOut := T, st0.x, st0.h
	if last && T > 1 && s.opts.Hook == nil {
		nOut, xOut, hOut = 1, st0.x.Slice((T-1)*E, E), st0.h.Slice((T-1)*E, E)
	}
	sh0.dev.RMSNorm(xOut, hOut, nOut, E, sh0.sh.outNorm, c.RMSEps)
	s.emit(-1, "result_norm", sh0, xOut, nOut, E)
	lb := g.get(&sh0.logits, nOut*c.VocabSize)
	if g.err != nil {
		return nil, g.err
	}
	sh0.dev.MatMul(lb, xOut, nOut, sh0.sh.output)
	logits := out
	if len(logits) != nOut*c.VocabSize {
		logits = make([]float32, nOut*c.VocabSize)
	}
	sh0.dev.Read(logits, lb)
	s.emitHost(-1, "result_output", logits, nOut, c.VocabSize)
	if last && nOut > 1 {
		logits = logits[(nOut-1)*c.VocabSize:]
	}
	for _, ss := range s.shards {
		if err := ss.dev.Sync(); err != nil {
			return nil, fmt.Errorf("model: %s: %w", ss.dev.Name(), err)
		}
	}
	if s.mtp != nil {
		if err := s.mtpRows(tokens, pos0, st0.h, form); err != nil {
			return nil, err
		}
	}
	s.pos += T
	return logits, nil
}

// block issues layer l (trunk or MTP block) on the T rows of steps[d].h:
// attention with residual, then the dense FFN or the MoE with residual.
// attend issues device d's attention of st.x into st.attnOut (the form,
// the positions and the caches are the caller's); afterAttn, if not nil,
// runs once all devices' attention is issued (the hooks of forward).
// forward, decodeBatch and the MTP block share it, so that a layer is
// computed one way everywhere.
func (s *Session) block(l, T int, steps []step, attend func(d int, ss *sessionShard, st *step) error, afterAttn func()) error {
	c := &s.m.cfg
	E := c.Embd
	sh0, st0 := s.shards[0], &steps[0]
	all := func(f func(st *step) backend.Buffer) []backend.Buffer {
		for d := range steps {
			s.parts[d] = f(&steps[d])
		}
		return s.parts
	}

	// Attention with residual.
	for d, ss := range s.shards {
		ss.dev.RMSNorm(steps[d].x, steps[d].h, T, E, ss.sh.layers[l].attnNorm, c.RMSEps)
	}
	s.emit(l, "attn_norm", sh0, st0.x, T, E)
	for d, ss := range s.shards {
		if err := attend(d, ss, &steps[d]); err != nil {
			return fmt.Errorf("model: layer %d: %w", l, err)
		}
	}
	if afterAttn != nil {
		afterAttn()
	}
	if err := s.reduce(l, "attn_out", all(func(st *step) backend.Buffer { return st.attnOut }), T); err != nil {
		return err
	}
	// The residual add and the feed-forward's norm, as one operation.
	for d, ss := range s.shards {
		ss.dev.AddRMSNorm(steps[d].x, steps[d].h, steps[d].attnOut, T, E, ss.sh.layers[l].ffnNorm, c.RMSEps)
	}
	s.emit(l, "ffn_inp", sh0, st0.h, T, E)
	s.emit(l, "ffn_norm", sh0, st0.x, T, E)

	// Feed-forward with residual.
	if s.m.w.Layers[l].Dense != nil {
		for d, ss := range s.shards {
			if err := ss.swiglu(steps[d].ffnOut, steps[d].x, T, ss.sh.layers[l].dense); err != nil {
				return err
			}
		}
	} else if err := s.moe(l, T, steps); err != nil {
		return err
	}
	if err := s.reduce(l, "ffn_out", all(func(st *step) backend.Buffer { return st.ffnOut }), T); err != nil {
		return err
	}
	for d, ss := range s.shards {
		ss.dev.Add(steps[d].h, steps[d].ffnOut)
	}
	s.emit(l, "out", sh0, st0.h, T, E)
	return nil
}

// reduce sums the devices' partial results of node (attn_out, ffn_out)
// with an all-reduce, showing the hook each device's part first
// ("blk.N.attn_out.shardK") when there are several.
func (s *Session) reduce(l int, node string, parts []backend.Buffer, T int) error {
	E := s.m.cfg.Embd
	if len(parts) > 1 {
		if s.opts.Hook != nil {
			for d, ss := range s.shards {
				s.emit(l, fmt.Sprintf("%s.shard%d", node, d), ss, parts[d], T, E)
			}
		}
		if err := s.m.coll.AllReduce(parts); err != nil {
			return fmt.Errorf("model: layer %d %s: %w", l, node, err)
		}
	}
	s.emit(l, node, s.shards[0], parts[0], T, E)
	return nil
}

// swiglu issues out = Down · (silu(Gate·y) ⊙ Up·y) for n rows y [n, E].
func (ss *sessionShard) swiglu(out, y backend.Buffer, n int, f *ffnShard) error {
	F := f.gate.Rows()
	var g getter
	gate, up := g.get(&ss.gate, n*F), g.get(&ss.up, n*F)
	if g.err != nil {
		return g.err
	}
	ss.dev.MatMul(gate, y, n, f.gate)
	ss.dev.MatMul(up, y, n, f.up)
	ss.dev.SwiGLU(gate, gate, up)
	ss.dev.MatMul(out, gate, n, f.down)
	return nil
}

// moe is docs/MATH.md section 7: every device routes every token (the router
// is replicated) and runs the tokens routed to its experts; its part of
// the shared experts is added to the same partial sum.
func (s *Session) moe(l, T int, steps []step) error {
	c := &s.m.cfg
	X, K, E := c.Experts, c.ExpertsUsed, c.Embd
	var g getter
	var ids0 backend.IDs
	idsDev := s.shards[0].dev
	if cm := s.m.cpuMoE; cm != nil && cm[l] != nil {
		var err error
		if ids0, err = s.cpuExperts(l, T, steps, cm[l]); err != nil {
			return err
		}
		idsDev = s.m.experts
	} else {
		for d, ss := range s.shards {
			ms := ss.sh.layers[l].moe
			logits, wts, ids := g.get(&ss.routerLogits, T*X), g.get(&ss.routerW, T*K), g.ids(&ss.ids, T*K)
			if g.err != nil {
				return g.err
			}
			ss.dev.MatMul(logits, steps[d].x, T, ms.router)
			ss.dev.RouterTopK(ids, wts, logits, T, &ms.r)
			ss.dev.MoE(steps[d].ffnOut, steps[d].x, T, ids, wts, &ms.experts)
			if d == 0 {
				ids0 = ids
			}
		}
	}
	if s.opts.IDHook != nil {
		s.host.ids = growIDs(s.host.ids, T*K)
		idsDev.ReadIDs(s.host.ids, ids0)
		s.emitIDs(l, "ffn_moe_topk", s.host.ids, T, K)
	}
	s.emitSum(l, "ffn_moe_out", func(d int) backend.Buffer { return steps[d].ffnOut }, T, E)
	if s.m.w.Layers[l].MoE.Shared == nil {
		return nil
	}
	tmp := s.parts
	for d, ss := range s.shards {
		if tmp[d] = g.get(&ss.tmp, T*E); g.err != nil {
			return g.err
		}
		if err := ss.swiglu(tmp[d], steps[d].x, T, ss.sh.layers[l].moe.shared); err != nil {
			return err
		}
	}
	s.emitSum(l, "ffn_shexp", func(d int) backend.Buffer { return tmp[d] }, T, E)
	for d, ss := range s.shards {
		ss.dev.Add(steps[d].ffnOut, tmp[d])
	}
	return nil
}

// cpuExperts runs block l's router and routed experts ms on the model's
// CPU device for them (Options.CPUMoE). Device 0's normed rows cross to it
// and the routed sum crosses back into device 0's ffnOut, once each way;
// the other devices' ffnOut start at zero, so that their shared-expert
// parts and the all-reduce after them are what they are without it. It
// returns the chosen experts' ids, on the CPU device.
func (s *Session) cpuExperts(l, T int, steps []step, ms *moeShard) (backend.IDs, error) {
	c := &s.m.cfg
	X, K, E := c.Experts, c.ExpertsUsed, c.Embd
	dev, e := s.m.experts, &s.exp
	var g getter
	x, out := g.get(&e.x, T*E), g.get(&e.out, T*E)
	logits, wts, ids := g.get(&e.logits, T*X), g.get(&e.w, T*K), g.ids(&e.ids, T*K)
	if g.err != nil {
		return nil, fmt.Errorf("model: layer %d: routed experts on the CPU: %w", l, g.err)
	}
	rows := grow(s.host.moe, T*E)
	s.host.moe = rows
	s.shards[0].dev.Read(rows, steps[0].x)
	dev.Write(x, rows)
	dev.MatMul(logits, x, T, ms.router)
	dev.RouterTopK(ids, wts, logits, T, &ms.r)
	dev.MoE(out, x, T, ids, wts, &ms.experts)
	dev.Read(rows, out)
	s.shards[0].dev.Write(steps[0].ffnOut, rows)
	if len(s.shards) > 1 {
		clear(rows)
		for d := 1; d < len(s.shards); d++ {
			s.shards[d].dev.Write(steps[d].ffnOut, rows)
		}
	}
	return ids, nil
}

func growIDs(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// emitSelected reports the DSA key selection of layer l to the IDHook.
func (s *Session) emitSelected(l, T, pos0 int) {
	if s.opts.IDHook == nil || s.m.w.Layers[l].Attn.Indexer == nil {
		return
	}
	k := min(s.m.cfg.IndexerTopK, pos0+T)
	ids := growIDs(s.host.ids, T*k)
	s.host.ids = ids
	ss := s.shards[0]
	if sel := ss.scratch.Sel; sel != nil { // k == top_k: rows as IndexerTopK wrote them
		ss.dev.ReadIDs(ids, sel)
	} else {
		for t := 0; t < T; t++ {
			row := ids[t*k : (t+1)*k]
			for i := range row {
				row[i] = -1
				if i <= pos0+t {
					row[i] = int32(i)
				}
			}
		}
	}
	s.emitIDs(l, "top_k", ids, T, k)
}

// emitKQV shows the hook the attention output before attn_output, the
// devices' heads side by side ([T, H·dv]).
func (s *Session) emitKQV(l, T int) {
	if s.opts.Hook == nil {
		return
	}
	c := &s.m.cfg
	n := c.Heads * c.DV
	if len(s.shards) == 1 {
		s.emit(l, "kqv_out", s.shards[0], s.shards[0].scratch.KQV, T, n)
		return
	}
	full := grow(s.host.a, T*n)
	s.host.a = full
	w := n / len(s.shards)
	for d, ss := range s.shards {
		part := grow(s.host.b, T*w)
		s.host.b = part
		ss.dev.Read(part, ss.scratch.KQV)
		for t := 0; t < T; t++ {
			copy(full[t*n+d*w:t*n+(d+1)*w], part[t*w:(t+1)*w])
		}
	}
	s.emitHost(l, "kqv_out", full, T, n)
}

// emitSum shows the hook the sum over devices (in device order) of
// partial results that the model itself adds up later (ffn_moe_out,
// ffn_shexp).
func (s *Session) emitSum(l int, node string, part func(d int) backend.Buffer, T, E int) {
	if s.opts.Hook == nil {
		return
	}
	sum := grow(s.host.a, T*E)
	s.host.a = sum
	s.shards[0].dev.Read(sum, part(0))
	for d := 1; d < len(s.shards); d++ {
		p := grow(s.host.b, T*E)
		s.host.b = p
		s.shards[d].dev.Read(p, part(d))
		for i, v := range p {
			sum[i] += v
		}
	}
	s.emitHost(l, node, sum, T, E)
}
