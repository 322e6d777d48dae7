// Package glmrun runs GLM-5 (glm-dsa) and DeepSeek-V2/V3 / GLM-4.7-Flash
// (deepseek2) models from GGUF files: the library behind the glmrun command.
//
// Load opens a model file and reads, with the weights, its tokenizer and chat
// template. A Model is shared, read-only, by any number of Sessions; each
// Session is one sequence with its own KV cache, so several Sessions may
// generate at the same time from different goroutines. A Session's methods
// run one at a time; Close may be called from any goroutine, and after it,
// or after Model.Close, every method that needs the weights or the cache
// returns an error wrapping ErrClosed instead of touching freed memory.
//
// A Session holds a token sequence. Prompt replaces it (text or token ids),
// Append extends it, and Generate samples a continuation, streaming it as an
// iter.Seq2 of Tokens whose Text pieces are always whole, valid UTF-8
// characters (U+FFFD for a byte that cannot form one).
// Generation stops at an end-of-generation token, a stop string (never
// emitted, found across token boundaries), a token limit, a full context,
// or when its context.Context is canceled. Chat renders a conversation with
// the model's chat template and generates the assistant's reply.
//
// Work is done lazily: Prompt and Append only tokenize; the model runs when
// Generate needs logits. The KV cache keeps every token it has seen, and a
// new prompt keeps the longest prefix it shares with the cached sequence
// (the next turn of a chat, or an edited one), running only the rest
// through the model. Truncate cuts the sequence and its cache anywhere, at
// no cost.
//
// Sampling follows llama.cpp's default chain (package model/sample): the zero
// GenerateOptions decode greedily, and equal seeds with equal options give
// equal text.
package glmrun
