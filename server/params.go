package server

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"

	"github.com/glmrun/glmrun/model/grammar"
	"github.com/glmrun/glmrun/model/sample"
)

// Limits on request parameters.
const (
	maxStopStrings = 16
	maxTopLogprobs = 20
)

// samplingParams are the sampling fields common to chat and completions.
type samplingParams struct {
	temperature, topP, minP           *float64
	topK                              *int
	seed                              *int64
	presencePenalty, frequencyPenalty *float64
	logitBias                         map[string]float64
}

// sampler checks p and builds a Sampler: llama-server's defaults
// (sample.DefaultOptions) for the fields the request leaves out; penalties
// count every generated token, as OpenAI's do.
func (s *Server) sampler(p samplingParams) (*sample.Sampler, *apiError) {
	seed := rand.Uint64()
	if p.seed != nil {
		seed = uint64(*p.seed)
	}
	o := sample.DefaultOptions(seed)
	if v := p.temperature; v != nil {
		if !(*v >= 0 && *v <= 2) {
			return nil, invalid("temperature", "temperature must be between 0 and 2, not %g", *v)
		}
		o.Temperature = float32(*v)
	}
	if v := p.topP; v != nil {
		if !(*v > 0 && *v <= 1) {
			return nil, invalid("top_p", "top_p must be in (0, 1], not %g", *v)
		}
		o.TopP = float32(*v)
	}
	if v := p.minP; v != nil {
		if !(*v >= 0 && *v <= 1) {
			return nil, invalid("min_p", "min_p must be between 0 and 1, not %g", *v)
		}
		o.MinP = float32(*v)
	}
	if v := p.topK; v != nil {
		if *v < -1 {
			return nil, invalid("top_k", "top_k must be -1 (off), 0 (off) or positive, not %d", *v)
		}
		o.TopK = max(*v, 0)
	}
	o.PenaltyLastN = 0
	for _, pen := range []struct {
		name string
		v    *float64
		dst  *float32
	}{{"presence_penalty", p.presencePenalty, &o.PresencePenalty}, {"frequency_penalty", p.frequencyPenalty, &o.FrequencyPenalty}} {
		if pen.v == nil {
			continue
		}
		if !(*pen.v >= -2 && *pen.v <= 2) {
			return nil, invalid(pen.name, "%s must be between -2 and 2, not %g", pen.name, *pen.v)
		}
		*pen.dst = float32(*pen.v)
		if *pen.v != 0 {
			o.PenaltyLastN = -1
		}
	}
	if len(p.logitBias) > 0 {
		o.LogitBias = make(map[int32]float32, len(p.logitBias))
		for k, b := range p.logitBias {
			id, err := strconv.ParseInt(k, 10, 32)
			if err != nil || id < 0 || int(id) >= s.tok.NumTokens() {
				return nil, invalid("logit_bias", "logit_bias key %q is not a token id in [0, %d)", k, s.tok.NumTokens())
			}
			if !(b >= -100 && b <= 100) {
				return nil, invalid("logit_bias", "logit_bias value %g for token %s is outside [-100, 100]", b, k)
			}
			if b == -100 {
				o.LogitBias[int32(id)] = float32(math.Inf(-1)) // banned, as OpenAI documents
			} else {
				o.LogitBias[int32(id)] = float32(b)
			}
		}
	}
	smp, err := sample.New(o)
	if err != nil {
		return nil, invalid("temperature", "sampling options: %v", err)
	}
	return smp, nil
}

// checkStop validates the stop strings of the request parameter param
// ("stop", or Anthropic's "stop_sequences").
func checkStop(param string, stop []string) *apiError {
	if len(stop) > maxStopStrings {
		return invalid(param, "at most %d stop strings, not %d", maxStopStrings, len(stop))
	}
	for _, st := range stop {
		if st == "" {
			return invalid(param, "stop strings must not be empty")
		}
	}
	return nil
}

// checkN accepts only n = 1.
func checkN(n *int) *apiError {
	if n != nil && *n != 1 {
		return invalid("n", "n must be 1 (one choice per request), not %d", *n)
	}
	return nil
}

// checkPromptLen refuses a prompt that leaves no room for a reply, with
// OpenAI's answer to it: 400 context_length_exceeded (SDKs raise their
// bad-request error for it, and some recognise the message's "maximum
// context length").
func (s *Server) checkPromptLen(param string, n int) *apiError {
	if n == 0 {
		return invalid(param, "the prompt is empty")
	}
	if n >= s.ctxSize {
		return &apiError{status: http.StatusBadRequest, Type: "invalid_request_error", Param: ptr(param),
			Code: ptr("context_length_exceeded"),
			Message: fmt.Sprintf("This model's maximum context length is %d tokens, prompt and reply together; "+
				"your %s resulted in %d tokens. Shorten the %s or raise --ctx-size.", s.ctxSize, param, n, param)}
	}
	return nil
}

// extras are the llama-server request fields that steer the scheduler.
type extras struct {
	cachePrompt *bool // cache_prompt (nil: on)
	specMax     *int  // speculative.n_max (nil: the server's SpecDraft)
	grammar     *grammar.Grammar
	thinking    bool // the prompt opened a reasoning block (the grammar waits for its end)
	oneCall     bool // end the reply with its first tool call
}

// start queues a generation and returns it, or a 503 when the queue is full
// or the server is shutting down. markers are the control tokens the reply
// parser reads (Server.markers for chat, nil for completions).
func (s *Server) start(ctx context.Context, prompt []int32, smp *sample.Sampler, maxTokens int, stop []string, logprobs bool, top int, markers map[int32]byte, x extras) (*request, *apiError) {
	r := &request{
		ctx: ctx, prompt: prompt, maxTokens: maxTokens, stop: stop, sampler: smp,
		logprobs: logprobs, topLogprobs: top, markers: markers, out: newOutbox(),
		cachePrompt: x.cachePrompt == nil || *x.cachePrompt,
		specMax:     s.cfg.SpecDraft,
	}
	if x.specMax != nil {
		if *x.specMax < 0 {
			return nil, invalid("speculative.n_max", "speculative.n_max %d: want >= 0 (0: no speculative decoding)", *x.specMax)
		}
		r.specMax = min(*x.specMax, s.cfg.SpecDraft)
	}
	c, e := s.newConstraint(x.grammar, x.thinking)
	if e != nil {
		return nil, e
	}
	r.constraint = c
	r.endAfter = -1
	if x.oneCall {
		if id, ok := s.tok.ID(tagToolCallEnd); ok {
			r.endAfter = id
		}
	}
	if s.script != nil {
		r.script = s.script(prompt)
	}
	if !s.sched.submit(r) {
		if s.sched.closed() {
			return nil, runError(errShutdown)
		}
		s.metrics.rejected.Add(1)
		return nil, busy()
	}
	return r, nil
}

// next waits for r's next events; it returns ctx's error when ctx ends
// first.
func next(ctx context.Context, r *request) ([]event, error) {
	for {
		if ev := r.out.take(); len(ev) > 0 {
			return ev, nil
		}
		select {
		case <-r.out.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
