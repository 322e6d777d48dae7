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
// order. Faults are sticky and reported by Device.Sync.
//
// Without a driver or a device Open returns an error wrapping
// ErrNoDriver or ErrNoDevice. Tests run everything without a GPU against
// a fake libcuda (testdata/fakecuda.c) that executes the same kernels on
// the CPU (testdata/sim.cc); the environment variable GLMRUN_LIBCUDA
// names the library to load instead of libcuda.so.1.
package cuda

//go:generate sh gen.sh
