package glmrun

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/glmrun/glmrun/internal/genloop"
	"github.com/glmrun/glmrun/model/grammar"
	"github.com/glmrun/glmrun/model/sample"
)

// SampleOptions configure token selection (package model/sample): logit
// bias, penalties, top-k, top-p, min-p, temperature and seed. The zero value
// is greedy decoding; sample.DefaultOptions gives llama.cpp's defaults.
type SampleOptions = sample.Options

// DefaultSampleOptions returns llama.cpp's default sampling settings
// (temperature 0.8, top-k 40, top-p 0.95, min-p 0.05) with the given seed
// (sample.DefaultOptions).
func DefaultSampleOptions(seed uint64) SampleOptions { return sample.DefaultOptions(seed) }

// TokenLogprob is a token id with its log-probability.
type TokenLogprob = sample.TokenLogprob

// GenerateOptions configure Generate. The zero value generates greedily
// until an end-of-generation token or a full context.
type GenerateOptions struct {
	SampleOptions

	// MaxTokens is the most tokens to generate; <= 0 means no limit.
	MaxTokens int
	// Stop lists strings that end generation. The text up to a stop string
	// is emitted; the stop string and anything after it are not. Text that
	// could be the start of a stop string is held back until it is not.
	Stop []string
	// IgnoreEOS keeps generating past end-of-generation tokens.
	IgnoreEOS bool
	// Special renders control tokens ("<|user|>", ...) in Token.Text.
	Special bool
	// RawBytes passes bytes that do not form valid UTF-8 (a byte-level
	// token the model emitted where no character can follow) through to
	// Token.Text unchanged, for a program that prints them to a terminal
	// as llama-cli does. By default each run of them becomes one U+FFFD.
	RawBytes bool
	// Logprobs sets Token.Logprob: the log-softmax of the raw logits
	// (before sampling) at the chosen token.
	Logprobs bool
	// TopLogprobs is the number of most likely alternatives reported in
	// Token.Top (Logprob is set too when it is > 0).
	TopLogprobs int
	// NoSpeculation decodes this generation token by token even when the
	// model was loaded with Options.SpecDraft. Speculation is off by itself
	// while the sampler's penalties are on (a draft's distribution would
	// depend on drafts not yet accepted), and with a Grammar.
	NoSpeculation bool
	// Grammar, if set, limits the generated text to the sentences of a
	// grammar (package model/grammar: GBNF, or grammar.SchemaGrammar for a
	// JSON schema): at each step the tokens that cannot continue one are
	// masked out before sampling, and the generation ends with StopGrammar
	// once the sentence is complete and nothing can follow. Logprobs are
	// those of the masked distribution.
	Grammar *grammar.Grammar
}

// Token is one generated token.
type Token struct {
	ID int32
	// Text is the display text this token completes: whole, valid UTF-8
	// characters (U+FFFD for bytes that cannot form one, unless
	// GenerateOptions.RawBytes), possibly "" while a character (or a
	// possible stop string) is incomplete. The Texts of a generation
	// concatenate to its text.
	Text string
	// Logprob is the token's log-probability when GenerateOptions asked
	// for logprobs.
	Logprob float64
	// Top are the most likely tokens at this position, best first, when
	// GenerateOptions.TopLogprobs > 0.
	Top []TokenLogprob
	// Stop is set on the last token of a generation: why it ended there.
	Stop StopReason
}

// StopReason says why a generation ended.
type StopReason string

// Reasons a generation ends.
const (
	StopNone     StopReason = ""         // still running, or ended by an error
	StopEOG      StopReason = "eog"      // an end-of-generation token (EOS, EOT, EOM)
	StopString   StopReason = "stop"     // a stop string
	StopLength   StopReason = "length"   // GenerateOptions.MaxTokens
	StopContext  StopReason = "context"  // the context is full
	StopCanceled StopReason = "canceled" // the context.Context was canceled
	StopBreak    StopReason = "break"    // the caller stopped iterating
	StopGrammar  StopReason = "grammar"  // GenerateOptions.Grammar's sentence is complete
)

// Stats are the counts and timings of one generation.
type Stats struct {
	// PromptTokens were run through the model before the first token
	// (the uncached part of the sequence), in PromptTime.
	PromptTokens int
	PromptTime   time.Duration
	// Generated tokens were sampled; EvalTokens of them were run through
	// the model (the last one never is), in EvalTime (sampling included).
	Generated  int
	EvalTokens int
	EvalTime   time.Duration
	// Drafted tokens were proposed by the MTP block (Options.SpecDraft) in
	// SpecRounds verification passes, and Accepted of them kept by the
	// trunk's check; each pass also yields the token the trunk chose after
	// the kept drafts.
	Drafted, Accepted, SpecRounds int
	Stop                          StopReason
}

// Generate continues the sequence, yielding each sampled token as it is
// produced; every token is appended to the sequence. It ends with the reason
// in the last Token's Stop (and in Stats), or with an error: a canceled ctx
// yields an error wrapping ctx's error, a closed Session or Model one
// wrapping ErrClosed. The sequence must not be empty. Breaking out of the
// loop is allowed, and so is calling the Session's methods in its body.
func (s *Session) Generate(ctx context.Context, opts GenerateOptions) iter.Seq2[Token, error] {
	return func(yield func(Token, error) bool) {
		var stats Stats
		err := s.generate(ctx, opts, &stats, yield)
		s.mu.Lock()
		s.stats = stats
		s.mu.Unlock()
		if err != nil {
			yield(Token{}, err)
		}
	}
}

// generate runs Generate's loop, keeping its counts in stats.
func (s *Session) generate(ctx context.Context, opts GenerateOptions, stats *Stats, yield func(Token, error) bool) error {
	if opts.TopLogprobs < 0 {
		return fmt.Errorf("glmrun: negative TopLogprobs %d", opts.TopLogprobs)
	}
	smp, err := sample.New(opts.SampleOptions)
	if err != nil {
		return fmt.Errorf("glmrun: %w", err)
	}
	if err := s.lock(); err != nil {
		return err
	}
	// The penalties see the prompt too, as in llama.cpp.
	hist := s.tokens
	if w := opts.PenaltyLastN; w >= 0 && len(hist) > w {
		hist = hist[len(hist)-w:]
	}
	for _, id := range hist {
		smp.Accept(id)
	}
	s.unlock()
	gopts := genloop.Options{
		Tokenizer: s.m.tok, Special: opts.Special, RawBytes: opts.RawBytes, IgnoreEOS: opts.IgnoreEOS,
		Stop: opts.Stop, MaxTokens: opts.MaxTokens,
	}
	var gm *grammar.Matcher
	if opts.Grammar != nil {
		v, err := s.m.GrammarVocab()
		if err != nil {
			return err
		}
		if gm, err = opts.Grammar.NewMatcher(v); err != nil {
			return fmt.Errorf("glmrun: %w", err)
		}
		gopts.Done = func(int32) bool { return gm.Finished() }
	}
	gen := genloop.New(gopts)
	var sp *speculator
	if k := s.m.opts.SpecDraft; k > 0 && !opts.NoSpeculation && !smp.Penalties() && gm == nil {
		sp = &speculator{k: k}
		defer s.dropDrafts(sp)
	}
	for n := 0; ; n++ {
		tok, sampled, filled, err := s.step(ctx, n, smp, gm, opts, stats, sp)
		if err != nil || !sampled {
			return err
		}
		st, err := gen.Add(tok.ID, filled)
		if err != nil {
			return fmt.Errorf("glmrun: %w", err)
		}
		tok.Text, tok.Stop = st.Text, stopReasons[st.Reason]
		stats.Stop = tok.Stop
		if !yield(tok, nil) {
			if stats.Stop == StopNone {
				stats.Stop = StopBreak
			}
			return nil
		}
		if tok.Stop != StopNone {
			return nil
		}
	}
}

// stopReasons names genloop's reasons (Done: the grammar is complete).
var stopReasons = [...]StopReason{
	genloop.Running:    StopNone,
	genloop.EOG:        StopEOG,
	genloop.StopString: StopString,
	genloop.Done:       StopGrammar,
	genloop.Length:     StopLength,
	genloop.Context:    StopContext,
}

// step runs the n-th step of a generation under the session's lock: it
// evaluates the sequence, samples a token and appends it to the sequence.
// sampled is false if the sequence already fills the context; filled
// reports that the new token fills it.
func (s *Session) step(ctx context.Context, n int, smp *sample.Sampler, gm *grammar.Matcher, opts GenerateOptions, stats *Stats, sp *speculator) (tok Token, sampled, filled bool, err error) {
	if err := s.lock(); err != nil {
		return Token{}, false, false, err
	}
	defer s.unlock()
	if sp != nil && n > 0 {
		if len(sp.queue) == 0 {
			if err := s.speculate(ctx, smp, opts, stats, sp); err != nil {
				return Token{}, false, false, err
			}
		}
		if len(sp.queue) > 0 {
			return s.popDraft(smp, opts, stats, sp)
		}
	}
	if len(s.tokens) >= s.ctxSize {
		stats.Stop = StopContext
		return Token{}, false, false, nil
	}
	if err := ctx.Err(); err != nil {
		stats.Stop = StopCanceled
		return Token{}, false, false, fmt.Errorf("glmrun: generation stopped: %w", err)
	}
	start := time.Now()
	logits, ran, err := s.eval(ctx)
	if err != nil {
		if ctx.Err() != nil {
			stats.Stop = StopCanceled
			return Token{}, false, false, fmt.Errorf("glmrun: generation stopped: %w", ctx.Err())
		}
		return Token{}, false, false, err
	}
	want := opts.Logprobs || opts.TopLogprobs > 0
	var mask func([]float32) error
	if gm != nil {
		// The mask writes -Inf into the logits: a copy, since the session
		// keeps them for the next step.
		s.masked = append(s.masked[:0], logits...)
		logits, mask = s.masked, gm.Apply
	}
	id, lp, err := genloop.Pick(smp, logits, mask, want, opts.TopLogprobs)
	if err != nil {
		return Token{}, false, false, fmt.Errorf("glmrun: %w", err)
	}
	if gm != nil {
		if err := gm.Accept(id); err != nil {
			return Token{}, false, false, fmt.Errorf("glmrun: %w", err)
		}
	}
	smp.Accept(id)
	tok = Token{ID: id}
	if want {
		tok.Logprob = lp.Chosen.Logprob
		if opts.TopLogprobs > 0 {
			tok.Top = slices.Clone(lp.Top)
		}
	}
	if n == 0 {
		stats.PromptTokens, stats.PromptTime = ran, time.Since(start)
	} else {
		stats.EvalTokens += ran
		stats.EvalTime += time.Since(start)
	}
	s.tokens = append(s.tokens, id)
	stats.Generated++
	return tok, true, len(s.tokens) >= s.ctxSize, nil
}
