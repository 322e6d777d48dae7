package sample

import (
	"fmt"
	"math"
)

// TokenLogprob is a token id with its log-probability.
type TokenLogprob struct {
	ID      int32
	Logprob float64
}

// Logprobs are the log-probabilities at one position.
type Logprobs struct {
	Chosen TokenLogprob   // the token that was picked
	Top    []TokenLogprob // the most likely tokens, best first (ties: lower id first)
}

// LogSumExp returns log(sum(exp(logits))) computed in float64. Entries of
// -Inf contribute nothing; the result is -Inf if all are.
func LogSumExp(logits []float32) float64 {
	m := math.Inf(-1)
	for _, l := range logits {
		m = max(m, float64(l))
	}
	if math.IsInf(m, 0) {
		return m
	}
	var sum float64
	for _, l := range logits {
		sum += math.Exp(float64(l) - m)
	}
	return m + math.Log(sum)
}

// Logprobs returns the log-softmax of the raw logits (before bias,
// penalties or any truncation) for chosen and for the n most likely tokens.
// Top aliases a buffer of s: it is valid until the next call to Logprobs or
// Sample.
func (s *Sampler) Logprobs(logits []float32, chosen int32, n int) (Logprobs, error) {
	if len(logits) == 0 {
		return Logprobs{}, fmt.Errorf("sample: logprobs: no logits")
	}
	if chosen < 0 || int(chosen) >= len(logits) {
		return Logprobs{}, fmt.Errorf("sample: logprobs: token %d outside the vocabulary of %d", chosen, len(logits))
	}
	for i, l := range logits {
		if !(l <= math.MaxFloat32) { // NaN or +Inf
			return Logprobs{}, fmt.Errorf("sample: logprobs: logit of token %d is %v", i, l)
		}
	}
	lse := LogSumExp(logits)
	if math.IsInf(lse, -1) {
		return Logprobs{}, fmt.Errorf("sample: logprobs: all logits are -Inf")
	}
	out := Logprobs{Chosen: TokenLogprob{chosen, float64(logits[chosen]) - lse}}
	n = min(max(n, 0), len(logits))
	if n == 0 {
		return out, nil
	}
	s.cands = selectTop(logits, n, s.cands)
	if cap(s.top) < n {
		s.top = make([]TokenLogprob, n)
	}
	out.Top = s.top[:n]
	for i, c := range s.cands {
		out.Top[i] = TokenLogprob{c.id, float64(c.logit) - lse}
	}
	return out, nil
}
