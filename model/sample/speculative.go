package sample

import (
	"errors"
	"fmt"
)

// Penalties reports whether the sampler's penalties are on (a repeat,
// presence or frequency penalty over a window of accepted tokens). A
// speculative decoder that drafts several tokens ahead needs them off: a
// draft's distribution would depend on drafts not yet accepted.
func (s *Sampler) Penalties() bool { return s.penalties() }

// Verify is the acceptance step of speculative sampling (Leviathan et al.
// 2023; Chen et al. 2023) for a drafted token d that Sample drew from the
// draft logits: it returns the token the sequence takes at this position
// and whether it is d. d is kept with probability min(1, p(d)/q(d)), p and
// q being the sampler's distributions (bias, top-k, top-p, min-p and
// temperature applied) of target and draft; otherwise the token is drawn
// from the normalised residual max(0, p − q). The token that comes out is
// so distributed exactly as Sample(target) would draw it. With greedy
// settings (temperature ≤ 0) it is Sample(target), accepted when equal to
// d: the output of greedy speculative decoding is plain greedy decoding's.
// It does not Accept the token.
func (s *Sampler) Verify(target, draft []float32, d int32) (int32, bool, error) {
	if len(target) != len(draft) {
		return 0, false, fmt.Errorf("sample: Verify: %d target logits but %d draft logits", len(target), len(draft))
	}
	if d < 0 || int(d) >= len(target) {
		return 0, false, fmt.Errorf("sample: Verify: draft token %d outside [0, %d)", d, len(target))
	}
	if s.opts.Temperature <= 0 {
		z, err := s.Sample(target)
		return z, err == nil && z == d, err
	}
	var err error
	if s.pTarget, err = s.dense(target, s.pTarget); err != nil {
		return 0, false, err
	}
	if s.pDraft, err = s.dense(draft, s.pDraft); err != nil {
		return 0, false, err
	}
	p, q := s.pTarget, s.pDraft
	if q[d] == 0 {
		return 0, false, errors.New("sample: Verify: the draft token has probability 0 under the draft's distribution")
	}
	if u := s.rng.Float64(); u*q[d] < p[d] {
		return d, true, nil
	}
	var sum float64
	for i := range p {
		if r := p[i] - q[i]; r > 0 {
			sum += r
		}
	}
	if sum <= 0 {
		// p ≤ q everywhere means p = q, where d is always kept; rounding
		// can still get here: draw from p.
		return s.drawDense(p, 1), false, nil
	}
	u := s.rng.Float64() * sum
	var acc float64
	last := int32(-1)
	for i := range p {
		if r := p[i] - q[i]; r > 0 {
			acc += r
			last = int32(i)
			if u < acc {
				return int32(i), false, nil
			}
		}
	}
	return last, false, nil
}

// dense returns the sampling distribution of logits as one probability per
// token, in dst's storage.
func (s *Sampler) dense(logits []float32, dst []float64) ([]float64, error) {
	if err := s.adjust(logits); err != nil {
		return dst, err
	}
	if err := s.distribution(); err != nil {
		return dst, err
	}
	if cap(dst) < len(logits) {
		dst = make([]float64, len(logits))
	}
	dst = dst[:len(logits)]
	clear(dst)
	for _, c := range s.cands {
		dst[c.id] = c.p
	}
	return dst, nil
}

// drawDense draws i with probability p[i]/total.
func (s *Sampler) drawDense(p []float64, total float64) int32 {
	u := s.rng.Float64() * total
	var acc float64
	last := int32(0)
	for i, v := range p {
		if v > 0 {
			acc += v
			last = int32(i)
			if u < acc {
				return int32(i)
			}
		}
	}
	return last
}
