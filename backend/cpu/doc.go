// Package cpu holds glmrun's CPU kernels: small pure functions over float32
// slices (norms, rope, softmax, activations) and two matrix products of
// activations by a weight kept in its GGUF type. The exact product
// dequantizes one weight row at a time and dots it with every float32
// activation row (the reference that llama.cpp's deq-F32 runs check). The
// fast product (NewFast, NewFastDevice, backend.Config.Fast) quantizes each
// activation row once as ggml does and uses package tensor's integer
// kernels on the quantized blocks; with it the attention runs in the
// absorbed form with an online softmax over key tiles and the MoE runs all
// selected experts in two parallel phases.
//
// Each CPU has a persistent pool of worker goroutines (the caller and
// workers−1 helpers) that take blocks of output rows, heads or experts
// from an atomic counter; a decode step starts no goroutine and allocates
// nothing.
//
// Device implements backend.Device on top of them (registered as "cpu"):
// host memory is device memory, operations run when called, and Open
// gives n virtual devices, each with its own workers and memory budget,
// joined by a Collective that sums in device order.
package cpu
