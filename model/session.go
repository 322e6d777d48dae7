package model

import (
	"errors"
	"fmt"

	"github.com/glmrun/glmrun/attention"
	"github.com/glmrun/glmrun/backend"
	"github.com/glmrun/glmrun/internal/meminfo"
	"github.com/glmrun/glmrun/internal/units"
	"github.com/glmrun/glmrun/tensor"
)

// DefaultContextSize is what FitContext falls back to when it cannot tell
// how much memory there is (llama.cpp's default -c is 4096 too).
const DefaultContextSize = 4096

// DefaultCacheType is the KV cache type a session gets when none is asked
// for: F16, as llama.cpp's default, on every backend.
const DefaultCacheType = tensor.F16

// cacheShare is the part of the available memory FitContext gives the KV
// caches: the rest is for the weights' pages, the buffers of a step and
// everything else on the machine.
const cacheShare = 0.75

// SessionOptions configures a Session.
type SessionOptions struct {
	// ContextSize is the number of positions of the session's KV cache,
	// which is allocated in full by NewSession; 0 means FitContext's: the
	// model's training context (context_length), lowered to what fits in
	// the memory available.
	ContextSize int
	Hook        Hook   // optional activation hook
	IDHook      IDHook // optional decision hook
	// CacheType is the element type of the KV cache's rows (latent and
	// indexer keys): one of backend.CacheTypes(). The zero value is
	// tensor.F32, float32 rows (the numbers llama.cpp gives with
	// --cache-type-k f32); F16, BF16 and Q8_0 store each row converted as
	// llama.cpp's cache types do, in 1/2 and 17/64 of the memory.
	CacheType tensor.Type
	// MTP runs the model's MTP block along with the trunk, so that the
	// session can draft tokens (Draft, DraftNext); the model must be
	// loaded with Options.MTP. Each forward call then also runs the block
	// over the new positions, and the cache holds its latents too.
	MTP bool
}

// Session is one sequence being run through a model: its latent KV cache
// (one copy per device), its position and its buffers. A Session is not
// safe for concurrent use.
type Session struct {
	m      *Model
	opts   SessionOptions
	pos    int
	shards []*sessionShard
	host   hostState
	steps  []step           // per device, reused by every forward call
	parts  []backend.Buffer // per device, for collectives
	tok    [1]int32
	mtp    *mtpState // nil without SessionOptions.MTP
	exp    expertScratch
}

// expertScratch is a session's buffers on the routed experts' CPU device
// (Options.CPUMoE): the rows that cross to it, the routed sum that crosses
// back, and the router's.
type expertScratch struct {
	x, out, logits, w backend.Scratch
	ids               backend.ScratchIDs
}

func (e *expertScratch) bufs() []*backend.Scratch {
	return []*backend.Scratch{&e.x, &e.out, &e.logits, &e.w}
}

// sessionShard is a Session's state on one device.
type sessionShard struct {
	sh      *shard
	dev     backend.Device
	cache   *attention.LatentCache
	mla     []attention.MLA
	scratch *attention.Scratch

	h, x, attnOut, ffnOut, tmp backend.Scratch // [T, E]
	gate, up                   backend.Scratch // [T, F] of this device
	routerLogits, routerW      backend.Scratch // [T, X], [T, K]
	logits                     backend.Scratch // [T, V] (device 0)
	ids                        backend.ScratchIDs
}

// hostState holds host copies for hooks.
type hostState struct {
	a, b []float32
	ids  []int32
	moe  []float32 // the rows crossing to and from the experts' CPU device
}

// ErrContextFull is wrapped by the errors for tokens that would not fit
// in a session's context.
var ErrContextFull = attention.ErrContextFull

// MaxContext returns the most positions the model is made for: its
// training context (context_length), or what its RoPE scaling extends that
// to (factor × original_context_length), whichever is more. Positions past
// it get rotations the model never saw.
func (c *Config) MaxContext() int {
	n := c.ContextLength
	if c.RopeScaling != "none" && c.RopeFactor > 1 {
		n = max(n, int(float64(c.RopeFactor)*float64(c.RopeOrigCtx)))
	}
	return n
}

// CheckContext returns an error naming both numbers if a context of n
// positions is more than MaxContext.
func (c *Config) CheckContext(n int) error {
	switch max := c.MaxContext(); {
	case n <= max:
		return nil
	case max > c.ContextLength:
		return fmt.Errorf("model: context size %d is more than the %d positions of the model's %s RoPE scaling (factor %g × original context %d)",
			n, max, c.RopeScaling, c.RopeFactor, c.RopeOrigCtx)
	default:
		return fmt.Errorf("model: context size %d is more than the model's training context %d (context_length, which no RoPE scaling extends)",
			n, c.ContextLength)
	}
}

// NewSession starts an empty sequence, allocating its KV cache on every
// device for opts.ContextSize positions (see SessionOptions). A cache that
// does not fit a device's memory budget is an error naming the device.
func (m *Model) NewSession(opts SessionOptions) (*Session, error) {
	if opts.ContextSize < 0 {
		return nil, fmt.Errorf("model: negative context size %d", opts.ContextSize)
	}
	if opts.ContextSize == 0 {
		opts.ContextSize, _ = m.FitContext(opts.CacheType, opts.MTP, 1)
	}
	if err := m.cfg.CheckContext(opts.ContextSize); err != nil {
		return nil, err
	}
	if m.devs == nil {
		return nil, errors.New("model: the model is closed")
	}
	if opts.MTP && !m.HasMTP() {
		return nil, errors.New("model: a session with MTP needs a model loaded with Options.MTP")
	}
	c := &m.cfg
	blocks, idx := m.cacheLayers(opts.MTP)
	s := &Session{m: m, opts: opts}
	for _, sh := range m.shards {
		dev := sh.dev
		cache, err := attention.NewLatentCache(dev, blocks, opts.ContextSize, c.KVLoraRank, c.DRope, idx, opts.CacheType)
		if err != nil {
			s.Close() // the caches of the devices before
			return nil, fmt.Errorf("model: KV cache of %d positions: %w", opts.ContextSize, err)
		}
		ss := &sessionShard{sh: sh, dev: dev, cache: cache, mla: make([]attention.MLA, blocks),
			scratch: attention.NewScratch(dev)}
		for l := range ss.mla {
			ss.mla[l] = attention.MLA{Cfg: &m.attnCfg, W: sh.layers[l].attn, Layer: l, Dev: dev,
				SharedIndexer: c.IndexerShared(l)}
		}
		for _, b := range ss.bufs() {
			b.Dev = dev
		}
		ss.ids.Dev = dev
		s.shards = append(s.shards, ss)
	}
	if opts.MTP {
		d0 := s.shards[0].dev
		s.mtp = &mtpState{next: make([]int32, opts.ContextSize), hidden: backend.Scratch{Dev: d0}, in: backend.Scratch{Dev: d0}, out: backend.Scratch{Dev: d0}}
	}
	if m.experts != nil {
		for _, b := range s.exp.bufs() {
			b.Dev = m.experts
		}
		s.exp.ids.Dev = m.experts
	}
	// moe sums shared-expert parts in s.parts, in a batched step too,
	// where the session may never have run a forward of its own.
	s.steps = make([]step, len(s.shards))
	s.parts = make([]backend.Buffer, len(s.shards))
	return s, nil
}

// cacheLayers returns the number of blocks a session's KV cache holds
// (the trunk, and the MTP block with mtp) and each one's indexer key
// width (0 without an indexer of its own).
func (m *Model) cacheLayers(mtp bool) (blocks int, indexDims []int) {
	blocks = m.cfg.Layers
	if mtp {
		blocks++
	}
	indexDims = make([]int, blocks)
	for l := range indexDims {
		if m.w.Layers[l].Attn.Indexer != nil {
			indexDims[l] = m.cfg.IndexerDim
		}
	}
	return blocks, indexDims
}

// CacheBytesPerToken returns the bytes one position of a session's KV
// cache of type typ takes, all devices together (under tensor parallelism
// each holds a whole copy); mtp counts the MTP block's latents too.
func (m *Model) CacheBytesPerToken(typ tensor.Type, mtp bool) int64 {
	_, idx := m.cacheLayers(mtp)
	return int64(len(m.devs)) * attention.CacheBytesPerToken(typ, m.cfg.KVLoraRank, m.cfg.DRope, idx)
}

// FitContext returns the context size of sessions (KV caches of type typ,
// with the MTP block's latents when mtp) that ask for none: the model's
// training context (context_length), lowered, when sessions such caches
// do not fit in three quarters of the memory available, to the largest
// multiple of 256 positions that does, with a note saying so (empty when
// the training context fits). The memory is the devices' budget left when
// they have one, else the host's available memory (Linux MemAvailable);
// where neither is known it is DefaultContextSize at most.
func (m *Model) FitContext(typ tensor.Type, mtp bool, sessions int) (n int, note string) {
	train := m.cfg.ContextLength
	if train <= 0 {
		train = DefaultContextSize
	}
	sessions = max(sessions, 1)
	per := m.CacheBytesPerToken(typ, mtp)
	if per <= 0 { // rows that are not whole blocks of typ: NewLatentCache says so
		return min(train, DefaultContextSize), ""
	}
	// Every device holds a whole cache: the one with the least left bounds
	// them all.
	avail, where, budgeted := int64(0), "left in the devices' budgets", false
	for _, d := range m.devs {
		if b := d.Budget(); b > 0 {
			if left := b - d.Used(); !budgeted || left < avail {
				avail, budgeted = left, true
			}
		}
	}
	if budgeted {
		avail *= int64(len(m.devs))
	} else {
		host, ok := meminfo.Available()
		if !ok {
			return min(train, DefaultContextSize), ""
		}
		avail, where = host, "available"
	}
	fit := int64(float64(avail)*cacheShare) / (per * int64(sessions))
	if fit >= int64(train) {
		return train, ""
	}
	n = max(int(fit)/256*256, min(train, 256))
	return n, fmt.Sprintf("context lowered from the training context of %d to %d tokens: %d %s KV cache(s) of %s per token fit in 3/4 of the %.1f GiB of memory %s (-c sets it)",
		train, n, sessions, attention.CacheTypeName(typ), units.Bytes(per), float64(avail)/(1<<30), where)
}

func (ss *sessionShard) bufs() []*backend.Scratch {
	return []*backend.Scratch{&ss.h, &ss.x, &ss.attnOut, &ss.ffnOut, &ss.tmp, &ss.gate, &ss.up,
		&ss.routerLogits, &ss.routerW, &ss.logits}
}

// Close returns the session's device memory (KV cache and buffers); the
// session must not be used after.
func (s *Session) Close() error {
	for _, ss := range s.shards {
		ss.cache.Free()
		ss.scratch.Free()
		for _, b := range ss.bufs() {
			b.Free()
		}
		ss.ids.Free()
	}
	if s.mtp != nil {
		s.mtp.hidden.Free()
		s.mtp.in.Free()
		s.mtp.out.Free()
	}
	for _, b := range s.exp.bufs() {
		b.Free()
	}
	s.exp.ids.Free()
	s.shards = nil
	return nil
}

// Model returns the model the session runs.
func (s *Session) Model() *Model { return s.m }

// Pos returns the number of tokens in the sequence so far.
func (s *Session) Pos() int { return s.pos }

// ContextSize returns the number of positions of the session's KV cache.
func (s *Session) ContextSize() int { return s.opts.ContextSize }

// CacheBytes returns the device memory the session's KV cache holds, all
// devices together (under tensor parallelism each holds a whole copy).
func (s *Session) CacheBytes() int64 {
	n := int64(0)
	for _, ss := range s.shards {
		n += ss.cache.Bytes()
	}
	return n
}

// Reset empties the sequence, keeping its buffers.
func (s *Session) Reset() {
	s.pos = 0 // cache rows are rewritten before they are read again
	if s.mtp != nil {
		s.mtp.pos, s.mtp.hN, s.mtp.outOK = 0, 0, false
	}
}

// Truncate drops the positions from n on, keeping the first n tokens'
// latents and indexer keys: the next token runs at position n. It copies
// and frees nothing (rows past the end are rewritten before they are read
// again), so it costs the same for any n. n must be in [0, Pos()]. The
// MTP block's rows (SessionOptions.MTP) rewind with the trunk's.
func (s *Session) Truncate(n int) error {
	if n < 0 || n > s.pos {
		return fmt.Errorf("model: truncate to %d positions: the sequence has %d", n, s.pos)
	}
	s.pos = n
	if mt := s.mtp; mt != nil {
		// Row n−1 stays if the sequence goes on with the token it was
		// made from (mtpRows checks).
		mt.pos = min(mt.pos, n)
		mt.outOK = false
	}
	return nil
}

// Prefill runs tokens through the model in one batch with the prefill
// (decompressed) form of attention, appending them to the sequence, and
// returns the logits after each token ([len(tokens)][vocab]).
func (s *Session) Prefill(tokens []int32) ([][]float32, error) {
	return s.forwardRows(tokens, attention.Prefill)
}

// forwardRows runs tokens in form and returns the logits after each.
func (s *Session) forwardRows(tokens []int32, form attention.Form) ([][]float32, error) {
	logits, err := s.forward(tokens, form, nil, false)
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
	s.tok[0] = token
	return s.forward(s.tok[:], attention.Decode, nil, false)
}

// DecodeTokens runs several tokens through the model in one pass with the
// decode (absorbed) form of attention, appending them to the sequence, and
// returns the logits after each ([len(tokens)][vocab]). The products are
// batched, so the weights are read once for all the tokens; with
// Options.BatchInvariant row t equals what Decode would give for token t,
// bit for bit. Speculative decoding verifies its drafts with it.
func (s *Session) DecodeTokens(tokens []int32) ([][]float32, error) {
	return s.forwardRows(tokens, attention.Decode)
}

// PrefillLast is Prefill computing and returning only the logits after
// the last token (the output head, a large matrix, runs on one row), as
// prompt processing needs; dst, when it holds the vocabulary size, receives
// them. With a Hook every row is computed, so that the hook sees them all.
func (s *Session) PrefillLast(dst []float32, tokens []int32) ([]float32, error) {
	return s.forward(tokens, attention.Prefill, dst, true)
}

// DecodeInto is Decode writing the logits to dst (len(dst) must be the
// vocabulary size). Without hooks, on the CPU backend in steady state, it
// allocates nothing.
func (s *Session) DecodeInto(dst []float32, token int32) error {
	if len(dst) != s.m.cfg.VocabSize {
		return fmt.Errorf("model: DecodeInto: %d logits, want the vocabulary size %d", len(dst), s.m.cfg.VocabSize)
	}
	s.tok[0] = token
	_, err := s.forward(s.tok[:], attention.Decode, dst, false)
	return err
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
		return fmt.Errorf("model: %w: %d tokens after %d exceed the context size %d",
			ErrContextFull, len(tokens), s.pos, s.opts.ContextSize)
	}
	return nil
}

// CacheValues returns the float32 values ExportRows writes per position:
// every layer's latent row and indexer key.
func (s *Session) CacheValues() int { return s.shards[0].cache.PositionValues() }

// ExportRows copies the cache rows of positions [from, from+n) (all layers,
// indexer keys included) to dst, n × CacheValues() values: what ImportRows
// restores in a session of the same model. The positions must be in the
// sequence (from+n ≤ Pos()). A session with MTP cannot export: its block's
// rows depend on the token after each position and on hidden states the
// cache does not hold.
func (s *Session) ExportRows(dst []float32, from, n int) error {
	if s.mtp != nil {
		return errors.New("model: a session with MTP cannot export its cache rows")
	}
	if from < 0 || n < 0 || from+n > s.pos {
		return fmt.Errorf("model: export positions [%d, %d): the sequence has %d", from, from+n, s.pos)
	}
	return s.shards[0].cache.Export(dst, from, n)
}

// ImportRows writes rows made by ExportRows to positions [from, from+n) of
// every device's cache and makes the sequence from+n tokens long: the
// tokens those rows were computed from follow the first from tokens of
// this sequence, which it must hold (from ≤ Pos()). Attention over
// imported rows computes what it would over rows this session computed.
func (s *Session) ImportRows(src []float32, from, n int) error {
	if s.mtp != nil {
		return errors.New("model: a session with MTP cannot import cache rows")
	}
	if from < 0 || from > s.pos {
		return fmt.Errorf("model: import at position %d: the sequence has %d", from, s.pos)
	}
	for _, ss := range s.shards {
		if err := ss.cache.Import(src, from, n); err != nil {
			return fmt.Errorf("model: import positions [%d, %d): %w", from, from+n, err)
		}
	}
	s.pos = from + n
	return nil
}
