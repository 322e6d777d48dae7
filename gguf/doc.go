// Package gguf reads and writes GGUF files, the model format of llama.cpp
// (the layout is in docs/FILE-LAYOUTS.md section 1; the upstream description
// is ggml's docs/gguf.md).
//
// Open validates a file completely before returning it: header, every
// metadata value (all types, nested arrays included), every tensor info
// (dimensions, ggml type, block-size divisibility, offsets inside the data
// section, no overlaps). Bad input yields a *FormatError naming the file,
// byte offset and key or tensor; no count read from a file is trusted for
// an allocation larger than the rest of the file could hold. Tensor data is
// memory-mapped and handed out as zero-copy byte slices. Split models
// (gguf-split's <prefix>-00001-of-00010.gguf shards) open as one File.
// Parse runs the same validation on a file held in memory.
//
// Writer produces GGUF v3 (or v2) files. Values keep their exact GGUF
// type, so a File copied into a Writer with NewWriterFrom and written back
// unchanged is byte-identical to a file laid out the way llama.cpp lays
// files out (tensor data dense in info order, padded to the alignment).
// Writer.WriteSplit writes gguf-split style shards.
//
// The package interprets no model: it knows the container and the ggml type
// table (package tensor), nothing about architectures.
package gguf
