// Package cpu holds glmrun's CPU kernels: small pure functions over float32
// slices (norms, rope, softmax, activations) and a matrix multiply of f32
// activations by a weight kept in its GGUF type, which dequantizes one
// weight row at a time and dots it with every activation row. Only MatMul
// uses goroutines, splitting the output rows between a few workers.
//
// These are the straightforward reference kernels; faster ones are checked
// against them.
//
// Device implements backend.Device on top of them (registered as "cpu"):
// host memory is device memory, operations run when called, and Open
// gives n virtual devices, each with its own workers and memory budget,
// joined by a Collective that sums in device order.
package cpu
