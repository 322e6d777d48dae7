package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/glmrun/glmrun/tensor"
)

// Writer builds a GGUF file: metadata in insertion order, then tensor infos
// and data in insertion order, data dense and padded to the alignment (the
// layout llama.cpp writes). The alignment is general.alignment if set, else
// 32. A Writer holds references to the tensor data it is given; it copies
// nothing until it writes.
type Writer struct {
	// Version is the GGUF version written: 3 (the default) or 2, which
	// has the same layout.
	Version uint32

	kvs      []KV
	tensors  []writerTensor
	unpadded bool // omit the padding after the infos when there are no tensors
}

type writerTensor struct {
	name string
	typ  tensor.Type
	dims []int64
	data []byte
}

// NewWriter returns an empty GGUF v3 writer.
func NewWriter() *Writer { return &Writer{Version: 3} }

// NewWriterFrom returns a writer holding f's version, metadata and tensors
// (their data still in f's mapping: keep f open until written). Writing it
// unchanged reproduces a llama.cpp-written file byte for byte. For a split
// File the split.* keys are dropped, so that it writes as one file. A
// tensor-less file that ended without padding after its header (older
// llama.cpp vocab-only files) is written the same way while it has no
// tensors.
func NewWriterFrom(f *File) *Writer {
	w := &Writer{Version: f.Version, kvs: slices.Clone(f.KVs), unpadded: f.unpadded}
	if len(f.Shards) > 1 {
		for _, k := range []string{KeySplitNo, KeySplitCount, KeySplitTensorsCount} {
			w.RemoveKV(k)
		}
	}
	for _, t := range f.Tensors {
		w.tensors = append(w.tensors, writerTensor{t.Name, t.Type, slices.Clone(t.Dims), t.Data})
	}
	return w
}

// KVs returns a copy of the metadata in write order.
func (w *Writer) KVs() []KV { return slices.Clone(w.kvs) }

// Lookup returns the value of key.
func (w *Writer) Lookup(key string) (Value, bool) {
	if i := w.kvIndex(key); i >= 0 {
		return w.kvs[i].Value, true
	}
	return Value{}, false
}

func (w *Writer) kvIndex(key string) int {
	return slices.IndexFunc(w.kvs, func(kv KV) bool { return kv.Key == key })
}

// SetKV sets key to v, in place if key exists (keeping the metadata order),
// else at the end.
func (w *Writer) SetKV(key string, v Value) {
	if i := w.kvIndex(key); i >= 0 {
		w.kvs[i].Value = v
		return
	}
	w.kvs = append(w.kvs, KV{key, v})
}

// RemoveKV deletes key and reports whether it was there.
func (w *Writer) RemoveKV(key string) bool {
	i := w.kvIndex(key)
	if i < 0 {
		return false
	}
	w.kvs = slices.Delete(w.kvs, i, i+1)
	return true
}

// TensorNames returns the names of the tensors in write order.
func (w *Writer) TensorNames() []string {
	names := make([]string, len(w.tensors))
	for i, t := range w.tensors {
		names[i] = t.name
	}
	return names
}

func (w *Writer) tensorIndex(name string) int {
	return slices.IndexFunc(w.tensors, func(t writerTensor) bool { return t.name == name })
}

func checkTensor(name string, typ tensor.Type, dims []int64, data []byte) error {
	if len(dims) > maxDims {
		return fmt.Errorf("gguf: tensor %q: %d dimensions, at most %d allowed", name, len(dims), maxDims)
	}
	for _, d := range dims {
		if d < 0 {
			return fmt.Errorf("gguf: tensor %q: negative dimension in %v", name, dims)
		}
	}
	ti := &TensorInfo{Name: name, Type: typ, Dims: dims}
	if !typ.Known() {
		return fmt.Errorf("gguf: tensor %q: unknown ggml type %d", name, uint32(typ))
	}
	size, err := tensorSize(ti)
	if err != nil {
		return fmt.Errorf("gguf: tensor %q: %w", name, err)
	}
	if int64(len(data)) != size {
		return fmt.Errorf("gguf: tensor %q: %d data bytes, %s %v needs %d", name, len(data), typ, dims, size)
	}
	return nil
}

// AddTensor appends a tensor. data must hold exactly the bytes of dims
// elements of typ; it is referenced, not copied.
func (w *Writer) AddTensor(name string, typ tensor.Type, dims []int64, data []byte) error {
	if w.tensorIndex(name) >= 0 {
		return fmt.Errorf("gguf: tensor %q added twice", name)
	}
	if err := checkTensor(name, typ, dims, data); err != nil {
		return err
	}
	w.tensors = append(w.tensors, writerTensor{name, typ, slices.Clone(dims), data})
	return nil
}

// ReplaceTensor replaces the tensor called name, keeping its position.
func (w *Writer) ReplaceTensor(name string, typ tensor.Type, dims []int64, data []byte) error {
	i := w.tensorIndex(name)
	if i < 0 {
		return fmt.Errorf("gguf: replace tensor %q: no such tensor", name)
	}
	if err := checkTensor(name, typ, dims, data); err != nil {
		return err
	}
	w.tensors[i] = writerTensor{name, typ, slices.Clone(dims), data}
	return nil
}

// RemoveTensor deletes the tensor called name and reports whether it was
// there.
func (w *Writer) RemoveTensor(name string) bool {
	i := w.tensorIndex(name)
	if i < 0 {
		return false
	}
	w.tensors = slices.Delete(w.tensors, i, i+1)
	return true
}

// alignment returns the data alignment that general.alignment asks for.
func (w *Writer) alignment() (uint64, error) {
	v, ok := w.Lookup(KeyAlignment)
	if !ok {
		return DefaultAlignment, nil
	}
	a, err := v.AsUint()
	if err != nil {
		return 0, fmt.Errorf("gguf: key %q: %w", KeyAlignment, err)
	}
	if a == 0 || a&(a-1) != 0 || a > maxAlignment {
		return 0, fmt.Errorf("gguf: key %q: alignment %d is not a power of two up to %d", KeyAlignment, a, maxAlignment)
	}
	return a, nil
}

// encoder writes GGUF primitives, counting bytes and keeping the first
// error.
type encoder struct {
	w   *bufio.Writer
	n   int64
	err error
	buf [8]byte
}

func (e *encoder) bytes(b []byte) {
	if e.err != nil {
		return
	}
	n, err := e.w.Write(b)
	e.n += int64(n)
	e.err = err
}

func (e *encoder) u32(x uint32) {
	binary.LittleEndian.PutUint32(e.buf[:], x)
	e.bytes(e.buf[:4])
}

func (e *encoder) u64(x uint64) {
	binary.LittleEndian.PutUint64(e.buf[:], x)
	e.bytes(e.buf[:8])
}

func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	if e.err == nil {
		n, err := e.w.WriteString(s)
		e.n += int64(n)
		e.err = err
	}
}

func (e *encoder) pad(align int64) {
	var zeros [64]byte
	for p := (align - e.n%align) % align; p > 0 && e.err == nil; {
		k := min(p, int64(len(zeros)))
		e.bytes(zeros[:k])
		p -= k
	}
}

func (e *encoder) value(v Value) {
	switch v.typ {
	case TypeString:
		e.str(v.str)
	case TypeArray:
		e.u32(uint32(v.elem))
		e.u64(uint64(v.n))
		switch v.elem {
		case TypeString:
			for _, s := range v.strs {
				e.str(s)
			}
		case TypeArray:
			for _, a := range v.arrs {
				e.value(a)
			}
		default:
			e.bytes(v.raw)
		}
	default:
		sz := v.typ.size()
		putBits(e.buf[:], sz, v.bits)
		e.bytes(e.buf[:sz])
	}
}

// WriteTo writes the GGUF file to out and returns the number of bytes
// written.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	tensors := make([]StreamTensor, len(w.tensors))
	for i, t := range w.tensors {
		tensors[i] = StreamTensor{Name: t.name, Type: t.typ, Dims: t.dims, Write: func(o io.Writer) error {
			_, err := o.Write(t.data)
			return err
		}}
	}
	return w.writeStream(out, tensors)
}

// WriteFile writes the GGUF file to path, atomically: it writes a temporary
// file in the same directory and renames it.
func (w *Writer) WriteFile(path string) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := w.WriteTo(tmp); err != nil {
		return fmt.Errorf("gguf: %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	return nil
}

// SplitPath returns the name of shard i (0-based) of n for prefix, as
// gguf-split names them: prefix-00001-of-00003.gguf.
func SplitPath(prefix string, i, n int) string {
	return fmt.Sprintf("%s-%05d-of-%05d.gguf", prefix, i+1, n)
}

// WriteSplit writes the model as n shards named by SplitPath, the way
// gguf-split does: tensors divided in order into n nearly equal runs, all
// metadata in the first shard, and split.no (u16), split.count (u16) and
// split.tensors.count (i32) in every shard. It returns the shard paths.
func (w *Writer) WriteSplit(prefix string, n int) ([]string, error) {
	if n < 1 || n > 99999 || n > max(len(w.tensors), 1) {
		return nil, fmt.Errorf("gguf: cannot split %d tensors into %d shards", len(w.tensors), n)
	}
	paths := make([]string, n)
	var errs []error
	for i := range n {
		s := &Writer{Version: w.Version}
		if i == 0 {
			s.kvs = slices.Clone(w.kvs)
		} else if v, ok := w.Lookup(KeyAlignment); ok {
			s.SetKV(KeyAlignment, v)
		}
		s.SetKV(KeySplitNo, Uint16(uint16(i)))
		s.SetKV(KeySplitCount, Uint16(uint16(n)))
		s.SetKV(KeySplitTensorsCount, Int32(int32(len(w.tensors))))
		s.tensors = w.tensors[i*len(w.tensors)/n : (i+1)*len(w.tensors)/n]
		paths[i] = SplitPath(prefix, i, n)
		if err := s.WriteFile(paths[i]); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return paths, nil
}
