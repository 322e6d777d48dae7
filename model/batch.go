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
	rows := make([][]int32, n)
	for i := range rows {
		rows[i] = tokens[i : i+1]
	}
	return m.decodeBatch(dst, sessions, rows)
}

// DecodeBatchRows is DecodeBatch with any number of tokens per session:
// tokens[i] (at least one) are appended to sessions[i] in one pass, each
// row attending to its own session's cache up to its position, as
// DecodeTokens runs them; speculative decoding checks the drafts of all
// its sequences in one such pass. It returns the logits after every token,
// session after session ([Σ len(tokens[i])][vocab]). With
// Options.BatchInvariant each row equals what decoding it alone gives. On
// an error no session has advanced.
func DecodeBatchRows(sessions []*Session, tokens [][]int32) ([][]float32, error) {
	n := len(sessions)
	if n != len(tokens) {
		return nil, fmt.Errorf("model: DecodeBatchRows: %d sessions but %d token lists", n, len(tokens))
	}
	if n == 0 {
		return nil, nil
	}
	m := sessions[0].m
	seen := make(map[*Session]bool, n)
	rows := 0
	each := false
	for i, s := range sessions {
		switch {
		case s.m != m:
			return nil, fmt.Errorf("model: DecodeBatchRows: session %d belongs to another model", i)
		case seen[s]:
			return nil, fmt.Errorf("model: DecodeBatchRows: session %d appears twice", i)
		case s.shards == nil:
			return nil, fmt.Errorf("model: DecodeBatchRows: session %d is closed", i)
		}
		seen[s] = true
		if err := s.check(tokens[i]); err != nil {
			return nil, fmt.Errorf("model: DecodeBatchRows: session %d: %w", i, err)
		}
		rows += len(tokens[i])
		each = each || s.opts.Hook != nil || s.opts.IDHook != nil
	}
	V := m.cfg.VocabSize
	out := make([][]float32, 0, rows)
	if each || n == 1 {
		// Hooks see their own session's activations: one by one.
		for i, s := range sessions {
			r, err := s.DecodeTokens(tokens[i])
			if err != nil {
				return nil, fmt.Errorf("model: DecodeBatchRows: session %d: %w", i, err)
			}
			out = append(out, r...)
		}
		return out, nil
	}
	logits := make([]float32, rows*V)
	if err := m.decodeBatch(logits, sessions, tokens); err != nil {
		return nil, err
	}
	for r := range rows {
		out = append(out, logits[r*V:(r+1)*V:(r+1)*V])
	}
	return out, nil
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

// decodeBatch is forward for the new tokens of n sessions, tokens[i] for
// session i: the activation rows [T, E] (T the tokens of all sessions) and
// the attention scratch live in the first session's buffers; row j of
// session i attends to session i's cache at its position s.pos+j (all
// rows' keys are written before any row attends). The phases and the
// order of the operations on every row are forward's in the decode form,
// so each row's result is too (with batch-invariant products; see
// DecodeBatch).
func (m *Model) decodeBatch(logits []float32, sessions []*Session, tokens [][]int32) error {
	c := &m.cfg
	E := c.Embd
	var flat []int32
	for _, t := range tokens {
		flat = append(flat, t...)
	}
	T := len(flat)
	lead := sessions[0]
	steps, err := lead.stepBuffers(make([]step, len(lead.shards)), T)
	if err != nil {
		return err
	}
	var g getter
	sh0, st0 := lead.shards[0], &steps[0]
	seqs := make([][]attention.Seq, len(lead.shards)) // [device][row]
	for d := range seqs {
		seqs[d] = make([]attention.Seq, 0, T)
		for i, s := range sessions {
			for j := range tokens[i] {
				seqs[d] = append(seqs[d], attention.Seq{Cache: s.shards[d].cache, Pos: s.pos + j})
			}
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
	sh0.dev.GetRows(st0.h, sh0.sh.embd, flat)
	if len(steps) > 1 {
		if err := m.coll.Broadcast(all(func(st *step) backend.Buffer { return st.h }), 0); err != nil {
			return fmt.Errorf("model: %w", err)
		}
	}

	// Each layer: norms and projections batched, the attention over each
	// session's cache per session (attention.MLA.DecodeBatch).
	for l := 0; l < c.Layers; l++ {
		err := lead.block(l, T, steps, func(d int, ss *sessionShard, st *step) error {
			return ss.mla[l].DecodeBatch(st.attnOut, st.x, seqs[d], ss.scratch)
		}, nil)
		if err != nil {
			return err
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
	// The MTP blocks of the sessions that run one, the lead's last: the
	// others read their hidden rows from its buffers.
	for i, row := len(sessions)-1, T; i >= 0; i-- {
		s := sessions[i]
		row -= len(tokens[i])
		if s.mtp != nil {
			if err := s.mtpRows(tokens[i], s.pos, st0.h.Slice(row*E, len(tokens[i])*E), attention.Decode); err != nil {
				return fmt.Errorf("model: DecodeBatch: session %d: %w", i, err)
			}
		}
	}
	for i, s := range sessions {
		s.pos += len(tokens[i])
	}
	return nil
}
