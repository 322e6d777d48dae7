// Package attention implements multi-head latent attention (MLA) as used by
// GLM-5 (glm-dsa) and DeepSeek-V2/V3 (deepseek2), with the DSA lightning
// indexer of glm-dsa and the latent KV cache both forms share
// (docs/MATH.md sections 3 to 6).
//
// MLA.Forward computes one layer's attention for a batch of new tokens in
// one of two mathematically identical forms: the prefill form decompresses
// K_nope and V for every cached token through W_UK and W_UV and runs plain
// multi-head attention (vLLM's forward_mha); the decode form absorbs W_UK
// into the query, attends over the cached latent [c | k_pe] as one shared
// key/value head and expands the result through W_UV (vLLM's forward_mqa).
// Both read and write the same LatentCache, so a prompt can be continued
// after a prefill and decode steps can follow a prefill.
//
// Everything runs on a backend.Device: Weights (as loaded) are uploaded
// as a Shard holding some of the heads and the replicated latent
// projections and indexer, and Forward issues the layer's operations on
// the device, producing that device's partial attn_output, which the
// caller sums over devices (tensor parallelism).
package attention
