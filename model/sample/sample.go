package sample

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Options configure a Sampler. The zero value is greedy decoding with every
// other stage off; [DefaultOptions] gives llama.cpp's defaults.
type Options struct {
	// Temperature divides the logits before the draw; <= 0 means greedy.
	Temperature float32
	// TopK keeps the K most likely tokens; <= 0 keeps all.
	TopK int
	// TopP keeps the smallest set of most likely tokens whose probability
	// reaches P; <= 0 or >= 1 turns it off.
	TopP float32
	// MinP keeps tokens at least MinP times as likely as the most likely
	// one; <= 0 turns it off.
	MinP float32
	// RepeatPenalty divides positive and multiplies negative logits of
	// recently seen tokens; 0 and 1 turn it off.
	RepeatPenalty float32
	// PresencePenalty is subtracted once from the logit of every recently
	// seen token, FrequencyPenalty once per occurrence.
	PresencePenalty  float32
	FrequencyPenalty float32
	// PenaltyLastN is the number of most recent accepted tokens the
	// penalties look at: 0 turns penalties off, < 0 means all of them.
	PenaltyLastN int
	// LogitBias is added to the logits of the given token ids before
	// anything else; -Inf bans a token.
	LogitBias map[int32]float32
	// Seed seeds the Sampler's random source: equal seeds and options give
	// equal draws.
	Seed uint64
}

// DefaultOptions returns llama.cpp's default sampling settings
// (temperature 0.8, top-k 40, top-p 0.95, min-p 0.05, penalties off over a
// window of 64 tokens) with the given seed.
func DefaultOptions(seed uint64) Options {
	return Options{
		Temperature:   0.8,
		TopK:          40,
		TopP:          0.95,
		MinP:          0.05,
		RepeatPenalty: 1,
		PenaltyLastN:  64,
		Seed:          seed,
	}
}

// ErrNoCandidates is returned when every token has a logit of -Inf after
// the logit bias and penalties, so there is nothing to pick.
var ErrNoCandidates = errors.New("sample: every token is banned (all logits -Inf)")

// cand is a candidate token: its id, its adjusted logit and, after a draw,
// its final probability.
type cand struct {
	id    int32
	logit float32
	p     float64
}

// better orders candidates best first: higher logit, then lower id.
func better(a, b cand) bool {
	return a.logit > b.logit || (a.logit == b.logit && a.id < b.id)
}

func cmpBetter(a, b cand) int {
	switch {
	case better(a, b):
		return -1
	case better(b, a):
		return 1
	}
	return 0
}

type bias struct {
	id int32
	b  float32
}

// Sampler turns logits into token ids. It keeps the recent-token window for
// the penalties and a random source; it is not safe for concurrent use (use
// one per sequence).
type Sampler struct {
	opts    Options
	biases  []bias // sorted by id
	pcg     *rand.PCG
	rng     *rand.Rand
	history []int32 // accepted tokens, oldest first (a ring when bounded)
	head    int     // next write position in a full bounded ring

	// Buffers reused across calls.
	work   []float32 // adjusted logits
	counts []int32   // per-token occurrences in the window, zero between calls
	seen   []int32   // distinct tokens of the window
	cands  []cand
	top    []TokenLogprob
	exps   []float64            // top-p: exp(logit - max) per token
	mass   [topPBuckets]float64 // top-p: probability mass per bucket
	// Verify's dense distributions of target and draft.
	pTarget, pDraft []float64
}

// New returns a Sampler for opts.
func New(opts Options) (*Sampler, error) {
	for _, v := range []struct {
		name string
		x    float32
	}{
		{"temperature", opts.Temperature}, {"top-p", opts.TopP}, {"min-p", opts.MinP},
		{"repeat penalty", opts.RepeatPenalty}, {"presence penalty", opts.PresencePenalty},
		{"frequency penalty", opts.FrequencyPenalty},
	} {
		if math.IsNaN(float64(v.x)) || math.IsInf(float64(v.x), 0) {
			return nil, fmt.Errorf("sample: %s is %v", v.name, v.x)
		}
	}
	if opts.TopP > 1 {
		return nil, fmt.Errorf("sample: top-p %v is above 1", opts.TopP)
	}
	if opts.MinP > 1 {
		return nil, fmt.Errorf("sample: min-p %v is above 1", opts.MinP)
	}
	if opts.RepeatPenalty < 0 {
		return nil, fmt.Errorf("sample: repeat penalty %v is negative", opts.RepeatPenalty)
	}
	if opts.RepeatPenalty == 0 {
		opts.RepeatPenalty = 1
	}
	s := &Sampler{opts: opts}
	for id, b := range opts.LogitBias {
		if id < 0 {
			return nil, fmt.Errorf("sample: logit bias for negative token id %d", id)
		}
		if math.IsNaN(float64(b)) || math.IsInf(float64(b), 1) {
			return nil, fmt.Errorf("sample: logit bias %v for token %d", b, id)
		}
		s.biases = append(s.biases, bias{id, b})
	}
	slices.SortFunc(s.biases, func(a, b bias) int { return int(a.id) - int(b.id) })
	s.pcg = rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15)
	s.rng = rand.New(s.pcg)
	return s, nil
}

// Options returns the options s was built with.
func (s *Sampler) Options() Options { return s.opts }

func (s *Sampler) penalties() bool {
	o := &s.opts
	return o.PenaltyLastN != 0 && (o.RepeatPenalty != 1 || o.FrequencyPenalty != 0 || o.PresencePenalty != 0)
}

// penalizing reports whether the penalties change the next logits: they
// are on and have accepted tokens to count.
func (s *Sampler) penalizing() bool { return s.penalties() && len(s.history) > 0 }

// Accept records a token of the sequence (prompt or generated) for the
// penalties. Ids outside the vocabulary are recorded but never penalised.
func (s *Sampler) Accept(id int32) {
	n := s.opts.PenaltyLastN
	switch {
	case n == 0:
	case n < 0 || len(s.history) < n:
		s.history = append(s.history, id)
	default:
		s.history[s.head] = id
		s.head = (s.head + 1) % n
	}
}

// Reset forgets the accepted tokens and reseeds the random source, so the
// Sampler behaves as if new.
func (s *Sampler) Reset() {
	s.history = s.history[:0]
	s.head = 0
	s.pcg.Seed(s.opts.Seed, s.opts.Seed^0x9e3779b97f4a7c15)
}

// Sample returns the next token for logits (one per vocabulary entry),
// which it does not modify. It does not Accept the token.
func (s *Sampler) Sample(logits []float32) (int32, error) {
	if s.opts.Temperature <= 0 && len(s.biases) == 0 && !s.penalizing() {
		return greedy(logits)
	}
	if err := s.adjust(logits); err != nil {
		return 0, err
	}
	if s.opts.Temperature <= 0 {
		best := argmax(s.work)
		if math.IsInf(float64(s.work[best]), -1) {
			return 0, ErrNoCandidates
		}
		return int32(best), nil
	}
	if err := s.distribution(); err != nil {
		return 0, err
	}
	return s.draw(), nil
}

// Greedy returns the index of the highest logit, the lowest one among
// equals. It returns -1 for an empty slice. NaNs are never chosen unless all
// logits are NaN.
func Greedy(logits []float32) int32 {
	best := -1
	for i, v := range logits {
		if v == v && (best < 0 || v > logits[best]) {
			best = i
		}
	}
	if best < 0 && len(logits) > 0 {
		best = 0
	}
	return int32(best)
}

// argmax returns the index of the highest of x (no NaNs), the lowest one
// among equals.
func argmax(x []float32) int {
	best, bestV := 0, x[0]
	for i, v := range x {
		if v > bestV {
			best, bestV = i, v
		}
	}
	return best
}

// adjust copies logits into s.work and applies the logit bias and the
// penalties (steps 1 and 2).
func (s *Sampler) adjust(logits []float32) error {
	n := len(logits)
	if n == 0 {
		return errors.New("sample: no logits")
	}
	if cap(s.work) < n {
		s.work = make([]float32, n)
	}
	s.work = s.work[:n]
	copy(s.work, logits)
	if i := firstInvalid(s.work); i >= 0 {
		return fmt.Errorf("sample: logit of token %d is %v", i, s.work[i])
	}
	for _, b := range s.biases {
		if int(b.id) >= n {
			return fmt.Errorf("sample: logit bias for token %d, but the vocabulary has %d tokens", b.id, n)
		}
		s.work[b.id] += b.b
		if v := s.work[b.id]; !(v <= math.MaxFloat32) {
			return fmt.Errorf("sample: logit of token %d overflows to %v after its bias", b.id, v)
		}
	}
	if s.penalizing() {
		return s.applyPenalties()
	}
	return nil
}

// firstInvalid returns the index of the first NaN or +Inf in x, or -1.
func firstInvalid(x []float32) int {
	for i, v := range x {
		if !(v <= math.MaxFloat32) { // NaN or +Inf (-Inf is allowed)
			return i
		}
	}
	return -1
}

func (s *Sampler) applyPenalties() error {
	n := len(s.work)
	if len(s.counts) != n {
		s.counts = make([]int32, n)
	}
	s.seen = s.seen[:0]
	for _, id := range s.history {
		if id < 0 || int(id) >= n {
			continue
		}
		if s.counts[id] == 0 {
			s.seen = append(s.seen, id)
		}
		s.counts[id]++
	}
	o := &s.opts
	for _, id := range s.seen {
		l := s.work[id]
		if l <= 0 {
			l *= o.RepeatPenalty
		} else {
			l /= o.RepeatPenalty
		}
		c := s.counts[id]
		l -= float32(c)*o.FrequencyPenalty + o.PresencePenalty
		s.work[id] = l
		s.counts[id] = 0
	}
	for _, id := range s.seen {
		if v := s.work[id]; !(v <= math.MaxFloat32) {
			return fmt.Errorf("sample: logit of token %d overflows to %v after the penalties", id, v)
		}
	}
	return nil
}

// distribution runs steps 3 to 6 on s.work and leaves the surviving
// candidates in s.cands with their final probabilities.
func (s *Sampler) distribution() error {
	o := &s.opts
	n := len(s.work)
	k := o.TopK
	if k <= 0 || k > n {
		k = n
	}
	topP := float64(o.TopP)
	usesTopP := topP > 0 && topP < 1
	switch {
	case k < n:
		s.cands = selectTop(s.work, k, s.cands)
		if math.IsInf(float64(s.cands[0].logit), -1) {
			return ErrNoCandidates
		}
		if usesTopP {
			if cut := topPCut(s.cands, topP, sumExp(s.cands, s.cands[0].logit)); cut > 0 {
				s.cands = s.cands[:cut]
			}
		}
	case usesTopP:
		if err := s.selectTopP(topP); err != nil {
			return err
		}
	default:
		if cap(s.cands) < n {
			s.cands = make([]cand, n)
		}
		s.cands = s.cands[:n]
		for i, l := range s.work {
			s.cands[i] = cand{id: int32(i), logit: l}
		}
	}
	maxLogit := s.cands[0].logit
	for _, c := range s.cands[1:] {
		maxLogit = max(maxLogit, c.logit)
	}
	if math.IsInf(float64(maxLogit), -1) {
		return ErrNoCandidates
	}
	if o.MinP > 0 {
		floor := float64(maxLogit) + math.Log(float64(o.MinP))
		kept := s.cands[:0]
		for _, c := range s.cands {
			if float64(c.logit) >= floor {
				kept = append(kept, c)
			}
		}
		s.cands = kept
	}
	// Temperature and the final softmax, in float64.
	invT := 1 / float64(o.Temperature)
	m := float64(maxLogit) * invT
	var sum float64
	for i := range s.cands {
		p := math.Exp(float64(s.cands[i].logit)*invT - m)
		s.cands[i].p = p
		sum += p
	}
	for i := range s.cands {
		s.cands[i].p /= sum
	}
	return nil
}

// draw picks a candidate with probability cand.p.
func (s *Sampler) draw() int32 {
	u := s.rng.Float64()
	var acc float64
	last := -1
	for i, c := range s.cands {
		if c.p == 0 {
			continue
		}
		acc += c.p
		last = i
		if u < acc {
			return c.id
		}
	}
	return s.cands[last].id // u fell in the rounding gap above acc
}

// selectTop returns the k best entries of logits (k <= len(logits)), best
// first, in dst's storage. It keeps a min-heap of the best seen so far, whose
// root is the worst kept; ids arrive in increasing order, so a later equal
// logit never displaces an earlier one.
func selectTop(logits []float32, k int, dst []cand) []cand {
	if cap(dst) < k {
		dst = make([]cand, 0, max(k, 64))
	}
	h := dst[:0]
	for i, l := range logits {
		if len(h) < k {
			h = append(h, cand{id: int32(i), logit: l})
			// Sift up.
			j := len(h) - 1
			for j > 0 {
				parent := (j - 1) / 2
				if !better(h[parent], h[j]) {
					break
				}
				h[parent], h[j] = h[j], h[parent]
				j = parent
			}
			continue
		}
		if !(l > h[0].logit) {
			continue
		}
		h[0] = cand{id: int32(i), logit: l}
		// Sift down: move the worse child up.
		j := 0
		for {
			w := j
			if c := 2*j + 1; c < k && better(h[w], h[c]) {
				w = c
			}
			if c := 2*j + 2; c < k && better(h[w], h[c]) {
				w = c
			}
			if w == j {
				break
			}
			h[j], h[w] = h[w], h[j]
			j = w
		}
	}
	slices.SortFunc(h, cmpBetter)
	return h
}

// sumExp returns sum(exp(logit - m)) over cs in float64.
func sumExp(cs []cand, m float32) float64 {
	var sum float64
	for _, c := range cs {
		sum += math.Exp(float64(c.logit) - float64(m))
	}
	return sum
}

// topPCut returns how many of the sorted candidates top-p keeps: the first
// prefix whose probability exp(logit - cs[0].logit)/total adds up to p.
// It returns 0 if the prefix is not reached within cs.
func topPCut(cs []cand, p, total float64) int {
	m := cs[0].logit
	var cum float64
	for i, c := range cs {
		cum += math.Exp(float64(c.logit)-float64(m)) / total
		if cum >= p {
			return i + 1
		}
	}
	return 0
}

// Top-p over the whole vocabulary avoids a full sort: logits are binned by
// their distance below the maximum into topPBuckets buckets of
// topPRange/topPBuckets each (anything further down shares the last one,
// whose tokens weigh less than e^-64 each), the buckets' probability mass is
// summed from the top until it reaches p, and only the tokens of the bucket
// where it does are sorted.
const (
	topPBuckets = 1024
	topPRange   = 64
)

// selectTopP fills s.cands with the top-p prefix of all of s.work.
func (s *Sampler) selectTopP(p float64) error {
	m := s.work[argmax(s.work)]
	if math.IsInf(float64(m), -1) {
		return ErrNoCandidates
	}
	mass := &s.mass
	clear(mass[:])
	const scale = topPBuckets / topPRange
	var total float64
	for _, l := range s.work {
		e := math.Exp(float64(l) - float64(m))
		total += e
		mass[bucket(m, l, scale)] += e
	}
	// Find the bucket where the running mass reaches p. Tokens of the
	// buckets above it are all kept (in id order); only that bucket's
	// tokens are sorted to find where the prefix ends.
	last, before := topPBuckets-1, 0.0
	for b := range mass {
		if before+mass[b] >= p*total {
			last = b
			break
		}
		before += mass[b]
	}
	s.cands = s.cands[:0]
	for i, l := range s.work {
		if bucket(m, l, scale) < last {
			s.cands = append(s.cands, cand{id: int32(i), logit: l})
		}
	}
	head := len(s.cands)
	for i, l := range s.work {
		if bucket(m, l, scale) == last {
			s.cands = append(s.cands, cand{id: int32(i), logit: l})
		}
	}
	tail := s.cands[head:]
	slices.SortFunc(tail, cmpBetter)
	cum := before / total
	for i, c := range tail {
		cum += math.Exp(float64(c.logit)-float64(m)) / total
		if cum >= p {
			s.cands = s.cands[:head+i+1]
			break
		}
	}
	return nil
}

// bucket returns the top-p bucket of logit l below the maximum m.
func bucket(m, l float32, scale float64) int {
	d := (float64(m) - float64(l)) * scale
	if !(d < topPBuckets-1) { // far below, or -Inf
		return topPBuckets - 1
	}
	return int(d)
}
