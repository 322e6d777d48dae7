package glmrun

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/glmrun/glmrun/model"
)

// prefillBatch is the most tokens run through the model in one Prefill
// call. Prefill returns the logits of every position ([T, vocab]), so long
// prompts go in chunks to bound that memory.
const prefillBatch = 256

// SessionOptions configure NewSession.
type SessionOptions struct {
	// ContextSize is the number of positions of the KV cache, allocated
	// in full by NewSession; 0 means the Model's Options.ContextSize, and
	// if that is 0 too, the smaller of the model's training context and
	// DefaultContextSize.
	ContextSize int
}

// Session is one token sequence and its KV cache. It is not safe for
// concurrent use; use one Session per goroutine.
type Session struct {
	m      *Model
	s      *model.Session
	tokens []int32 // the sequence; tokens[:s.Pos()] are in the cache

	// logits are the logits after tokens[:logitsPos] (nil if unknown).
	logits    []float32
	logitsPos int

	stats Stats
}

// NewSession starts an empty sequence with its own KV cache, allocated
// for the whole context size at once: the session's memory does not grow
// as the sequence does, and a sequence longer than the context is an error
// wrapping ErrContextFull.
func (m *Model) NewSession(opts SessionOptions) (*Session, error) {
	n := opts.ContextSize
	if n < 0 {
		return nil, fmt.Errorf("glmrun: negative context size %d", n)
	}
	if n == 0 {
		n = m.opts.ContextSize
	}
	s, err := m.m.NewSession(model.SessionOptions{ContextSize: n})
	if err != nil {
		return nil, fmt.Errorf("glmrun: %w", err)
	}
	return &Session{m: m, s: s}, nil
}

// Close returns the session's KV cache and buffers to the device; the
// session must not be used after. Closing the Model frees them too.
func (s *Session) Close() error {
	if s.s == nil {
		return nil
	}
	err := s.s.Close()
	s.s = nil
	return err
}

// Model returns the model the session runs.
func (s *Session) Model() *Model { return s.m }

// ContextSize returns the number of positions the session holds.
func (s *Session) ContextSize() int { return s.s.ContextSize() }

// Tokens returns a copy of the sequence: prompt and generated tokens.
func (s *Session) Tokens() []int32 { return slices.Clone(s.tokens) }

// Cached returns how many tokens at the start of the sequence are in the KV
// cache already.
func (s *Session) Cached() int { return s.s.Pos() }

// Stats returns the counts and timings of the last Generate or Chat.
func (s *Session) Stats() Stats { return s.stats }

// Reset empties the sequence and the cache.
func (s *Session) Reset() {
	s.s.Reset()
	s.tokens = s.tokens[:0]
	s.logits = nil
}

// Prompt replaces the sequence with the tokens of text (BOS added if the
// vocabulary asks for it, special-token text parsed; see Model.Tokenize).
// The cache keeps the part of the old sequence the new one starts with.
func (s *Session) Prompt(text string) error {
	return s.PromptTokens(s.m.Tokenize(text))
}

// PromptTokens replaces the sequence with ids, keeping the cache if the new
// sequence extends the cached tokens.
func (s *Session) PromptTokens(ids []int32) error {
	if err := s.check(ids, 0); err != nil {
		return err
	}
	n := s.s.Pos()
	p := commonPrefix(s.tokens[:n], ids)
	switch {
	case p < n:
		// The cache holds tokens the new sequence does not have, and it
		// cannot be cut short: start over.
		s.s.Reset()
		s.logits = nil
	case p == len(ids) && s.logitsPos != p:
		// Fully cached, but the logits after the last token are gone:
		// they can be recomputed only from an empty cache.
		s.s.Reset()
		s.logits = nil
	}
	s.tokens = append(s.tokens[:0], ids...)
	return nil
}

// Append adds the tokens of text (special-token text parsed, no BOS) to
// the end of the sequence.
func (s *Session) Append(text string) error {
	return s.AppendTokens(s.m.tok.Encode(text, false, true))
}

// AppendTokens adds ids to the end of the sequence.
func (s *Session) AppendTokens(ids []int32) error {
	if err := s.check(ids, len(s.tokens)); err != nil {
		return err
	}
	s.tokens = append(s.tokens, ids...)
	return nil
}

// check validates ids, to be placed after `after` tokens, against the
// vocabulary and the context size.
func (s *Session) check(ids []int32, after int) error {
	v := s.m.m.Config().VocabSize
	for i, id := range ids {
		if id < 0 || int(id) >= v {
			return fmt.Errorf("glmrun: token %d (at %d) is outside the vocabulary [0, %d)", id, i, v)
		}
	}
	if n := after + len(ids); n > s.ContextSize() {
		if after == 0 {
			return fmt.Errorf("glmrun: the prompt has %d tokens, more than the context size %d (raise it): %w",
				len(ids), s.ContextSize(), ErrContextFull)
		}
		return fmt.Errorf("glmrun: %d tokens after %d exceed the context size %d: %w",
			len(ids), after, s.ContextSize(), ErrContextFull)
	}
	return nil
}

func commonPrefix(a, b []int32) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// eval runs the uncached tokens through the model and returns the logits
// after the whole sequence, and how many tokens it ran. The logits stay
// valid until the next eval.
func (s *Session) eval(ctx context.Context) ([]float32, int, error) {
	if len(s.tokens) == 0 {
		return nil, 0, errors.New("glmrun: the sequence is empty: give a prompt first")
	}
	n := s.s.Pos()
	if n == len(s.tokens) && s.logits != nil && s.logitsPos == n {
		return s.logits, 0, nil
	}
	if n == len(s.tokens) {
		s.s.Reset()
		n = 0
	}
	s.logits = nil
	rest := s.tokens[n:]
	ran := len(rest)
	for len(rest) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		if len(rest) == 1 {
			// One token: the decode form, as llama.cpp runs generation.
			out, err := s.s.Decode(rest[0])
			if err != nil {
				return nil, 0, fmt.Errorf("glmrun: %w", err)
			}
			s.logits = out
			break
		}
		k := min(len(rest), prefillBatch)
		out, err := s.s.PrefillLast(nil, rest[:k]) // the output head on the last row only
		if err != nil {
			return nil, 0, fmt.Errorf("glmrun: %w", err)
		}
		s.logits = out
		rest = rest[k:]
	}
	s.logitsPos = len(s.tokens)
	return s.logits, ran, nil
}
