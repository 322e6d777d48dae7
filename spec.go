package glmrun

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/glmrun/glmrun/model"
	"github.com/glmrun/glmrun/model/sample"
)

// speculator is one generation's speculative-decoding state
// (Options.SpecDraft).
type speculator struct {
	k     int
	bufs  model.SpecBuffers
	queue []queued // tokens of the last round not yet yielded, oldest first
}

// queued is a token a round produced: already in Session.tokens (and the
// cache, but for the last), not yet handed to the caller.
type queued struct {
	id     int32
	logits []float32 // the target's logits it was chosen from
}

// speculate runs one round of speculative decoding (model.Session.Speculate)
// under the session's lock. The sequence ends with a sampled token that is
// not in the cache yet (the pending token); the round decides one to k+1
// tokens after it, which are appended to the sequence and queued for the
// caller. It leaves the queue empty, for a plain step, when no draft fits
// (context, MaxTokens) or the MTP block is not at the end of the sequence.
func (s *Session) speculate(ctx context.Context, smp *sample.Sampler, opts GenerateOptions, stats *Stats, sp *speculator) error {
	p := s.s.Pos()
	if len(s.tokens) != p+1 || s.s.MTPResume(s.tokens[p]) != p {
		return nil
	}
	k := min(sp.k, s.ctxSize-len(s.tokens)-1)
	if opts.MaxTokens > 0 {
		k = min(k, opts.MaxTokens-stats.Generated-1)
	}
	if k < 1 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		stats.Stop = StopCanceled
		return fmt.Errorf("glmrun: generation stopped: %w", err)
	}
	start := time.Now()
	r, err := s.s.Speculate(s.tokens[p], k, smp, &sp.bufs)
	if err != nil {
		return fmt.Errorf("glmrun: %w", err)
	}
	for i, id := range r.Tokens {
		smp.Accept(id)
		sp.queue = append(sp.queue, queued{id: id, logits: r.Logits[i]})
		s.tokens = append(s.tokens, id)
	}
	s.logits = nil
	kept := r.Kept
	stats.EvalTokens += k + 1
	stats.EvalTime += time.Since(start)
	stats.Drafted += k
	stats.SpecRounds++
	stats.Accepted += kept
	return nil
}

// popDraft hands the caller the oldest queued token of the last round.
func (s *Session) popDraft(smp *sample.Sampler, opts GenerateOptions, stats *Stats, sp *speculator) (Token, bool, bool, error) {
	q := sp.queue[0]
	sp.queue = sp.queue[1:]
	tok := Token{ID: q.id}
	if opts.Logprobs || opts.TopLogprobs > 0 {
		lp, err := smp.Logprobs(q.logits, q.id, opts.TopLogprobs)
		if err != nil {
			return Token{}, false, false, fmt.Errorf("glmrun: %w", err)
		}
		tok.Logprob = lp.Chosen.Logprob
		if opts.TopLogprobs > 0 {
			tok.Top = slices.Clone(lp.Top)
		}
	}
	stats.Generated++
	return tok, true, len(s.tokens)-len(sp.queue) >= s.ctxSize, nil
}

// dropDrafts removes the tokens of the last round that the caller never
// got (the generation stopped before them) from the sequence and the
// cache.
func (s *Session) dropDrafts(sp *speculator) {
	if len(sp.queue) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.s == nil {
		return
	}
	n := len(s.tokens) - len(sp.queue)
	s.tokens = s.tokens[:n]
	sp.queue = sp.queue[:0]
	if s.s.Pos() > n {
		s.truncate(n)
	}
}
