// Package sample picks the next token from a model's logits and reports
// log-probabilities.
//
// A [Sampler] applies, in the order of llama.cpp's default sampler chain
// (common/sampling.cpp: logit bias first, then the configured samplers
// penalties, top-k, top-p, min-p, temperature, then a draw):
//
//  1. logit bias: logit[id] += bias (-Inf bans a token);
//  2. penalties over the last PenaltyLastN accepted tokens: a token seen c > 0
//     times gets its logit divided by RepeatPenalty when positive, multiplied
//     when negative, then reduced by c*FrequencyPenalty + PresencePenalty
//     (OpenAI's definition);
//  3. top-k: keep the K highest logits;
//  4. top-p: softmax over the remaining tokens, keep the shortest
//     highest-first prefix whose probability sum reaches P;
//  5. min-p: keep tokens whose probability is at least MinP times the
//     largest (logit >= max + ln MinP);
//  6. temperature: divide the logits by T;
//  7. draw from the softmax of what is left with the Sampler's own seeded
//     random source.
//
// With Temperature <= 0 the Sampler is greedy: after steps 1-2 it returns the
// highest logit (ties: the lowest id), which is what llama.cpp's chain yields
// then too. llama.cpp's other samplers (DRY, typical, XTC, top-n-sigma,
// mirostat) are not implemented; they are off by default there.
//
// Ties between equal logits are always broken towards the lower token id,
// so results do not depend on sort stability. A Sampler reuses its buffers:
// after the first call, Sample and Logprobs do not allocate.
//
// [Sampler.Logprobs] reports the log-softmax of the raw logits (before any
// of the steps above), computed in float64, for the chosen token and the N
// most likely ones, as OpenAI's logprobs and llama.cpp's n_probs do.
package sample
