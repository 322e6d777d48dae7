package gguf

import (
	"bufio"
	"fmt"
	"io"
	"slices"

	"github.com/glmrun/glmrun/tensor"
)

// StreamTensor is a tensor whose data is produced while the file is
// written (see Writer.WriteStream), so that a file larger than memory can
// be made one piece at a time.
type StreamTensor struct {
	Name string
	Type tensor.Type
	Dims []int64 // ggml ne order: Dims[0] is the row width
	// Write writes the tensor's data, exactly its size in bytes, to out.
	// An error from out must be returned.
	Write func(out io.Writer) error
}

// WriteStream writes a GGUF file to out: w's version and metadata, then
// the tensors in order, each one's data coming from its Write function
// when the writer reaches it, padded to the alignment as WriteTo pads. w
// must hold no tensors of its own. A Write that writes more or fewer bytes
// than its tensor's size ends the file with an error naming the tensor. It
// returns the number of bytes written.
func (w *Writer) WriteStream(out io.Writer, tensors []StreamTensor) (int64, error) {
	if len(w.tensors) > 0 {
		return 0, fmt.Errorf("gguf: WriteStream: the writer already holds %d tensors", len(w.tensors))
	}
	return w.writeStream(out, tensors)
}

// writeStream is WriteStream, and WriteTo with the writer's own tensors.
func (w *Writer) writeStream(out io.Writer, tensors []StreamTensor) (int64, error) {
	if w.Version != 2 && w.Version != 3 {
		return 0, fmt.Errorf("gguf: cannot write GGUF version %d", w.Version)
	}
	align, err := w.alignment()
	if err != nil {
		return 0, err
	}
	for _, kv := range w.kvs {
		if !kv.Value.typ.valid() || (kv.Value.typ == TypeArray && !kv.Value.elem.valid()) {
			return 0, fmt.Errorf("gguf: key %q: invalid value type", kv.Key)
		}
	}
	sizes := make([]int64, len(tensors))
	seen := make(map[string]bool, len(tensors))
	for i, t := range tensors {
		if seen[t.Name] {
			return 0, fmt.Errorf("gguf: tensor %q added twice", t.Name)
		}
		seen[t.Name] = true
		if sizes[i], err = streamTensorSize(t); err != nil {
			return 0, err
		}
		if t.Write == nil {
			return 0, fmt.Errorf("gguf: tensor %q: no Write function", t.Name)
		}
	}
	// The offsets come from the sizes the tensors will have, not from data
	// held in memory.
	e := &encoder{w: bufio.NewWriterSize(out, 1<<20)}
	e.u32(Magic)
	e.u32(w.Version)
	e.u64(uint64(len(tensors)))
	e.u64(uint64(len(w.kvs)))
	for _, kv := range w.kvs {
		e.str(kv.Key)
		e.u32(uint32(kv.Value.typ))
		e.value(kv.Value)
	}
	var off uint64
	for i, t := range tensors {
		e.str(t.Name)
		e.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			e.u64(uint64(d))
		}
		e.u32(uint32(t.Type))
		e.u64(off)
		off += (uint64(sizes[i]) + align - 1) / align * align
	}
	if !w.unpadded || len(tensors) > 0 {
		e.pad(int64(align))
	}
	for i, t := range tensors {
		if e.err != nil {
			break
		}
		start := e.n
		if err := t.Write(e); err != nil {
			if e.err == nil {
				e.err = fmt.Errorf("tensor %q: %w", t.Name, err)
			}
			break
		}
		if e.err == nil && e.n-start != sizes[i] {
			e.err = fmt.Errorf("tensor %q: %d data bytes written, %s %v needs %d", t.Name, e.n-start, t.Type, t.Dims, sizes[i])
		}
		e.pad(int64(align))
	}
	if e.err == nil {
		e.err = e.w.Flush()
	}
	if e.err != nil {
		return e.n, fmt.Errorf("gguf: write: %w", e.err)
	}
	return e.n, nil
}

// Write makes the encoder an io.Writer for StreamTensor.Write; after an
// error it writes nothing and returns that error.
func (e *encoder) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	before := e.n
	e.bytes(p)
	return int(e.n - before), e.err
}

// streamTensorSize checks a StreamTensor's name, type and shape as
// AddTensor does and returns its data size.
func streamTensorSize(t StreamTensor) (int64, error) {
	if len(t.Dims) > maxDims {
		return 0, fmt.Errorf("gguf: tensor %q: %d dimensions, at most %d allowed", t.Name, len(t.Dims), maxDims)
	}
	if slices.ContainsFunc(t.Dims, func(d int64) bool { return d < 0 }) {
		return 0, fmt.Errorf("gguf: tensor %q: negative dimension in %v", t.Name, t.Dims)
	}
	if !t.Type.Known() {
		return 0, fmt.Errorf("gguf: tensor %q: unknown ggml type %d", t.Name, uint32(t.Type))
	}
	size, err := tensorSize(&TensorInfo{Name: t.Name, Type: t.Type, Dims: t.Dims})
	if err != nil {
		return 0, fmt.Errorf("gguf: tensor %q: %w", t.Name, err)
	}
	return size, nil
}
