package glmrun

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

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
	// if that is 0 too, FitContext's: the model's training context,
	// lowered to what fits in the memory available.
	ContextSize int
}

// Session is one token sequence and its KV cache. Its methods run one at a
// time: a Session is meant for one goroutine, as one conversation, except
// that Close may be called from any goroutine at any time (a Generate
// running elsewhere then ends with an error wrapping ErrClosed after the
// step it is in).
type Session struct {
	m       *Model
	ctxSize int

	// mu is held by every method while it uses the fields below, and by
	// Generate for each step (never while it yields a token).
	mu     sync.Mutex
	s      *model.Session // nil once closed
	tokens []int32        // the sequence; tokens[:s.Pos()] are in the cache

	// logits are the logits after tokens[:logitsPos] (nil if unknown).
	logits    []float32
	logitsPos int
	masked    []float32 // a grammar's masked copy of logits

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
	if err := m.acquire(); err != nil {
		return nil, err
	}
	defer m.release()
	s, err := m.m.NewSession(model.SessionOptions{ContextSize: n, MTP: m.opts.SpecDraft > 0, CacheType: m.cache})
	if err != nil {
		return nil, fmt.Errorf("glmrun: %w", err)
	}
	return &Session{m: m, s: s, ctxSize: s.ContextSize()}, nil
}

// Close returns the session's KV cache and buffers to the device; every
// method that needs them returns an error wrapping ErrClosed after. Closing
// the Model frees them too. Closing again does nothing.
func (s *Session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.s == nil {
		return nil
	}
	ms := s.s
	s.s, s.logits = nil, nil
	if err := s.m.acquire(); err != nil {
		return nil // the Model's Close freed the cache with the devices
	}
	defer s.m.release()
	return ms.Close()
}

// lock takes s.mu and a step of the model for a method that uses the KV
// cache; it fails with an error wrapping ErrClosed if either is closed.
// unlock must follow a nil error.
func (s *Session) lock() error {
	s.mu.Lock()
	if s.s == nil {
		s.mu.Unlock()
		return errSessionClosed
	}
	if err := s.m.acquire(); err != nil {
		s.mu.Unlock()
		return err
	}
	return nil
}

// unlock ends what lock began.
func (s *Session) unlock() {
	s.m.release()
	s.mu.Unlock()
}

// Model returns the model the session runs.
func (s *Session) Model() *Model { return s.m }

// ContextSize returns the number of positions the session holds.
func (s *Session) ContextSize() int { return s.ctxSize }

// CacheBytes returns the memory the session's KV cache holds (allocated in
// full by NewSession), all devices together: ContextSize positions of the
// latents, roped keys and DSA indexer keys of every layer.
func (s *Session) CacheBytes() int64 {
	if s.lock() != nil {
		return 0
	}
	defer s.unlock()
	return s.s.CacheBytes()
}

// Tokens returns a copy of the sequence: prompt and generated tokens.
func (s *Session) Tokens() []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.tokens)
}

// Cached returns how many tokens at the start of the sequence are in the KV
// cache already (0 once the session or its model is closed).
func (s *Session) Cached() int {
	if s.lock() != nil {
		return 0
	}
	defer s.unlock()
	return s.s.Pos()
}

// Stats returns the counts and timings of the last Generate or Chat.
func (s *Session) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Reset empties the sequence and the cache. It returns an error wrapping
// ErrClosed if the session or its model is closed.
func (s *Session) Reset() error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.unlock()
	s.s.Reset()
	s.tokens = s.tokens[:0]
	s.logits = nil
	return nil
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
	if err := s.lock(); err != nil {
		return err
	}
	defer s.unlock()
	if err := s.check(ids, 0); err != nil {
		return err
	}
	n := s.s.Pos()
	p := commonPrefix(s.tokens[:n], ids)
	if p < n {
		// The cache holds tokens the new sequence does not have: keep the
		// common prefix. eval recomputes the logits after it if the new
		// sequence ends there.
		s.truncate(p)
	}
	s.tokens = append(s.tokens[:0], ids...)
	return nil
}

// Truncate cuts the sequence to its first n tokens, dropping the rest from
// the KV cache (latents and indexer keys) at no cost: nothing is copied.
// The next Generate continues after token n−1. It returns an error
// wrapping ErrClosed if the session or its model is closed, and an error
// if n is not in [0, len(Tokens())].
func (s *Session) Truncate(n int) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.unlock()
	if n < 0 || n > len(s.tokens) {
		return fmt.Errorf("glmrun: truncate to %d tokens: the sequence has %d", n, len(s.tokens))
	}
	if n < s.s.Pos() {
		s.truncate(n)
	}
	s.tokens = s.tokens[:n]
	return nil
}

// truncate cuts the cache to n ≤ its length; s.mu is held.
func (s *Session) truncate(n int) {
	s.s.Truncate(n) // n is in range: no error
	if s.logitsPos != n {
		s.logits = nil
	}
}

// Append adds the tokens of text (special-token text parsed, no BOS) to
// the end of the sequence.
func (s *Session) Append(text string) error {
	return s.AppendTokens(s.m.tok.Encode(text, false, true))
}

// AppendTokens adds ids to the end of the sequence.
func (s *Session) AppendTokens(ids []int32) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.unlock()
	if err := s.check(ids, len(s.tokens)); err != nil {
		return err
	}
	s.tokens = append(s.tokens, ids...)
	return nil
}

// check validates ids, to be placed after `after` tokens, against the
// vocabulary and the context size. s.mu is held.
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
// valid until the next eval. The caller holds lock.
func (s *Session) eval(ctx context.Context) ([]float32, int, error) {
	if len(s.tokens) == 0 {
		return nil, 0, errors.New("glmrun: the sequence is empty: give a prompt first")
	}
	n := s.s.Pos()
	if n == len(s.tokens) && s.logits != nil && s.logitsPos == n {
		return s.logits, 0, nil
	}
	if n == len(s.tokens) {
		// Every token is cached but the logits after the last are gone:
		// run the last one again.
		n--
		s.s.Truncate(n)
	}
	if r := s.s.MTPResume(s.tokens[n]); r < n {
		// The sequence changed where the MTP block no longer has the
		// trunk's hidden states: run the tokens from where it needs them.
		s.truncate(r)
		n = r
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
