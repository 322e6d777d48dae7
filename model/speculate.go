package model

import (
	"errors"
	"fmt"

	"github.com/glmrun/glmrun/model/sample"
)

// SpecRound is what one round of speculative decoding added to a
// session (Session.Speculate).
type SpecRound struct {
	// Tokens follow the pending token: the drafts the trunk kept, then
	// the token it chose after them. The pending token and the kept drafts
	// are in the cache; the last token is the new pending one.
	Tokens []int32
	// Logits[i] are the trunk's logits Tokens[i] was chosen from (views of
	// one buffer, valid until the session's next forward call).
	Logits [][]float32
	// Drafted tokens were proposed by the MTP block; Kept of them stayed.
	Drafted, Kept int
}

// SpecBuffers are a speculating sequence's state between the phases of a
// round (Drafts, the verification pass, AcceptDrafts) and the draft logits
// it reuses round after round.
type SpecBuffers struct {
	drafts []int32 // pending, then the drafts
	dl     [][]float32
	pos    int // the session's position before the verification pass
}

// Speculate runs one round of speculative decoding. The sequence is
// followed by pending, a token chosen from the last logits and not yet run
// (Pos() is where it goes). The MTP block drafts k tokens after it (Drafts);
// one batched pass of the trunk in the decode form (DecodeTokens) over
// pending and the drafts gives the target's logits after each; and
// AcceptDrafts keeps the drafts the trunk agrees with. 1 to k+1 tokens are
// decided per pass. smp's penalties must be off (a draft's distribution
// must not depend on drafts not yet kept); the caller Accepts the round's
// tokens as it takes them.
func (s *Session) Speculate(pending int32, k int, smp *sample.Sampler, b *SpecBuffers) (SpecRound, error) {
	toks, err := s.Drafts(pending, k, smp, b)
	if err != nil {
		return SpecRound{}, err
	}
	rows, err := s.DecodeTokens(toks)
	if err != nil {
		return SpecRound{}, err
	}
	return s.AcceptDrafts(rows, smp, b)
}

// Drafts is the first phase of a round (see Speculate): the MTP block
// drafts k tokens after pending, chained, each drawn with smp from the
// block's logits. It returns the tokens of the verification pass, pending
// then the drafts (in b's storage), which the caller runs through the
// trunk (DecodeTokens, or DecodeBatchRows with other sequences) before
// AcceptDrafts.
func (s *Session) Drafts(pending int32, k int, smp *sample.Sampler, b *SpecBuffers) ([]int32, error) {
	if s.mtp == nil {
		return nil, errNoMTP
	}
	if smp.Penalties() {
		return nil, errors.New("model: speculative decoding with the sampler's penalties on")
	}
	if k < 1 {
		return nil, fmt.Errorf("model: Drafts: %d drafts, want at least 1", k)
	}
	if s.pos+k+1 > s.opts.ContextSize {
		return nil, fmt.Errorf("model: %w: %d drafts after %d positions exceed the context size %d",
			ErrContextFull, k, s.pos+1, s.opts.ContextSize)
	}
	V := s.m.cfg.VocabSize
	for len(b.dl) < k {
		b.dl = append(b.dl, make([]float32, V))
	}
	b.drafts = append(b.drafts[:0], pending)
	b.pos = s.pos
	for j := range k {
		var err error
		if j == 0 {
			err = s.Draft(b.dl[0], pending)
		} else {
			err = s.DraftNext(b.dl[j], b.drafts[j])
		}
		if err != nil {
			return nil, err
		}
		d, err := smp.Sample(b.dl[j])
		if err != nil {
			return nil, fmt.Errorf("model: draft: %w", err)
		}
		b.drafts = append(b.drafts, d)
	}
	return b.drafts, nil
}

// AcceptDrafts is the last phase of a round (see Speculate): rows are the
// trunk's logits after pending and after each draft, from the pass over the
// tokens Drafts returned. smp.Verify keeps the drafts in order while it
// agrees and chooses the next token at the first disagreement, or after
// the last draft. The cache keeps pending and the kept drafts.
func (s *Session) AcceptDrafts(rows [][]float32, smp *sample.Sampler, b *SpecBuffers) (SpecRound, error) {
	k := len(b.drafts) - 1
	if k < 1 || len(rows) != k+1 || s.pos != b.pos+k+1 {
		return SpecRound{}, fmt.Errorf("model: AcceptDrafts: %d rows after a pass to position %d, for %d drafts from %d",
			len(rows), s.pos, k, b.pos)
	}
	r := SpecRound{Drafted: k}
	for j := 0; j <= k; j++ {
		var z int32
		var err error
		ok := false
		if j < k {
			z, ok, err = smp.Verify(rows[j], b.dl[j], b.drafts[j+1])
		} else {
			z, err = smp.Sample(rows[j])
		}
		if err != nil {
			// The cache holds the drafts: cut back to the sequence.
			s.Truncate(b.pos)
			return SpecRound{}, fmt.Errorf("model: %w", err)
		}
		r.Tokens = append(r.Tokens, z)
		r.Logits = append(r.Logits, rows[j])
		if !ok {
			break
		}
		r.Kept++
	}
	if err := s.Truncate(b.pos + 1 + r.Kept); err != nil {
		return SpecRound{}, err
	}
	b.drafts = b.drafts[:0]
	return r, nil
}
