package model

import (
	"errors"
	"fmt"

	"github.com/glmrun/glmrun/attention"
	"github.com/glmrun/glmrun/backend"
)

// The multi-token-prediction (NextN) block, docs/MATH.md section 8: at
// position i, from the trunk's last hidden state h_i (before the output
// norm) and the embedding of the token t_{i+1} that follows, it predicts
// t_{i+2}:
//
//	u   = eh_proj · [enorm(embed(t_{i+1})) ; hnorm(h_i)]
//	u'  = the block's attention (over its own latent cache) and MoE on u
//	out = head(shared_head_norm(u'))
//
// u' also stands in for h when the block drafts further tokens (chained
// drafting: each draft feeds the next).

// mtpHead is the NextN block's own tensors on device 0.
type mtpHead struct {
	ehEmbd, ehHidden backend.Weight // the two column halves of eh_proj [E, E]
	enorm, hnorm     backend.Buffer
	embd             backend.Weight // nextn.embed_tokens, or token_embd
	norm             backend.Buffer // nextn.shared_head_norm
	head             backend.Weight // nextn.shared_head_head, or output
}

// mtpLayer returns the block index of the MTP block the model runs: the
// first NextN block (GLM-5, GLM-4.7-Flash and DeepSeek-V3 have one; with
// more, each further block would be a deeper predictor, and chaining the
// first is what the engines that run these models do).
func (c *Config) mtpLayer() int { return c.Layers }

// uploadMTP uploads the MTP block's own tensors to device 0.
func (m *Model) uploadMTP(u *devUploader, sh *shard) {
	c, w := &m.cfg, m.w
	n := w.Layers[c.mtpLayer()].NextN
	E := c.Embd
	pre := fmt.Sprintf("blk.%d.nextn.", c.mtpLayer())
	if n.SharedHeadNorm == nil {
		u.fail(fmt.Errorf("model: %sshared_head_norm.weight is missing: the MTP block cannot be run without it", pre))
		return
	}
	h := &mtpHead{embd: sh.embd, head: sh.output}
	if left, err := n.EHProj.SliceCols(0, E); err != nil {
		u.fail(fmt.Errorf("model: %seh_proj.weight: %w", pre, err))
	} else if right, err := n.EHProj.SliceCols(E, E); err != nil {
		u.fail(fmt.Errorf("model: %seh_proj.weight: %w", pre, err))
	} else {
		h.ehEmbd, h.ehHidden = u.matrix(left), u.matrix(right)
	}
	h.enorm = u.vector(pre+"enorm.weight", n.ENorm)
	h.hnorm = u.vector(pre+"hnorm.weight", n.HNorm)
	h.norm = u.vector(pre+"shared_head_norm.weight", n.SharedHeadNorm)
	if n.EmbedTokens != nil && n.EmbedTokens.Name != w.TokenEmbd.Name {
		h.embd = u.matrix(*n.EmbedTokens)
	}
	if n.SharedHeadHead != nil && n.SharedHeadHead.Name != w.Output.Name {
		h.head = u.matrix(*n.SharedHeadHead)
	}
	sh.mtp = h
}

// HasMTP reports whether the model was loaded with its MTP block
// (Options.MTP), which sessions can then run (SessionOptions.MTP).
func (m *Model) HasMTP() bool { return len(m.shards) > 0 && m.shards[0].mtp != nil }

// mtpState is a session's MTP bookkeeping. The block's cache rows [0, pos)
// hold what the block computed from true inputs: row i from the trunk's
// hidden state at i and next[i], the token that followed. A row stays
// valid through a Truncate as long as the sequence goes on with the same
// token; rows from pos on are drafts'.
type mtpState struct {
	pos  int
	next []int32 // [ContextSize]
	// hidden holds the trunk's hidden states of positions [hPos, hPos+hN),
	// the rows of the last forward call, on device 0.
	hidden   backend.Scratch
	hPos, hN int
	in       backend.Scratch // the block's input rows [n, E] (device 0)
	out      backend.Scratch // the last draft's block output [E] (device 0)
	draftPos int             // position of the next chained draft
	outOK    bool            // out holds the previous draft's output
	tok      [1]int32
}

// hasHidden reports whether the trunk's hidden state of position p is kept.
func (mt *mtpState) hasHidden(p int) bool { return p >= mt.hPos && p < mt.hPos+mt.hN }

// mtpRows runs the MTP block over its rows that the forward call just made
// computable: positions [mt.pos, pos0+T−1), whose hidden states are those
// of the call (in hidden) and, for position pos0−1, of the call before;
// their next tokens are the call's tokens. Row pos0−1 is run again if it
// was made with another next token. It keeps the call's hidden states for
// the rows after. The activation buffers are reused, so it runs after the
// trunk's output head.
func (s *Session) mtpRows(tokens []int32, pos0 int, hidden backend.Buffer, form attention.Form) error {
	mt, c := s.mtp, &s.m.cfg
	E, T := c.Embd, len(tokens)
	first := mt.pos // the first row to compute
	if first >= pos0 && pos0 > 0 && mt.next[pos0-1] != tokens[0] {
		first = pos0 - 1
	}
	first = min(first, pos0)
	if first < pos0-1 || first == pos0-1 && !mt.hasHidden(first) {
		return fmt.Errorf("model: the MTP block's row %d needs the trunk's hidden state there, which is gone: run the tokens from %d again (Session.MTPResume)",
			first, s.MTPResume(tokens[0]))
	}
	n := pos0 + T - 1 - first
	dev := s.shards[0].dev
	var in backend.Buffer
	if n > 0 {
		var err error
		if in, err = mt.in.Get(n * E); err != nil {
			return fmt.Errorf("model: %w", err)
		}
		k := 0 // rows of in filled
		if first == pos0-1 {
			h, err := mt.hidden.Get(mt.hN * E)
			if err != nil {
				return fmt.Errorf("model: %w", err)
			}
			dev.Copy(in.Slice(0, E), h.Slice((first-mt.hPos)*E, E))
			k = 1
		}
		dev.Copy(in.Slice(k*E, (n-k)*E), hidden.Slice((first+k-pos0)*E, (n-k)*E))
	}
	// Keep this call's hidden states (a row may still be needed: the
	// last, and any row a Truncate goes back to), before the block
	// reuses the activation buffers that hold them.
	h, err := mt.hidden.Get(T * E)
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	dev.Copy(h, hidden)
	mt.hPos, mt.hN = pos0, T
	mt.outOK = false
	if n > 0 {
		// The call's tokens from the one at position first+1 on are the
		// rows' next tokens.
		next := tokens[first+1-pos0:][:n]
		if err := s.mtpBlock(in, next, first, nil, form); err != nil {
			return err
		}
		copy(mt.next[first:], next)
		mt.pos = first + n
	}
	return nil
}

// mtpBlock runs the MTP block on n = len(next) rows at positions p0 … of its
// cache: in [n, E] holds the hidden states the rows start from (trunk or
// previous draft) and next their next tokens. The block's output of the
// last row goes to s.mtp.out; when dst is not nil, the logits of the last
// row go to it.
func (s *Session) mtpBlock(in backend.Buffer, next []int32, p0 int, dst []float32, form attention.Form) error {
	c := &s.m.cfg
	n, E := len(next), c.Embd
	l := c.mtpLayer()
	if p0+n > s.opts.ContextSize {
		return fmt.Errorf("model: %w: the MTP block's %d rows after %d exceed the context size %d",
			ErrContextFull, n, p0, s.opts.ContextSize)
	}
	steps, err := s.stepBuffers(s.steps, n)
	if err != nil {
		return err
	}
	var g getter
	sh0, st0 := s.shards[0], &steps[0]
	h := sh0.sh.mtp
	dev := sh0.dev

	// u = eh_proj_embd · enorm(embed(next)) + eh_proj_hidden · hnorm(in).
	dev.GetRows(st0.x, h.embd, next)
	dev.RMSNorm(st0.x, st0.x, n, E, h.enorm, c.RMSEps)
	dev.MatMul(st0.h, st0.x, n, h.ehEmbd)
	dev.RMSNorm(st0.attnOut, in, n, E, h.hnorm, c.RMSEps)
	dev.MatMul(st0.ffnOut, st0.attnOut, n, h.ehHidden)
	dev.Add(st0.h, st0.ffnOut)
	if len(steps) > 1 {
		for d := range steps {
			s.parts[d] = steps[d].h
		}
		if err := s.m.coll.Broadcast(s.parts, 0); err != nil {
			return fmt.Errorf("model: %w", err)
		}
	}
	s.emit(l, "mtp_eh_proj", sh0, st0.h, n, E)

	err = s.block(l, n, steps, func(d int, ss *sessionShard, st *step) error {
		return ss.mla[l].Forward(st.attnOut, st.x, n, p0, ss.cache, ss.scratch, form)
	}, nil)
	if err != nil {
		return err
	}
	out, err := s.mtp.out.Get(E)
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	last := st0.h.Slice((n-1)*E, E)
	dev.Copy(out, last)
	if dst != nil {
		xl := st0.x.Slice((n-1)*E, E)
		dev.RMSNorm(xl, last, 1, E, h.norm, c.RMSEps)
		s.emit(l, "mtp_norm", sh0, xl, 1, E)
		lb := g.get(&sh0.logits, c.VocabSize)
		if g.err != nil {
			return g.err
		}
		dev.MatMul(lb, xl, 1, h.head)
		dev.Read(dst, lb)
	}
	for _, ss := range s.shards {
		if err := ss.dev.Sync(); err != nil {
			return fmt.Errorf("model: %s: %w", ss.dev.Name(), err)
		}
	}
	return nil
}

// errNoMTP is returned by the draft methods of a session without MTP.
var errNoMTP = errors.New("model: the session does not run the MTP block (SessionOptions.MTP, on a model loaded with Options.MTP)")

// Draft writes to dst (the vocabulary size) the MTP block's logits for the
// token after next: next is the token that follows the sequence (sampled
// from the last logits, not yet run through the trunk). The block's row
// for the last position is computed from true inputs and kept; DraftNext
// continues from this draft.
func (s *Session) Draft(dst []float32, next int32) error {
	mt := s.mtp
	if mt == nil {
		return errNoMTP
	}
	if err := s.checkDraft(dst, next); err != nil {
		return err
	}
	p := s.pos - 1
	if p < 0 {
		return errors.New("model: Draft: the sequence is empty")
	}
	if mt.pos < p || !mt.hasHidden(p) {
		return fmt.Errorf("model: Draft: the MTP block is not at the end of the sequence: run the tokens from %d again (Session.MTPResume)", s.MTPResume(next))
	}
	var g getter
	in := g.get(&mt.in, s.m.cfg.Embd)
	hid := g.get(&mt.hidden, mt.hN*s.m.cfg.Embd)
	if g.err != nil {
		return g.err
	}
	E := s.m.cfg.Embd
	s.shards[0].dev.Copy(in, hid.Slice((p-mt.hPos)*E, E))
	mt.tok[0] = next
	if err := s.mtpBlock(in, mt.tok[:], p, dst, attention.Decode); err != nil {
		return err
	}
	mt.next[p], mt.pos = next, p+1
	mt.draftPos, mt.outOK = p+1, true
	return nil
}

// DraftNext writes to dst the MTP block's logits for the token after tok,
// where tok is the token the previous draft (Draft or DraftNext) predicted:
// the block runs on its own last output instead of the trunk's hidden
// state. Its cache rows are drafts', rewritten once the trunk has run
// those positions.
func (s *Session) DraftNext(dst []float32, tok int32) error {
	mt := s.mtp
	if mt == nil {
		return errNoMTP
	}
	if err := s.checkDraft(dst, tok); err != nil {
		return err
	}
	if !mt.outOK {
		return errors.New("model: DraftNext without a Draft before it")
	}
	var g getter
	E := s.m.cfg.Embd
	in := g.get(&mt.in, E)
	out := g.get(&mt.out, E)
	if g.err != nil {
		return g.err
	}
	s.shards[0].dev.Copy(in, out)
	mt.tok[0] = tok
	if err := s.mtpBlock(in, mt.tok[:], mt.draftPos, dst, attention.Decode); err != nil {
		return err
	}
	mt.draftPos++
	return nil
}

func (s *Session) checkDraft(dst []float32, tok int32) error {
	if s.shards == nil {
		return errors.New("model: the session is closed")
	}
	if V := s.m.cfg.VocabSize; len(dst) != V {
		return fmt.Errorf("model: draft: %d logits, want the vocabulary size %d", len(dst), V)
	}
	if tok < 0 || int(tok) >= s.m.cfg.VocabSize {
		return fmt.Errorf("model: draft: token %d is outside the vocabulary [0, %d)", tok, s.m.cfg.VocabSize)
	}
	return nil
}

// MTPResume returns the position from which the tokens must be run through
// the session again (after Truncate to it) for the MTP block to follow the
// sequence when it goes on with token next at Pos(): Pos() when nothing
// needs to run again. The block's row for the last position was made from
// the token after it; when that token changes (a Truncate, then another
// token) the row is made again from the trunk's hidden state there, which
// only the rows of the last forward call keep.
func (s *Session) MTPResume(next int32) int {
	mt, p := s.mtp, s.pos
	switch {
	case mt == nil || p == 0:
		return p
	case mt.pos >= p && mt.next[p-1] == next, mt.pos >= p-1 && mt.hasHidden(p-1):
		return p
	}
	return min(mt.pos, p-1)
}
