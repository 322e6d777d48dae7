package model

import (
	"errors"
	"fmt"

	"github.com/glmrun/glmrun/attention"
	"github.com/glmrun/glmrun/backend/cpu"
)

// SessionOptions configures a Session.
type SessionOptions struct {
	// ContextSize is the maximum number of positions; 0 means the model's
	// training context (context_length).
	ContextSize int
	Hook        Hook   // optional activation hook
	IDHook      IDHook // optional decision hook
}

// Session is one sequence being run through a model: its latent KV cache,
// its position and its buffers. A Session is not safe for concurrent use.
type Session struct {
	m     *Model
	opts  SessionOptions
	pos   int
	cache *attention.LatentCache
	mla   []attention.MLA
	st    runState
}

// ErrContextFull is returned when tokens would not fit in the context.
var ErrContextFull = errors.New("model: context is full")

// NewSession starts an empty sequence.
func (m *Model) NewSession(opts SessionOptions) (*Session, error) {
	if opts.ContextSize < 0 {
		return nil, fmt.Errorf("model: negative context size %d", opts.ContextSize)
	}
	if opts.ContextSize == 0 {
		opts.ContextSize = m.cfg.ContextLength
	}
	c := &m.cfg
	idx := make([]int, c.Layers)
	for l := range idx {
		if m.w.Layers[l].Attn.Indexer != nil {
			idx[l] = c.IndexerDim
		}
	}
	cache, err := attention.NewLatentCache(c.Layers, opts.ContextSize, c.KVLoraRank, c.DRope, idx)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	s := &Session{m: m, opts: opts, cache: cache, mla: make([]attention.MLA, c.Layers)}
	for l := range s.mla {
		s.mla[l] = attention.MLA{Cfg: &m.attnCfg, W: &m.w.Layers[l].Attn, Layer: l, CPU: m.cpu}
	}
	return s, nil
}

// Pos returns the number of tokens in the sequence so far.
func (s *Session) Pos() int { return s.pos }

// ContextSize returns the maximum number of positions.
func (s *Session) ContextSize() int { return s.opts.ContextSize }

// Reset empties the sequence, keeping its buffers.
func (s *Session) Reset() {
	s.pos = 0
	s.cache.Reset()
}

// Prefill runs tokens through the model in one batch with the prefill
// (decompressed) form of attention, appending them to the sequence, and
// returns the logits after each token ([len(tokens)][vocab]).
func (s *Session) Prefill(tokens []int32) ([][]float32, error) {
	logits, err := s.forward(tokens, attention.Prefill)
	if err != nil {
		return nil, err
	}
	rows := make([][]float32, len(tokens))
	V := s.m.cfg.VocabSize
	for t := range rows {
		rows[t] = logits[t*V : (t+1)*V : (t+1)*V]
	}
	return rows, nil
}

// Decode runs one token through the decode (absorbed) form of attention,
// appends it to the sequence and returns the logits after it.
func (s *Session) Decode(token int32) ([]float32, error) {
	return s.forward([]int32{token}, attention.Decode)
}

// check validates a batch of tokens against the vocabulary and context.
func (s *Session) check(tokens []int32) error {
	if len(tokens) == 0 {
		return errors.New("model: no tokens")
	}
	V := s.m.cfg.VocabSize
	for i, t := range tokens {
		if t < 0 || int(t) >= V {
			return fmt.Errorf("model: token %d (at %d) is outside the vocabulary [0, %d)", t, i, V)
		}
	}
	if s.pos+len(tokens) > s.opts.ContextSize {
		return fmt.Errorf("%w: %d tokens after %d exceed the context size %d",
			ErrContextFull, len(tokens), s.pos, s.opts.ContextSize)
	}
	return nil
}

// runState holds the activations of one forward call, reused between calls.
type runState struct {
	h, x, attnOut, ffnOut []float32 // [T, E]
	scratch               attention.Scratch
	moe                   moeState
	ffn                   ffnState
	ids                   []int32
}

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// forward runs the trunk for tokens at the current position and returns
// the logits [T, V] (a new slice owned by the caller).
func (s *Session) forward(tokens []int32, form attention.Form) ([]float32, error) {
	if err := s.check(tokens); err != nil {
		return nil, err
	}
	m, c, st := s.m, &s.m.cfg, &s.st
	T, E, pos0 := len(tokens), c.Embd, s.pos
	st.h = grow(st.h, T*E)
	st.x = grow(st.x, T*E)
	st.attnOut = grow(st.attnOut, T*E)
	st.ffnOut = grow(st.ffnOut, T*E)

	// Token embedding.
	for t, tok := range tokens {
		cpu.DequantizeRow(st.h[t*E:(t+1)*E], m.w.TokenEmbd, int(tok))
	}
	s.emit(-1, "embd", st.h, T, E)

	for l := 0; l < c.Layers; l++ {
		ly := &m.w.Layers[l]
		// Attention with residual.
		for t := 0; t < T; t++ {
			cpu.RMSNorm(st.x[t*E:(t+1)*E], st.h[t*E:(t+1)*E], ly.AttnNorm, c.RMSEps)
		}
		s.emit(l, "attn_norm", st.x, T, E)
		s.mla[l].Forward(st.attnOut, st.x, T, pos0, s.cache, &st.scratch, form)
		s.emit(l, "kqv_out", st.scratch.KQV, T, c.Heads*c.DV)
		s.emitSelected(l, T, pos0)
		s.emit(l, "attn_out", st.attnOut, T, E)
		cpu.Add(st.h, st.attnOut)
		s.emit(l, "ffn_inp", st.h, T, E)

		// Feed-forward with residual.
		for t := 0; t < T; t++ {
			cpu.RMSNorm(st.x[t*E:(t+1)*E], st.h[t*E:(t+1)*E], ly.FFNNorm, c.RMSEps)
		}
		s.emit(l, "ffn_norm", st.x, T, E)
		if ly.Dense != nil {
			s.denseFFN(st.ffnOut, st.x, T, ly.Dense)
		} else {
			s.moe(l, st.ffnOut, st.x, T, ly.MoE)
		}
		s.emit(l, "ffn_out", st.ffnOut, T, E)
		cpu.Add(st.h, st.ffnOut)
		s.emit(l, "out", st.h, T, E)
	}

	// Final norm and output head.
	for t := 0; t < T; t++ {
		cpu.RMSNorm(st.x[t*E:(t+1)*E], st.h[t*E:(t+1)*E], m.w.OutputNorm, c.RMSEps)
	}
	s.emit(-1, "result_norm", st.x, T, E)
	logits := make([]float32, T*c.VocabSize)
	m.cpu.MatMul(logits, st.x, T, m.w.Output)
	s.emit(-1, "result_output", logits, T, c.VocabSize)
	s.pos += T
	return logits, nil
}

// emitSelected reports the DSA key selection of layer l to the IDHook.
func (s *Session) emitSelected(l, T, pos0 int) {
	if s.opts.IDHook == nil || s.m.w.Layers[l].Attn.Indexer == nil {
		return
	}
	k := min(s.m.cfg.IndexerTopK, pos0+T)
	ids := s.st.ids[:0]
	for t := 0; t < T; t++ {
		var sel []int32
		if t < len(s.st.scratch.Selected) {
			sel = s.st.scratch.Selected[t]
		}
		n := 0
		if sel != nil {
			ids = append(ids, sel...)
			n = len(sel)
		} else {
			for p := 0; p <= pos0+t && n < k; p++ {
				ids = append(ids, int32(p))
				n++
			}
		}
		for ; n < k; n++ {
			ids = append(ids, -1)
		}
	}
	s.st.ids = ids
	s.emitIDs(l, "top_k", ids, T, k)
}
