package server

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// defaultCompletionTokens is max_tokens when a completions request leaves it
// out: OpenAI's (and vLLM's) default for this endpoint.
const defaultCompletionTokens = 16

// maxCompletionLogprobs bounds the completions endpoint's logprobs.
const maxCompletionLogprobs = 20

// handleCompletions answers POST /v1/completions.
func (s *Server) handleCompletions(w http.ResponseWriter, hr *http.Request) {
	var req completionRequest
	if e := s.decodeBody(w, hr, &req); e != nil {
		writeError(w, e)
		return
	}
	if e := s.checkModel(req.Model); e != nil {
		writeError(w, e)
		return
	}
	prompt, e := s.completionPrompt(req.Prompt)
	if e != nil {
		writeError(w, e)
		return
	}
	if e := checkN(req.N); e != nil {
		writeError(w, e)
		return
	}
	if e := checkStop("stop", req.Stop); e != nil {
		writeError(w, e)
		return
	}
	if req.Echo {
		writeError(w, invalid("echo", "echo is not supported"))
		return
	}
	if req.Suffix != nil && *req.Suffix != "" {
		writeError(w, invalid("suffix", "suffix is not supported"))
		return
	}
	if req.StreamOptions != nil && !req.Stream {
		writeError(w, invalid("stream_options", "stream_options is only allowed with stream: true"))
		return
	}
	maxTokens := defaultCompletionTokens
	if req.MaxTokens != nil {
		if *req.MaxTokens < 1 {
			writeError(w, invalid("max_tokens", "max_tokens must be at least 1, not %d", *req.MaxTokens))
			return
		}
		maxTokens = *req.MaxTokens
	}
	logprobs, top := false, 0
	if req.Logprobs != nil {
		if *req.Logprobs < 0 || *req.Logprobs > maxCompletionLogprobs {
			writeError(w, invalid("logprobs", "logprobs must be between 0 and %d, not %d", maxCompletionLogprobs, *req.Logprobs))
			return
		}
		logprobs, top = true, *req.Logprobs
	}
	smp, e := s.sampler(samplingParams{
		temperature: req.Temperature, topP: req.TopP, minP: req.MinP, topK: req.TopK, seed: req.Seed,
		presencePenalty: req.PresencePenalty, frequencyPenalty: req.FrequencyPenalty, logitBias: req.LogitBias,
	})
	if e != nil {
		writeError(w, e)
		return
	}
	if e := s.checkPromptLen("prompt", len(prompt)); e != nil {
		writeError(w, e)
		return
	}
	g, e := compileConstraint(req.ResponseFormat, req.Grammar)
	if e != nil {
		writeError(w, e)
		return
	}

	ctx, cancel := context.WithCancel(hr.Context())
	defer cancel()
	r, e := s.start(ctx, prompt, smp, maxTokens, req.Stop, logprobs, top, nil, extras{cachePrompt: req.CachePrompt, specMax: req.SpecMax, grammar: g})
	if e != nil {
		writeError(w, e)
		return
	}
	c := textCompletion{ID: newID("cmpl-"), Object: "text_completion", Created: time.Now().Unix(),
		Model: s.cfg.ModelID, SystemFingerprint: "glmrun"}
	var sse *sse
	if req.Stream {
		sse = newSSE(w)
	}
	var text []byte
	var lps *textLogprobs
	if logprobs {
		lps = &textLogprobs{Tokens: []string{}, TokenLogprobs: []float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
	}
	offset := 0
	for {
		evs, err := next(ctx, r)
		if err != nil {
			return
		}
		for _, ev := range evs {
			if ev.err != nil {
				if sse != nil {
					sse.send(errorBody{*runError(ev.err)})
				} else {
					writeError(w, runError(ev.err))
				}
				return
			}
			var chunkLps *textLogprobs
			if logprobs {
				chunkLps = &textLogprobs{Tokens: []string{}, TokenLogprobs: []float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
				for _, lp := range ev.logprobs {
					top := make(map[string]float64, len(lp.top))
					for _, t := range lp.top {
						if _, ok := top[t.piece]; !ok {
							top[t.piece] = t.logprob
						}
					}
					for _, l := range []*textLogprobs{lps, chunkLps} {
						l.Tokens = append(l.Tokens, lp.piece)
						l.TokenLogprobs = append(l.TokenLogprobs, lp.logprob)
						l.TopLogprobs = append(l.TopLogprobs, top)
						l.TextOffset = append(l.TextOffset, offset)
					}
					offset += len(lp.piece)
				}
			}
			text = append(text, ev.text...)
			if sse != nil {
				if ev.text != "" || (chunkLps != nil && len(chunkLps.Tokens) > 0) {
					c.Choices = []textChoice{{Text: ev.text, Logprobs: chunkLps}}
					if !sse.send(c) {
						return
					}
				}
				if ev.finish == "" {
					continue
				}
				c.Choices = []textChoice{{FinishReason: ptr(ev.finish)}}
				if !sse.send(c) {
					return
				}
				if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
					c.Choices = []textChoice{}
					c.Usage = &ev.usage
					if !sse.send(c) {
						return
					}
				}
				sse.done()
				return
			}
			if ev.finish == "" {
				continue
			}
			c.Choices = []textChoice{{Text: string(text), Logprobs: lps, FinishReason: ptr(ev.finish)}}
			c.Usage = &ev.usage
			writeJSON(w, http.StatusOK, c)
			return
		}
	}
}

// completionPrompt reads the prompt field: a string, a one-string array, an
// array of token ids or a one-element array of those.
func (s *Server) completionPrompt(raw json.RawMessage) ([]int32, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, invalid("prompt", "prompt is required")
	}
	var text string
	if err := json.Unmarshal(raw, &text); err == nil {
		return s.tok.Encode(text, true, true), nil
	}
	var texts []string
	if err := json.Unmarshal(raw, &texts); err == nil {
		if len(texts) != 1 {
			return nil, invalid("prompt", "prompt must hold exactly one string (batches are not supported), not %d", len(texts))
		}
		return s.tok.Encode(texts[0], true, true), nil
	}
	var ids []int32
	if err := json.Unmarshal(raw, &ids); err != nil {
		var batch [][]int32
		if err := json.Unmarshal(raw, &batch); err != nil {
			return nil, invalid("prompt", "prompt must be a string or an array of token ids")
		}
		if len(batch) != 1 {
			return nil, invalid("prompt", "prompt must hold exactly one token array (batches are not supported), not %d", len(batch))
		}
		ids = batch[0]
	}
	for _, id := range ids {
		if id < 0 || int(id) >= s.tok.NumTokens() {
			return nil, invalid("prompt", "token id %d is outside the vocabulary [0, %d)", id, s.tok.NumTokens())
		}
	}
	return ids, nil
}
