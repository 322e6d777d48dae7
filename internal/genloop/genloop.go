// Package genloop is the per-token part of a generation that the library's
// Session.Generate and the server's scheduler share: it turns each sampled
// token into display text (whole UTF-8 characters only), holds back text
// that may be the start of a stop string, and decides when the generation
// ends: an end-of-generation token, a stop string, an end condition of the
// caller's (a complete grammar, the end of a tool call), the length limit
// or a full context. Sampling and the model stay with the caller; Pick is
// the one way both sample a token and its log-probabilities.
package genloop

import (
	"fmt"
	"strings"

	"github.com/glmrun/glmrun/model/sample"
	"github.com/glmrun/glmrun/model/tokenizer"
)

// Reason says why a generation ended; Running while it goes on.
type Reason uint8

// The reasons, in the order Stream.Add checks them.
const (
	Running    Reason = iota
	EOG               // an end-of-generation token (not with Options.IgnoreEOS)
	StopString        // one of Options.Stop
	Done              // Options.Done reported true
	Length            // Options.MaxTokens tokens
	Context           // the context is full
)

// Options configure a Stream.
type Options struct {
	// Tokenizer decodes the tokens. Required.
	Tokenizer *tokenizer.Tokenizer
	// Special renders control tokens as their text.
	Special bool
	// RawBytes passes bytes that cannot form UTF-8 through unchanged; by
	// default each run of them becomes U+FFFD (tokenizer.NewValidDecoder).
	RawBytes bool
	// IgnoreEOS decodes end-of-generation tokens as text and goes on.
	IgnoreEOS bool
	// Stop lists strings that end the generation; the text before the
	// first one found is emitted, it and the rest are not. Empty strings
	// are ignored.
	Stop []string
	// MaxTokens ends the generation after that many tokens; <= 0: no limit.
	MaxTokens int
	// Markers maps control tokens to a byte emitted in their place (the
	// server's markup markers, read by its reply parser); a marker ends a
	// character the decoder holds, as the token's text would.
	Markers map[int32]byte
	// Done, if set, is asked after each token whose text did not hit a
	// stop string: true ends the generation with reason Done.
	Done func(id int32) bool
}

// Step is what one token produced: the text to emit now (possibly "") and
// whether and why the generation ended. After a stop string, StopString
// holds it.
type Step struct {
	Text       string
	Reason     Reason
	StopString string
}

// Stream follows one generation, token by token. Not safe for concurrent use.
type Stream struct {
	o         Options
	dec       *tokenizer.Decoder
	stops     []string
	held      string // decoded text that may start a stop string
	generated int
}

// New starts a generation.
func New(o Options) *Stream {
	s := &Stream{o: o}
	if o.RawBytes {
		s.dec = o.Tokenizer.NewDecoder(o.Special)
	} else {
		s.dec = o.Tokenizer.NewValidDecoder(o.Special)
	}
	for _, st := range o.Stop {
		if st != "" {
			s.stops = append(s.stops, st)
		}
	}
	return s
}

// Generated returns the number of tokens added.
func (s *Stream) Generated() int { return s.generated }

// Add takes the next generated token; contextFull reports that the
// sequence, this token included, fills the context. Once Add returns a
// Step with a Reason, the Stream is finished and must not be used again.
func (s *Stream) Add(id int32, contextFull bool) (Step, error) {
	s.generated++
	if !s.o.IgnoreEOS && s.o.Tokenizer.IsEOG(id) {
		return Step{Text: s.held + s.dec.Flush(), Reason: EOG}, nil
	}
	var piece string
	if m, ok := s.o.Markers[id]; ok {
		piece = s.dec.Flush() + string([]byte{m})
	} else {
		var err error
		if piece, err = s.dec.Add(id); err != nil {
			return Step{}, fmt.Errorf("genloop: detokenize: %w", err)
		}
	}
	buf := s.held + piece
	s.held = ""
	if i, st := firstStop(buf, s.stops); i >= 0 {
		// The decoder's held bytes come after the stop string: dropped.
		return Step{Text: buf[:i], Reason: StopString, StopString: st}, nil
	}
	var r Reason
	switch {
	case s.o.Done != nil && s.o.Done(id):
		r = Done
	case s.o.MaxTokens > 0 && s.generated >= s.o.MaxTokens:
		r = Length
	case contextFull:
		r = Context
	}
	if r != Running {
		return Step{Text: buf + s.dec.Flush(), Reason: r}, nil
	}
	keep := stopPrefixLen(buf, s.stops)
	s.held = buf[len(buf)-keep:]
	return Step{Text: buf[:len(buf)-keep]}, nil
}

// Pick samples the next token from logits after mask (if not nil) has
// limited them in place, and, when wantLogprobs, the log-probabilities of
// the chosen token and of the top most likely ones, computed from the
// logits mask left (sample.Sampler.Logprobs). It does not Accept the token
// into the sampler's history: the caller does, once the token is kept.
func Pick(smp *sample.Sampler, logits []float32, mask func([]float32) error, wantLogprobs bool, top int) (int32, sample.Logprobs, error) {
	if mask != nil {
		if err := mask(logits); err != nil {
			return 0, sample.Logprobs{}, err
		}
	}
	id, err := smp.Sample(logits)
	if err != nil {
		return 0, sample.Logprobs{}, err
	}
	if !wantLogprobs {
		return id, sample.Logprobs{}, nil
	}
	lp, err := smp.Logprobs(logits, id, top)
	return id, lp, err
}

// firstStop returns the index of the earliest stop string in text and that
// string (the first listed of those starting there), or -1, "".
func firstStop(text string, stops []string) (int, string) {
	best, which := -1, ""
	for _, st := range stops {
		if st == "" {
			continue
		}
		if i := strings.Index(text, st); i >= 0 && (best < 0 || i < best) {
			best, which = i, st
		}
	}
	return best, which
}

// stopPrefixLen returns the length of the longest suffix of text that is a
// proper prefix of a stop string: the text to hold back because a stop
// string may be completing.
func stopPrefixLen(text string, stops []string) int {
	best := 0
	for _, st := range stops {
		for n := min(len(st)-1, len(text)); n > best; n-- {
			if strings.HasSuffix(text, st[:n]) {
				best = n
				break
			}
		}
	}
	return best
}
