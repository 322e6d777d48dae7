// Package tokenizer turns text into token ids and back for GGUF models
// with a byte-level BPE vocabulary (tokenizer.ggml.model = "gpt2": GLM-4.x
// and GLM-5, DeepSeek-V2/V3, Llama-3, Qwen2/3, GPT-2), producing exactly
// the ids llama.cpp produces.
//
// Encoding follows llama.cpp (src/llama-vocab.cpp, src/unicode.cpp):
//
//  1. Special tokens are cut out of the text first. With parseSpecial on,
//     every CONTROL, USER_DEFINED and UNKNOWN token is recognised, longest
//     first; with it off only USER_DEFINED ones are (as Hugging Face's
//     added tokens), so plain text never yields a control token.
//  2. The pre-tokenizer named by tokenizer.ggml.pre splits each remaining
//     piece into words (see SupportedPre).
//  3. Each word's bytes are mapped to GPT-2's printable byte alphabet and
//     merged pairwise by merge rank (lowest rank first, leftmost on ties).
//
// Decoding maps a token back to its bytes; control tokens are rendered as
// their text only when asked. A Decoder streams text for generation,
// holding back a UTF-8 character split across tokens until it completes.
//
// Differences from llama.cpp, all outside what its tokenizer tests cover:
// per-token LSTRIP/RSTRIP attributes (phi-3, jina) are not applied; a
// normal token containing a character outside the byte alphabet decodes to
// that character's UTF-8 (llama.cpp writes "[UNK_BYTE_0x..]"); Decode does
// not apply llama_detokenize's clean-up of spaces before punctuation.
//
// A Tokenizer is immutable after construction and safe for concurrent use.
package tokenizer
