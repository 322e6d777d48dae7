package server

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/glmrun/glmrun/internal/genloop"
	"github.com/glmrun/glmrun/model"
	"github.com/glmrun/glmrun/model/sample"
	"github.com/glmrun/glmrun/model/tokenizer"
	"github.com/glmrun/glmrun/tensor"
)

// prefillBudget is the most prompt tokens the scheduler prefills between two
// decode steps, so that a long new prompt delays the running sequences by a
// bounded amount (chunked prefill).
const prefillBudget = 256

// errShutdown ends the sequences still running when the server closes.
var errShutdown = errors.New("server: the server is shutting down")

// Stepper runs one decode step of continuous batching: it feeds tokens[i] to
// sessions[i], for every i, and returns the logits after each, which stay
// valid until the next Step (a Stepper may reuse their memory). A batched
// Stepper reads each weight once for all the sessions. errs[i] reports a
// failure of sequence i alone; a nil errs means none failed.
type Stepper interface {
	Step(sessions []*model.Session, tokens []int32) (logits [][]float32, errs []error)
}

// RowStepper is a Stepper that also runs several tokens for a session in
// one step: the pending token and the drafts of a sequence that speculates
// (Config.SpecDraft), checked in the same batched pass as the other
// sequences' tokens. logits[i] holds the logits after each of
// sessions[i]'s tokens. Without it, each speculating sequence checks its drafts
// in a pass of its own.
type RowStepper interface {
	Stepper
	StepRows(sessions []*model.Session, tokens [][]int32) (logits [][][]float32, errs []error)
}

// SequentialStepper decodes the sessions one after the other with
// model.Session.Decode: correct, but it reads the weights once per sequence.
type SequentialStepper struct{}

// Step implements Stepper.
func (SequentialStepper) Step(sessions []*model.Session, tokens []int32) ([][]float32, []error) {
	logits := make([][]float32, len(sessions))
	var errs []error
	for i, s := range sessions {
		l, err := s.Decode(tokens[i])
		if err != nil {
			if errs == nil {
				errs = make([]error, len(sessions))
			}
			errs[i] = err
			continue
		}
		logits[i] = l
	}
	return logits, errs
}

// BatchStepper runs each step as one batched pass (model.DecodeBatchInto),
// so that the weights outside attention are read once for all the
// sequences. The logits are the ones SequentialStepper gives; they are
// written to memory the BatchStepper keeps from step to step (16 sequences
// of a 151k vocabulary take 9.7 MB, which allocated afresh would fault in
// page by page every step). The zero value is ready to use; a BatchStepper
// serves one scheduler, not concurrent calls.
type BatchStepper struct {
	logits []float32
	rows   [][]float32
}

// Step implements Stepper.
func (b *BatchStepper) Step(sessions []*model.Session, tokens []int32) ([][]float32, []error) {
	if len(sessions) == 0 {
		return nil, nil
	}
	V := sessions[0].Model().Config().VocabSize
	n := len(sessions) * V
	if cap(b.logits) < n {
		b.logits = make([]float32, n)
	}
	b.logits = b.logits[:n]
	if err := model.DecodeBatchInto(b.logits, sessions, tokens); err != nil {
		// Find which sequences fail by running them one by one.
		return SequentialStepper{}.Step(sessions, tokens)
	}
	b.rows = b.rows[:0]
	for i := range sessions {
		b.rows = append(b.rows, b.logits[i*V:(i+1)*V:(i+1)*V])
	}
	return b.rows, nil
}

// StepRows implements RowStepper with model.DecodeBatchRows.
func (b *BatchStepper) StepRows(sessions []*model.Session, tokens [][]int32) ([][][]float32, []error) {
	rows, err := model.DecodeBatchRows(sessions, tokens)
	if err != nil {
		// Find which sequences fail by running them one by one.
		logits := make([][][]float32, len(sessions))
		errs := make([]error, len(sessions))
		for i, s := range sessions {
			if logits[i], err = s.DecodeTokens(tokens[i]); err != nil {
				errs[i] = err
			}
		}
		return logits, errs
	}
	out := make([][][]float32, len(sessions))
	k := 0
	for i := range sessions {
		out[i] = rows[k : k+len(tokens[i])]
		k += len(tokens[i])
	}
	return out, nil
}

// request is one generation handed to the scheduler by a handler.
type request struct {
	ctx         context.Context
	prompt      []int32
	maxTokens   int      // most tokens to generate; <= 0: until the context is full
	stop        []string // stop strings (not emitted)
	sampler     *sample.Sampler
	logprobs    bool
	topLogprobs int
	script      []int32 // test hook: tokens to emit instead of sampling
	// markers maps the control tokens of the reply markup (<think>,
	// <tool_call>, ...) to the marker bytes the reply parser reads them
	// by (see markupMarkers); nil renders no control token (completions,
	// or a server with Config.Special, whose decoder renders them all).
	markers map[int32]byte
	// cachePrompt lets the request start from the longest prefix of its
	// prompt that a free slot's KV cache holds (llama-server's
	// cache_prompt, on by default).
	cachePrompt bool
	// specMax is the most tokens the MTP block drafts per step for this
	// request (Config.SpecDraft, lowered by speculative.n_max; 0: off).
	specMax int
	// constraint, when set, limits the reply to a grammar's sentences
	// (response_format, grammar).
	constraint *constraint
	// endAfter, when not -1, is a token that ends the reply once emitted
	// (</tool_call>, for one tool call at most).
	endAfter int32
	out      outbox
	// unwatch stops the watch that takes the request out of the queue when
	// its client goes away; the scheduler calls it on admitting the request.
	unwatch func() bool
}

// event is what the scheduler tells a handler: text (whole, valid UTF-8
// characters, with the request's markup markers between them) and the
// log-probabilities of the tokens that produced it; the last event of a
// request has finish or err set.
type event struct {
	text     string
	logprobs []tokenLogprob
	finish   string // "stop" or "length" on the last event
	stop     string // the stop string that ended the reply, if one did (Anthropic's stop_sequence)
	err      error  // a failure; the last event
	usage    usage  // on the last event
}

// tokenLogprob is the log-probability of one generated token and of the most
// likely alternatives at its position.
type tokenLogprob struct {
	piece   string // the token's bytes (maybe part of a UTF-8 character)
	logprob float64
	top     []pieceLogprob
}

type pieceLogprob struct {
	piece   string
	logprob float64
}

// outbox passes events from the scheduler to a handler without ever
// blocking the scheduler.
type outbox struct {
	mu     sync.Mutex
	events []event
	ready  chan struct{} // capacity 1: something is in events
}

func newOutbox() outbox { return outbox{ready: make(chan struct{}, 1)} }

func (o *outbox) put(e event) {
	o.mu.Lock()
	o.events = append(o.events, e)
	o.mu.Unlock()
	select {
	case o.ready <- struct{}{}:
	default:
	}
}

func (o *outbox) take() []event {
	o.mu.Lock()
	defer o.mu.Unlock()
	e := o.events
	o.events = nil
	return e
}

// sequence is a request occupying a slot.
type sequence struct {
	req       *request
	sess      *model.Session
	prefilled int               // prompt tokens in the cache
	cached    int               // of them, those the slot held already
	fed       []int32           // generated tokens run through the model after the prompt
	next      int32             // the token to feed at the next decode step
	gen       *genloop.Stream   // the reply's text and when it ends
	lps       []tokenLogprob    // of the tokens whose text gen holds back
	task      int64             // the request's number, GET /slots' id_task
	spec      model.SpecBuffers // speculative decoding's draft logits
}

// waitQueue is the FIFO of requests waiting for a slot. A request leaves it
// when the scheduler admits it or, at once, when its client goes away, so
// that the queue-depth gauge counts only requests someone still waits for
// and a client that gave up does not hold a place a new one could take.
type waitQueue struct {
	mu     sync.Mutex
	items  []*request
	size   int           // most items
	closed bool          // the scheduler stopped: nothing more is queued
	ready  chan struct{} // capacity 1: a request was pushed
	depth  *atomic.Int64 // the gauge, set to len(items) under mu
}

func newWaitQueue(size int, depth *atomic.Int64) *waitQueue {
	return &waitQueue{size: size, ready: make(chan struct{}, 1), depth: depth}
}

// push appends r; it reports false when the queue is full or closed.
func (q *waitQueue) push(r *request) bool {
	q.mu.Lock()
	if q.closed || len(q.items) >= q.size {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, r)
	q.depth.Store(int64(len(q.items)))
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return true
}

// pop removes and returns the oldest request, or nil when there is none.
func (q *waitQueue) pop() *request {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) == 0 {
		return nil
	}
	r := q.items[0]
	q.items[0] = nil
	q.items = q.items[1:]
	q.depth.Store(int64(len(q.items)))
	return r
}

// remove takes r out of the queue; it reports whether r was in it.
func (q *waitQueue) remove(r *request) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, it := range q.items {
		if it == r {
			q.items = append(q.items[:i], q.items[i+1:]...)
			q.depth.Store(int64(len(q.items)))
			return true
		}
	}
	return false
}

// close refuses further pushes and returns the requests still queued.
func (q *waitQueue) close() []*request {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	rs := q.items
	q.items = nil
	q.depth.Store(0)
	return rs
}

// len returns the number of queued requests.
func (q *waitQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// scheduler owns the model and runs every sequence: one goroutine, so the
// sessions need no locks.
type scheduler struct {
	m         *model.Model
	tok       *tokenizer.Tokenizer
	ctxSize   int
	parallel  int
	special   bool        // render every control token (Config.Special)
	mtp       bool        // sessions run the MTP block (Config.SpecDraft > 0)
	cacheType tensor.Type // the KV cache type of new sessions (the model's)
	stepper   Stepper
	metrics   *metrics
	pc        *prefixCache // nil: off

	queue *waitQueue
	quit  chan struct{}
	done  chan struct{}

	pool   []slot // free slots, most recently freed last
	nSess  int    // sessions created
	active []*sequence

	// GET /slots reads the slots through slots, a snapshot the loop
	// publishes whenever they change (see publishSlots): the handlers
	// never touch pool or active.
	slots   atomic.Pointer[[]slotInfo]
	slotIDs map[*model.Session]int // each session's slot id, in creation order
	nTasks  int64                  // requests admitted
}

func newScheduler(m *model.Model, tok *tokenizer.Tokenizer, ctxSize, parallel, queue int, special bool, st Stepper, mt *metrics) *scheduler {
	return &scheduler{
		m: m, tok: tok, ctxSize: ctxSize, parallel: parallel, special: special, stepper: st, metrics: mt,
		queue: newWaitQueue(queue, &mt.queueDepth),
		quit:  make(chan struct{}),
		done:  make(chan struct{}),
	}
}

// submit queues r; it reports false when the queue is full or the
// scheduler stopped. A queued request whose context ends leaves the queue
// at once and counts as canceled; if the scheduler takes it first, admit
// counts it, so each canceled request counts once.
func (s *scheduler) submit(r *request) bool {
	if s.closed() {
		return false
	}
	// Armed before the push, so that the scheduler, which may pop r as soon
	// as it is pushed, always finds unwatch set.
	r.unwatch = context.AfterFunc(r.ctx, func() {
		if s.queue.remove(r) {
			s.metrics.canceled.Add(1)
			r.out.put(event{err: r.ctx.Err(), usage: *newUsage(len(r.prompt), 0)})
		}
	})
	if !s.queue.push(r) {
		r.unwatch()
		return false
	}
	return true
}

// closed reports whether close was called.
func (s *scheduler) closed() bool {
	select {
	case <-s.quit:
		return true
	default:
		return false
	}
}

// close stops the scheduler: running and queued requests end with
// errShutdown. It waits for the loop to exit.
func (s *scheduler) close() {
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
	<-s.done
}

// run is the scheduler loop: admit queued requests into free slots, drop
// canceled ones, prefill new prompts (within prefillBudget), then one decode
// step for every sequence that has a token to feed.
func (s *scheduler) run() {
	defer close(s.done)
	for {
		if !s.admit() {
			s.shutdown()
			return
		}
		s.metrics.active.Store(int64(len(s.active)))
		s.dropCanceled()
		s.prefill()
		s.publishSlots()
		s.decode()
		s.metrics.active.Store(int64(len(s.active)))
		s.publishSlots()
	}
}

// admit moves queued requests into free slots, waiting for one when
// nothing is running. It reports false when the scheduler must stop.
func (s *scheduler) admit() bool {
	for len(s.active) < s.parallel {
		if s.closed() {
			return false
		}
		r := s.queue.pop()
		if r == nil {
			if len(s.active) > 0 {
				return true
			}
			select { // idle: wait for a request
			case <-s.queue.ready:
				continue
			case <-s.quit:
				return false
			}
		}
		r.unwatch() // from now on dropCanceled sees its client leave
		if err := r.ctx.Err(); err != nil {
			s.metrics.canceled.Add(1)
			r.out.put(event{err: err, usage: *newUsage(len(r.prompt), 0)})
			continue
		}
		sess, cached, err := s.session(r.prompt, r.cachePrompt)
		if err != nil {
			r.out.put(event{err: err, usage: *newUsage(len(r.prompt), 0)})
			continue
		}
		s.metrics.prefixQueries.Add(int64(len(r.prompt)))
		s.metrics.prefixHits.Add(int64(cached))
		s.nTasks++
		s.active = append(s.active, &sequence{req: r, sess: sess, prefilled: cached, cached: cached,
			gen: s.stream(r), task: s.nTasks - 1})
		// Shown busy at once, before a long prefill runs.
		s.publishSlots()
	}
	select {
	case <-s.quit:
		return false
	default:
		return true
	}
}

// stream starts the per-token loop of r's reply. Invalid UTF-8 from byte
// tokens becomes U+FFFD there, once for every consumer: the stream, the
// whole reply and stop strings.
func (s *scheduler) stream(r *request) *genloop.Stream {
	return genloop.New(genloop.Options{
		Tokenizer: s.tok, Special: s.special, Stop: r.stop, MaxTokens: r.maxTokens, Markers: r.markers,
		Done: func(id int32) bool {
			return id == r.endAfter || r.constraint.active() && r.constraint.m.Finished()
		},
	})
}

// generated returns the number of tokens seq has generated.
func (seq *sequence) generated() int { return seq.gen.Generated() }

// slot is a free session and the tokens whose latents its KV cache holds.
type slot struct {
	sess   *model.Session
	tokens []int32
}

// session returns a KV cache slot for prompt and how many of its first
// tokens it holds already: the free slot whose cache shares the longest
// prefix with prompt (with reuse off, or on a tie, the most recently
// freed), or a new one while fewer than parallel exist and none shares
// anything. When the prefix cache holds more of the prompt than that slot,
// the slot gets the cached rows. At least the prompt's last token is left
// to run, for the logits after it.
func (s *scheduler) session(prompt []int32, reuse bool) (*model.Session, int, error) {
	best, keep := -1, 0
	for i, sl := range s.pool {
		n := 0
		if reuse {
			n = min(commonPrefix(sl.tokens, prompt), len(prompt)-1)
		}
		if best < 0 || n >= keep {
			best, keep = i, n
		}
	}
	// The best free slot, or a new one while fewer than parallel exist
	// and none shares anything.
	var sess *model.Session
	if best >= 0 && (keep > 0 || s.nSess >= s.parallel) {
		sess = s.pool[best].sess
		s.pool = append(s.pool[:best], s.pool[best+1:]...)
	} else {
		var err error
		if sess, err = s.m.NewSession(model.SessionOptions{ContextSize: s.ctxSize, MTP: s.mtp, CacheType: s.cacheType}); err != nil {
			return nil, 0, fmt.Errorf("server: new KV cache slot: %w", err)
		}
		s.nSess++
		keep = 0
	}
	if reuse && s.pc != nil {
		if path := s.pc.lookup(prompt, len(prompt)-1); len(path)*s.pc.block > keep {
			// The prefix cache holds more of the prompt than the slot: keep
			// what the slot shares up to a block boundary, import the rest.
			if err := s.pc.restore(sess, path, keep); err != nil {
				sess.Reset()
				s.pool = append(s.pool, slot{sess: sess})
				return nil, 0, err
			}
			return sess, len(path) * s.pc.block, nil
		}
	}
	if err := sess.Truncate(keep); err != nil {
		return nil, 0, fmt.Errorf("server: KV cache slot: %w", err)
	}
	if r := sess.MTPResume(prompt[keep]); r < keep {
		// The MTP block's row at the cut needs the trunk's state there,
		// which the cache no longer has: run from where it does.
		keep = r
		sess.Truncate(keep) // r < keep: in range
	}
	return sess, keep, nil
}

// commonPrefix returns the length of the longest common prefix of a and b.
func commonPrefix(a, b []int32) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// release ends seq's hold on its slot. The slot keeps what its cache
// holds for the next request: the prompt and the tokens fed after it, or
// nothing after a failed step, whose cache rows are in doubt.
func (s *scheduler) release(seq *sequence, ok bool) {
	var tokens []int32
	if ok {
		tokens = append(append(tokens, seq.req.prompt[:seq.prefilled]...), seq.fed...)
	}
	if err := seq.sess.Truncate(len(tokens)); err != nil {
		seq.sess.Reset()
		tokens = nil
	}
	if s.pc != nil && len(tokens) > 0 && seq.req.cachePrompt {
		if err := s.pc.insert(tokens, seq.sess); err != nil {
			// The rows stay in the slot; only the copy failed.
			s.pc.m.prefixErrors.Add(1)
		}
	}
	s.pool = append(s.pool, slot{sess: seq.sess, tokens: tokens})
	seq.sess = nil
	for i, a := range s.active {
		if a == seq {
			s.active = append(s.active[:i], s.active[i+1:]...)
			break
		}
	}
	s.metrics.active.Store(int64(len(s.active)))
	// Settled before the client hears the end, as the metrics are.
	s.publishSlots()
}

func (s *scheduler) dropCanceled() {
	for i := 0; i < len(s.active); {
		seq := s.active[i]
		if err := seq.req.ctx.Err(); err != nil {
			s.metrics.canceled.Add(1)
			s.fail(seq, err)
			continue
		}
		i++
	}
}

func (s *scheduler) shutdown() {
	for len(s.active) > 0 {
		s.fail(s.active[0], errShutdown)
	}
	for _, r := range s.queue.close() {
		r.unwatch()
		r.out.put(event{err: errShutdown, usage: *newUsage(len(r.prompt), 0)})
	}
	for _, sl := range s.pool {
		sl.sess.Close()
	}
	s.pool = nil
	s.metrics.active.Store(0)
	s.publishSlots() // the sessions are closed: no slot is left
}

// prefill runs new prompts through the model, oldest first, up to
// prefillBudget tokens; a sequence whose prompt is complete samples its
// first token.
func (s *scheduler) prefill() {
	budget := prefillBudget
	for _, seq := range append([]*sequence(nil), s.active...) {
		if budget <= 0 {
			return
		}
		n := len(seq.req.prompt) - seq.prefilled
		if n == 0 {
			continue
		}
		n = min(n, budget)
		budget -= n
		start := time.Now()
		// The output head on the chunk's last row only: the rows before
		// it have no use for logits.
		last, err := seq.sess.PrefillLast(nil, seq.req.prompt[seq.prefilled:seq.prefilled+n])
		if err != nil {
			s.fail(seq, fmt.Errorf("server: prefill: %w", err))
			continue
		}
		s.metrics.prefillNanos.Add(int64(time.Since(start)))
		s.metrics.promptTokens.Add(int64(n))
		seq.prefilled += n
		if seq.prefilled == len(seq.req.prompt) {
			s.onLogits(seq, last)
		}
	}
}

// decode runs one step: one token for every sequence past its prompt, or,
// for a sequence that speculates, its pending token and the MTP block's
// drafts, checked in the same batched pass when the Stepper can run
// several tokens for a session (RowStepper).
func (s *scheduler) decode() {
	var seqs []*sequence
	var sessions []*model.Session
	var rows [][]int32 // the tokens each sequence feeds
	speculating := false
	for _, seq := range append([]*sequence(nil), s.active...) {
		if seq.prefilled != len(seq.req.prompt) {
			continue
		}
		toks := []int32{seq.next}
		if k := s.draftLen(seq); k > 0 {
			d, err := seq.sess.Drafts(seq.next, k, seq.req.sampler, &seq.spec)
			if err != nil {
				s.fail(seq, fmt.Errorf("server: draft: %w", err))
				continue
			}
			toks, speculating = d, true
		}
		seqs = append(seqs, seq)
		sessions = append(sessions, seq.sess)
		rows = append(rows, toks)
	}
	if len(seqs) == 0 {
		return
	}
	start := time.Now()
	var logits [][][]float32 // per sequence: the logits after each of its tokens
	var errs []error
	if speculating {
		logits, errs = s.stepRows(sessions, rows)
	} else {
		tokens := make([]int32, len(rows))
		for i, r := range rows {
			tokens[i] = r[0]
		}
		var one [][]float32
		one, errs = s.stepper.Step(sessions, tokens)
		logits = make([][][]float32, len(one))
		for i, l := range one {
			logits[i] = [][]float32{l}
		}
	}
	n := 0
	for _, r := range rows {
		n += len(r)
	}
	s.metrics.step(n, time.Since(start))
	// Each sequence samples from its own logits with its own sampler, so a
	// batch's draws run in parallel: a draw (top-p sorts) and the
	// log-probabilities each pass over GLM's 151k logits, for each of up
	// to --parallel sequences, which in series would add up to a real part
	// of a step.
	picks := make([]pick, len(seqs))
	forEach(len(seqs), func(i int) {
		if (errs == nil || errs[i] == nil) && len(rows[i]) == 1 {
			picks[i] = s.pickToken(seqs[i], logits[i][0])
		}
	})
	for i, seq := range seqs {
		if errs != nil && errs[i] != nil {
			s.fail(seq, fmt.Errorf("server: decode: %w", errs[i]))
			continue
		}
		if len(rows[i]) > 1 {
			s.acceptDrafts(seq, logits[i])
			continue
		}
		seq.fed = append(seq.fed, rows[i][0])
		s.onPick(seq, picks[i])
	}
}

// stepRows runs a step in which some sequences feed several tokens: in
// one batched pass when the Stepper is a RowStepper, else each
// speculating sequence alone (model.Session.DecodeTokens) and the others
// in one Step. logits[i] holds the logits after each token of sequence i.
func (s *scheduler) stepRows(sessions []*model.Session, rows [][]int32) ([][][]float32, []error) {
	if rs, ok := s.stepper.(RowStepper); ok {
		return rs.StepRows(sessions, rows)
	}
	logits := make([][][]float32, len(sessions))
	var errs []error
	fail := func(i int, err error) {
		if errs == nil {
			errs = make([]error, len(sessions))
		}
		errs[i] = err
	}
	var one []*model.Session
	var oneTok []int32
	var oneIdx []int
	for i, sess := range sessions {
		if len(rows[i]) == 1 {
			one, oneTok, oneIdx = append(one, sess), append(oneTok, rows[i][0]), append(oneIdx, i)
			continue
		}
		r, err := sess.DecodeTokens(rows[i])
		if err != nil {
			fail(i, err)
			continue
		}
		logits[i] = r
	}
	if len(one) > 0 {
		l, e := s.stepper.Step(one, oneTok)
		for j, i := range oneIdx {
			if e != nil && e[j] != nil {
				fail(i, e[j])
				continue
			}
			logits[i] = [][]float32{l[j]}
		}
	}
	return logits, errs
}

// draftLen is how many tokens seq's MTP block drafts this step: its
// request's speculative.n_max, within its max_tokens and the context; 0
// for a request whose penalties are on, a scripted one, or a session whose
// MTP block must run tokens again first.
func (s *scheduler) draftLen(seq *sequence) int {
	r := seq.req
	if r.specMax == 0 || len(r.script) > 0 || r.sampler.Penalties() || r.constraint != nil {
		return 0
	}
	k := r.specMax
	if r.maxTokens > 0 {
		k = min(k, r.maxTokens-seq.generated()-1)
	}
	pos := seq.sess.Pos()
	k = min(k, s.ctxSize-pos-2)
	if k < 1 || seq.sess.MTPResume(seq.next) != pos {
		return 0
	}
	return k
}

// acceptDrafts ends a speculating sequence's step: it keeps the drafts the
// trunk agrees with (model.Session.AcceptDrafts) and passes the round's
// tokens through onPick in order, as decoded tokens go.
func (s *scheduler) acceptDrafts(seq *sequence, rows [][]float32) {
	r := seq.req
	round, err := seq.sess.AcceptDrafts(rows, r.sampler, &seq.spec)
	if err != nil {
		s.fail(seq, fmt.Errorf("server: speculative decode: %w", err))
		return
	}
	s.metrics.drafted.Add(int64(round.Drafted))
	s.metrics.draftsKept.Add(int64(round.Kept))
	fed := seq.next
	for i, id := range round.Tokens {
		seq.fed = append(seq.fed, fed)
		p := pick{id: id}
		if r.logprobs && !s.tok.IsEOG(id) {
			if p.lp, p.lpErr = r.sampler.Logprobs(round.Logits[i], id, r.topLogprobs); p.lpErr != nil {
				p.lpErr = fmt.Errorf("server: logprobs: %w", p.lpErr)
			}
		}
		s.onPick(seq, p)
		if seq.sess == nil {
			return // finished: release cut the cache back to what it fed
		}
		fed = id
	}
}

// pick is a sequence's next token and, when asked for, its
// log-probabilities, or the errors that end the sequence.
type pick struct {
	id        int32
	sampleErr error           // no token: the sequence fails
	lp        sample.Logprobs // valid until the sequence's sampler runs again
	lpErr     error           // a token, but no log-probabilities: it fails after it
}

// pickToken samples seq's next token from logits (or takes the test
// script's) and computes its log-probabilities when the request wants
// them and the token does not end generation. It touches only seq's own
// request and sampler, so the sequences of a step pick in parallel.
func (s *scheduler) pickToken(seq *sequence, logits []float32) pick {
	r := seq.req
	var p pick
	if n := seq.generated(); n < len(r.script) {
		p.id = r.script[n]
		if r.logprobs && !s.tok.IsEOG(p.id) {
			if p.lp, p.lpErr = r.sampler.Logprobs(logits, p.id, r.topLogprobs); p.lpErr != nil {
				p.lpErr = fmt.Errorf("server: logprobs: %w", p.lpErr)
			}
		}
		return p
	}
	var mask func([]float32) error
	if r.constraint.active() {
		mask = r.constraint.m.Apply
	}
	if p.id, p.lp, p.sampleErr = genloop.Pick(r.sampler, logits, mask, r.logprobs, r.topLogprobs); p.sampleErr != nil {
		p.sampleErr = fmt.Errorf("server: sampling: %w", p.sampleErr)
	}
	return p
}

// forEach runs f(0) … f(n−1) on up to GOMAXPROCS goroutines.
func forEach(n int, f func(i int)) {
	workers := min(n, runtime.GOMAXPROCS(0))
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		})
	}
	wg.Wait()
}

// onLogits picks seq's next token from logits and passes on its text.
func (s *scheduler) onLogits(seq *sequence, logits []float32) {
	s.onPick(seq, s.pickToken(seq, logits))
}

// onPick takes seq's picked token: it ends the sequence on an error, the
// end of generation, a stop string or the length limit, and passes on its
// text.
func (s *scheduler) onPick(seq *sequence, p pick) {
	r := seq.req
	if p.sampleErr != nil {
		s.fail(seq, p.sampleErr)
		return
	}
	id := p.id
	r.sampler.Accept(id)
	if err := r.constraint.accept(id); err != nil {
		s.fail(seq, fmt.Errorf("server: grammar: %w", err))
		return
	}
	s.metrics.genTokens.Add(1)
	if r.logprobs && !s.tok.IsEOG(id) {
		if p.lpErr != nil {
			s.fail(seq, p.lpErr)
			return
		}
		lp := p.lp
		tl := tokenLogprob{piece: s.tok.Piece(id, true), logprob: lp.Chosen.Logprob}
		if r.topLogprobs > 0 {
			tl.top = make([]pieceLogprob, len(lp.Top))
			for i, t := range lp.Top {
				tl.top[i] = pieceLogprob{piece: s.tok.Piece(t.ID, true), logprob: t.Logprob}
			}
		}
		seq.lps = append(seq.lps, tl)
	}
	// The context holds the prompt and the whole reply.
	st, err := seq.gen.Add(id, len(r.prompt)+seq.generated()+1 >= s.ctxSize)
	if err != nil {
		s.fail(seq, fmt.Errorf("server: %w", err))
		return
	}
	switch st.Reason {
	case genloop.Running:
		if st.Text != "" {
			r.out.put(event{text: st.Text, logprobs: seq.lps})
			seq.lps = nil
		}
		seq.next = id
	case genloop.Length, genloop.Context:
		s.finish(seq, "length", st.Text, "")
	default: // EOG, a stop string, the grammar's or the tool call's end
		s.finish(seq, "stop", st.Text, st.StopString)
	}
}

// finish ends seq with reason and the reply's last text; stop is the stop
// string that ended it, if one did.
func (s *scheduler) finish(seq *sequence, reason, text, stop string) {
	// Metrics and the slot are settled before the client hears the end, so a
	// client that reads /metrics right after its reply sees its sequence done.
	s.metrics.completed.Add(1)
	s.release(seq, true)
	seq.req.out.put(event{
		text: text, logprobs: seq.lps, finish: reason, stop: stop,
		usage: *cachedUsage(len(seq.req.prompt), seq.generated(), seq.cached),
	})
}

// fail ends seq with err.
func (s *scheduler) fail(seq *sequence, err error) {
	s.release(seq, false)
	seq.req.out.put(event{err: err, usage: *cachedUsage(len(seq.req.prompt), seq.generated(), seq.cached)})
}
