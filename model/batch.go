package model

import (
	"errors"
	"fmt"

	"github.com/glmrun/glmrun/attention"
	"github.com/glmrun/glmrun/backend"
)

// DecodeBatch runs one token through each of several sessions of one model
// in a single pass, as continuous batching does: tokens[i] is appended to
// sessions[i] at that session's own position, and the logits after each are
// returned (owned by the caller). The token rows of all sessions go through
// the norms, the dense FFN, the router, the experts (each expert once for
// all the tokens routed to it) and the output head together, so those
// weights are read once per step instead of once per sequence. So do the
// attention projections (attention.MLA.DecodeBatch); only the attention
// over each session's own KV cache runs per session.
//
// Every row goes through the operations Decode runs, in the same order.
// With Options.BatchInvariant the logits therefore equal those of decoding
// the sessions one by one, bit for bit; by default the products of
// sixteen or more rows may take faster tiles that add in another order, so
// each product agrees within float rounding, and where that moves a later
// activation's int8 rounding or an expert choice across its tie the logits
// move further (TestDecodeBatch measures it). Sessions with a Hook or
// IDHook are decoded one by one, so that their hooks see their own
// activations. On an error no session has advanced.
func DecodeBatch(sessions []*Session, tokens []int32) ([][]float32, error) {
	if len(sessions) == 0 {
		return nil, DecodeBatchInto(nil, sessions, tokens) // checks the token count
	}
	V := sessions[0].m.cfg.VocabSize
	logits := make([]float32, len(sessions)*V)
	if err := DecodeBatchInto(logits, sessions, tokens); err != nil {
		return nil, err
	}
	rows := make([][]float32, len(sessions))
	for i := range rows {
		rows[i] = logits[i*V : (i+1)*V : (i+1)*V]
	}
	return rows, nil
}

// DecodeBatchInto is DecodeBatch writing the logits after sessions[i] to
// dst[i·V:(i+1)·V], V the vocabulary size; len(dst) must be len(sessions)·V.
// A server that decodes step after step reuses one dst: the logits of 16
// sequences of a 151k vocabulary are 9.7 MB, and memory allocated afresh
// for them each step faults in page by page. Without hooks, on the CPU
// backend in steady state, it allocates only small bookkeeping.
func DecodeBatchInto(dst []float32, sessions []*Session, tokens []int32) error {
	n := len(sessions)
	if n != len(tokens) {
		return fmt.Errorf("model: DecodeBatch: %d sessions but %d tokens", n, len(tokens))
	}
	if n == 0 {
		return nil
	}
	m := sessions[0].m
	if V := m.cfg.VocabSize; len(dst) != n*V {
		return fmt.Errorf("model: DecodeBatch: %d logits for %d sessions, want %d·%d", len(dst), n, n, V)
	}
	seen := make(map[*Session]bool, n)
	for i, s := range sessions {
		if s.m != m {
			return fmt.Errorf("model: DecodeBatch: session %d belongs to another model", i)
		}
		if seen[s] {
			return fmt.Errorf("model: DecodeBatch: session %d appears twice", i)
		}
		seen[s] = true
		if s.shards == nil {
			return fmt.Errorf("model: DecodeBatch: session %d is closed", i)
		}
		if err := s.check(tokens[i : i+1]); err != nil {
			return fmt.Errorf("model: DecodeBatch: session %d: %w", i, err)
		}
		if s.opts.Hook != nil || s.opts.IDHook != nil {
			return decodeEach(dst, sessions, tokens)
		}
	}
	if n == 1 {
		return sessions[0].DecodeInto(dst, tokens[0])
	}
	return m.decodeBatch(dst, sessions, tokens)
}

// decodeEach decodes the sessions one by one into dst. The tokens were
// checked, so only device faults can fail it, and those are sticky for
// every session.
func decodeEach(dst []float32, sessions []*Session, tokens []int32) error {
	V := sessions[0].m.cfg.VocabSize
	for i, s := range sessions {
		if err := s.DecodeInto(dst[i*V:(i+1)*V], tokens[i]); err != nil {
			return fmt.Errorf("model: DecodeBatch: session %d: %w", i, err)
		}
	}
	return nil
}

// decodeBatch is forward for one new token in each of n sessions: the
// activation rows [n, E] and the attention scratch live in the first
// session's buffers; the attention of row i reads and grows session i's
// cache. The phases and the order of the operations on every row are
// forward's, so each row's result is too (with batch-invariant products;
// see DecodeBatch).
func (m *Model) decodeBatch(logits []float32, sessions []*Session, tokens []int32) error {
	c := &m.cfg
	T, E := len(sessions), c.Embd
	lead := sessions[0]
	steps := make([]step, len(lead.shards))
	var g getter
	for d, ss := range lead.shards {
		steps[d] = step{h: g.get(&ss.h, T*E), x: g.get(&ss.x, T*E), attnOut: g.get(&ss.attnOut, T*E), ffnOut: g.get(&ss.ffnOut, T*E)}
	}
	if g.err != nil {
		return g.err
	}
	sh0, st0 := lead.shards[0], &steps[0]
	seqs := make([][]attention.Seq, len(lead.shards)) // [device][session]
	for d := range seqs {
		seqs[d] = make([]attention.Seq, T)
		for i, s := range sessions {
			seqs[d][i] = attention.Seq{Cache: s.shards[d].cache, Pos: s.pos}
		}
	}
	all := func(f func(st *step) backend.Buffer) []backend.Buffer {
		b := make([]backend.Buffer, len(steps))
		for d := range steps {
			b[d] = f(&steps[d])
		}
		return b
	}

	// Token embeddings on device 0, broadcast to the others.
	sh0.dev.GetRows(st0.h, sh0.sh.embd, tokens)
	if len(steps) > 1 {
		if err := m.coll.Broadcast(all(func(st *step) backend.Buffer { return st.h }), 0); err != nil {
			return fmt.Errorf("model: %w", err)
		}
	}

	for l := 0; l < c.Layers; l++ {
		// Attention with residual: norms and projections batched, the
		// attention over each session's cache per session.
		for d, ss := range lead.shards {
			ss.dev.RMSNorm(steps[d].x, steps[d].h, T, E, ss.sh.layers[l].attnNorm, c.RMSEps)
		}
		for d, ss := range lead.shards {
			if err := ss.mla[l].DecodeBatch(steps[d].attnOut, steps[d].x, seqs[d], ss.scratch); err != nil {
				return fmt.Errorf("model: layer %d: %w", l, err)
			}
		}
		if err := lead.reduce(l, "attn_out", all(func(st *step) backend.Buffer { return st.attnOut }), T); err != nil {
			return err
		}
		for d, ss := range lead.shards {
			ss.dev.Add(steps[d].h, steps[d].attnOut)
		}

		// Feed-forward with residual, all rows together.
		for d, ss := range lead.shards {
			ss.dev.RMSNorm(steps[d].x, steps[d].h, T, E, ss.sh.layers[l].ffnNorm, c.RMSEps)
		}
		if m.w.Layers[l].Dense != nil {
			for d, ss := range lead.shards {
				if err := ss.swiglu(steps[d].ffnOut, steps[d].x, T, ss.sh.layers[l].dense); err != nil {
					return err
				}
			}
		} else if err := lead.moe(l, T, steps); err != nil {
			return err
		}
		if err := lead.reduce(l, "ffn_out", all(func(st *step) backend.Buffer { return st.ffnOut }), T); err != nil {
			return err
		}
		for d, ss := range lead.shards {
			ss.dev.Add(steps[d].h, steps[d].ffnOut)
		}
	}

	// Final norm and output head on device 0, all rows together.
	sh0.dev.RMSNorm(st0.x, st0.h, T, E, sh0.sh.outNorm, c.RMSEps)
	lb := g.get(&sh0.logits, T*c.VocabSize)
	if g.err != nil {
		return g.err
	}
	sh0.dev.MatMul(lb, st0.x, T, sh0.sh.output)
	sh0.dev.Read(logits, lb)
	var errs []error
	for _, ss := range lead.shards {
		if err := ss.dev.Sync(); err != nil {
			errs = append(errs, fmt.Errorf("model: %s: %w", ss.dev.Name(), err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, s := range sessions {
		s.pos++
	}
	return nil
}
