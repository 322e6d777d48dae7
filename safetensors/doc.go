// Package safetensors reads Hugging Face safetensors checkpoints: single
// files and sharded ones with a model.safetensors.index.json.
//
// A file is memory-mapped and its header validated before anything is
// handed out (docs/FILE-LAYOUTS.md section 7.1): the header length, the JSON,
// every dtype, shape and data_offsets pair, and that the tensors tile the
// data section exactly, with no gap, no overlap and nothing past the end.
// No number in the header is trusted for an allocation. Tensor data is
// returned as byte slices of the mapping, without copying; ToFloat32
// converts any supported dtype to float32, exactly for every type that
// float32 can represent.
package safetensors
