// Package cuda is glmrun's NVIDIA GPU backend: the CUDA driver API bound
// at run time through purego (libcuda.so.1 only, no cgo, no toolkit), and
// the kernels of the forward pass written in CUDA C (kernels/*.cu),
// compiled by a pinned Debian clang into one PTX module (ptx/glmrun.ptx,
// .version 7.8, .target sm_80) that the driver JIT-compiles for the GPU
// at hand (SM80, SM90, SM120). The PTX is committed and embedded; gen.sh
// regenerates it (go generate).
//
// Open implements backend.OpenFunc: one Device per GPU, each served by
// one goroutine locked to an OS thread that holds the device's context,
// with a memory budget and one stream on which operations are queued in
// order. Launches and small uploads reach that thread as commands queued
// by value, without waiting for it; the work between two waits for the
// stream is captured and launched as one CUDA graph, whose executable is
// updated in place when the next segment has the same kernels (a decode
// step after a decode step). Faults are sticky and reported by
// Device.Sync.
//
// Without a driver or a device Open returns an error wrapping
// ErrNoDriver or ErrNoDevice. Tests run everything without a GPU against
// a fake libcuda (testdata/fakecuda.c) that executes the same kernels on
// the CPU (testdata/sim.cc: one fiber per CUDA thread, or one pthread per
// CUDA thread under ThreadSanitizer); the environment variable
// GLMRUN_LIBCUDA names the library to load instead of libcuda.so.1. With
// GLMRUN_CUDA=1 the same tests run on real GPUs (scripts/gpu-check.sh).
//
// Kernels follow the CPU backend's arithmetic (dequantization bit for
// bit, double-precision sums where it uses float64, its dot-product order
// in attention and the indexer), so results agree within float rounding.
// KV caches (AllocType) are f32, f16, bf16 or Q8_0, rounded as package
// tensor rounds and read in place by attention and the indexer. Prompts
// and decode steps attend in the absorbed form with an online softmax
// (mla_attend_f32: a block serves up to eight heads, reading each latent
// row once for them, and a decode step splits its keys over blocks whose
// results mla_combine_f32 merges), so attention's scratch does not grow
// with the context;
// the DSA top-k is a radix select (four passes over a query's scores);
// MoE sorts the routed slots by expert on the device and runs every
// expert with rows in one launch per projection, through a table of the
// experts' weight pointers, so the routing never returns to the host.
// Known limits: the indexer's [T, keys] scores
// are one buffer; products run in f32 on CUDA cores (no mma.sync yet); the
// router's top-k over the experts ranks by counting. Collectives copy
// device to device (Config.Collectives "p2p", the default), through NCCL
// ("nccl", bound at run time like the driver) or through host memory
// ("host"). Config.Fast quantizes the
// activations of products with Q8_0 weights to Q8_0 and with Q4_K, Q5_K,
// Q6_K and IQ4_XS weights to Q8_K and takes dp4a integer dot products, a
// warp a weight row
// (mmvq_<type>; the MoE experts' through mmvq_experts_<type>), as the
// CPU's fast path does; the other types' products stay dequantizing
// float32 ones.
package cuda

//go:generate sh gen.sh
