// Package backend is the interface between glmrun's forward pass (packages
// model and attention) and the devices that compute it. model and attention
// see only this package; backend/cpu and backend/cuda implement it and
// register themselves (Register), and programs pick one by name (Open)
// after importing its package.
//
// It is not a general tensor library: a Device offers the few operations
// the MLA/MoE forward pass of GLM-5 and DeepSeek-V2/V3 needs, several of
// them fused (MLA attention in both forms, the DSA indexer's top-k, MoE
// routing and expert dispatch), on row-major float32 activations and on
// weights kept in their GGUF type (Matrix, Weight).
//
// # The model
//
//   - Memory. Weights are uploaded once (Device.Upload) and stay resident
//     and quantized; norm vectors and biases are uploaded as float32
//     (UploadVector). Activations, the latent KV cache and scratch space
//     are Buffers from Alloc (IDs from AllocIDs for routed experts and
//     DSA selections), freed with Free. Every allocation counts against
//     the device's budget; one that does not fit returns an error at once,
//     naming the device and the tensor or buffer ("cuda:3: weight
//     blk.7.ffn_up_exps.weight: 1234 bytes do not fit: …"). Buffer.Slice
//     gives views (no copy) that any operation of the same device accepts.
//   - Stream. Operations are issued in program order and run in that
//     order; they may run asynchronously. The host sees results only
//     through Read/ReadIDs (which wait for the operations before them) and
//     writes inputs with Write. Operations return no errors: a fault is
//     recorded, sticky, and returned by the next Sync, like bufio.Writer.
//     The model calls Sync once per device per step.
//   - Shapes. Operations trust their arguments (the model sizes everything
//     from its config at load) and panic on a broken shape contract; they
//     never fail on data.
//   - Tensor parallelism. A model split over n devices (see model.Plan)
//     issues each step phase by phase, device by device, and joins the
//     devices with a Collective: AllReduce after attn_output and after the
//     FFN (each device holds a partial sum), Broadcast after the
//     embedding. A Collective's result is the same on every device and
//     independent of timing (fixed reduction order), so a run is
//     reproducible.
//
// # What a CUDA implementation must provide
//
//   - Device per GPU, each with its context bound to one OS-thread-locked
//     goroutine and one stream; Budget from the configured limit or
//     cuMemGetInfo; Used counting every cuMemAlloc it made.
//   - Weights copied to device memory byte for byte in their GGUF type
//     (Q4_K, Q5_K, Q6_K, Q8_0, IQ4_XS, Q4_0/Q5_0/Q5_1, BF16, F16, F32 at
//     least; others fail at Upload with an error naming the tensor), with
//     Matrix.Scale applied to every product. Column shards made by
//     Matrix.SliceCols arrive as ordinary matrices (maybe F32).
//   - Kernels for each operation with the CPU backend's semantics, which
//     define the results: the same formula, the same reduction order where
//     it matters (softmax over keys in ascending order, expert slots summed
//     in routing order, MoE top-k ties broken toward the lower id, indexer
//     top-k ties toward the lower position, output ascending and padded
//     with −1). RMSNorm/LayerNorm/Rope work on strided rows (the KV cache
//     rows are written in place). AttentionPrefill and AttentionDecode
//     take this device's heads of attn_k_b/attn_v_b and the replicated
//     latent cache; with a DSA selection they attend only to its keys.
//     RouterTopK and MoE keep routing on the device: no host round trip
//     unless a hook asks for the ids.
//   - Faults (launch errors, illegal addresses) recorded and returned by
//     Sync with the CUDA error name; Read after a fault may return
//     garbage but must not crash.
//   - Thread safety: a Device may be called from several goroutines
//     (sessions sharing a model); serialize or give each its own stream.
//   - Collective over the GPUs of one group: NCCL's all-reduce (sum,
//     float32) and broadcast, each rank's buffer on its own device, issued
//     on the devices' streams; without NCCL, peer-to-peer copies to one
//     device, a sum in device order and copies back. Either way the sum
//     must be the same on every device.
//   - Close freeing every allocation.
//
// The CPU backend (backend/cpu) is the reference: host memory is device
// memory (uploads keep references to the mapped file, Read and Write are
// copies), operations run synchronously, and n virtual devices, each with
// its own worker goroutines and budget, prove the tensor-parallel plan.
package backend
