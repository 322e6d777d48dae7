// Package model loads GLM-5 (glm-dsa) and DeepSeek-V2/V3 / GLM-4.7-Flash
// (deepseek2) MLA models from GGUF files and runs their forward pass; it
// also maps tensor names between GGUF and Hugging Face checkpoints.
//
// Load reads the hyper-parameters (Config, following llama.cpp's loader
// rules) and checks every tensor's name, shape and type, so that a bad file
// fails there with a *MissingTensorError or *TensorError and never later.
// Weights stay in their GGUF type; activations are float32. The forward
// pass runs on the devices of a backend (package backend; Options.Backend,
// "cpu" by default, whose package the program imports to register it):
// Load uploads the weights once and a Session keeps its latent KV cache
// and buffers on the devices.
// Both MLA layouts load: split attn_k_b/attn_v_b, and the legacy combined
// attn_kv_b (split at load). The first NextN/MTP block drafts tokens for
// speculative decoding when the model is loaded with Options.MTP (Session.Draft).
//
// A Session is one sequence with its latent KV cache. Prefill runs a batch
// of tokens through the prefill form of attention (decompressed keys and
// values) and returns the logits at every position; Decode runs one token
// through the decode form (absorbed, attending over the cached latent).
// The two forms are the same function up to float rounding, share the
// cache and can be mixed freely: prefill a prompt, decode after it,
// prefill more. On glm-dsa the DSA lightning indexer restricts each query
// to its top_k keys once more than top_k are visible.
//
// With Options.TensorParallel = n the model is split over n devices as
// Plan describes (attention heads, FFN columns and routed experts split;
// latent projections, DSA indexer, router and KV cache replicated; an
// all-reduce after attn_output and after the FFN); Plan.Memory gives each
// device's bytes from the GGUF header alone. The logits agree with one
// device to float rounding (about 5e-6 on the test models).
//
// Observe intermediate activations with SessionOptions.Hook (names follow
// llama.cpp's graph: "embd", "blk.N.attn_out", "blk.N.ffn_out",
// "blk.N.out", "result_norm", ...) and the discrete decisions (routed
// experts, DSA keys) with SessionOptions.IDHook.
//
// The maths is in docs/MATH.md; the results match llama.cpp run on the
// dequantized weights to about 1e-5 in the logits.
package model
