package gguf

import (
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"

	"github.com/glmrun/glmrun/internal/mmap"

	"github.com/glmrun/glmrun/tensor"
)

// Keys written by gguf-split into every shard of a split model.
const (
	KeySplitNo           = "split.no"            // u16, 0-based shard index
	KeySplitCount        = "split.count"         // u16, number of shards
	KeySplitTensorsCount = "split.tensors.count" // i32, tensors over all shards
)

// KV is one metadata entry.
type KV struct {
	Key   string
	Value Value
}

// TensorInfo describes one tensor and gives access to its bytes.
type TensorInfo struct {
	Name   string
	Type   tensor.Type
	Dims   []int64 // ggml ne order: Dims[0] is the contiguous (row) dimension
	Offset uint64  // relative to the data section of its shard
	Data   []byte  // zero-copy view into the file mapping; valid until Close
	Shard  string  // path of the file that holds it

	size int64
}

// NumElements returns the number of elements (the product of Dims).
func (t *TensorInfo) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// RowLen returns the length of one row, Dims[0] (1 for a scalar).
func (t *TensorInfo) RowLen() int64 {
	if len(t.Dims) == 0 {
		return 1
	}
	return t.Dims[0]
}

// NumRows returns the number of rows, the product of Dims[1:].
func (t *TensorInfo) NumRows() int64 {
	n := int64(1)
	for i := 1; i < len(t.Dims); i++ {
		n *= t.Dims[i]
	}
	return n
}

// File is an open GGUF model: its metadata and tensor directory, with the
// tensor data memory-mapped. A split model (several shard files) is one
// File. Its fields must not be modified.
type File struct {
	Path      string // the file, or the first shard of a split model
	Version   uint32 // GGUF version, 2 or 3
	Alignment uint64 // data alignment of the first shard
	KVs       []KV   // metadata in file order (of the first shard)
	Tensors   []*TensorInfo
	Shards    []string // every file of the model in shard order (just Path if not split)

	keyIndex    map[string]int
	tensorIndex map[string]*TensorInfo
	maps        [][]byte
	unpadded    bool // see header.unpadded
}

var splitName = regexp.MustCompile(`^(.*)-([0-9]{5})-of-([0-9]{5})\.gguf$`)

// Open opens and validates the GGUF file at path and maps its data. If
// the file is one shard of a split model (keys split.count > 1 and a name
// like model-00002-of-00010.gguf) all shards are opened together as one
// File. Call Close to unmap.
func Open(path string) (*File, error) {
	m, h, err := openOne(path)
	if err != nil {
		return nil, err
	}
	count, err := splitCount(path, h)
	if err != nil || count <= 1 {
		if err != nil {
			unmap(m)
			return nil, err
		}
		f := newFile(path, h)
		f.maps = [][]byte{m}
		return f, nil
	}
	return openSplit(path, m, h, count)
}

// Parse decodes a GGUF file held in memory (name is used in errors and as
// each tensor's Shard). Tensor data alias data. Split models are not
// joined: Parse reads exactly one file.
func Parse(name string, data []byte) (*File, error) {
	h, err := parse(name, data)
	if err != nil {
		return nil, err
	}
	return newFile(name, h), nil
}

func newFile(path string, h *header) *File {
	f := &File{
		Path:        path,
		Version:     h.version,
		Alignment:   h.alignment,
		KVs:         h.kvs,
		Tensors:     h.tensors,
		Shards:      []string{path},
		keyIndex:    h.keyIndex,
		tensorIndex: make(map[string]*TensorInfo, len(h.tensors)),
		unpadded:    h.unpadded,
	}
	for _, t := range h.tensors {
		f.tensorIndex[t.Name] = t
	}
	return f
}

// openOne maps and parses one file.
func openOne(path string) ([]byte, *header, error) {
	m, err := mapFile(path)
	if err != nil {
		return nil, nil, err
	}
	h, err := parse(path, m)
	if err != nil {
		unmap(m)
		return nil, nil, err
	}
	return m, h, nil
}

func mapFile(path string) ([]byte, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	size := st.Size()
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("gguf: %s: not a regular file", path)
	}
	if size == 0 {
		return []byte{}, nil
	}
	if size > math.MaxInt {
		return nil, fmt.Errorf("gguf: %s: file of %d bytes is too large to map", path, size)
	}
	m, err := mmap.File(fd, int(size))
	if err != nil {
		return nil, fmt.Errorf("gguf: %s: mmap: %w", path, err)
	}
	return m, nil
}

func unmap(m []byte) error { return mmap.Unmap(m) }

// splitCount returns the split.count of a parsed file, or 0 if it has none.
func splitCount(path string, h *header) (int, error) {
	i, ok := h.keyIndex[KeySplitCount]
	if !ok {
		return 0, nil
	}
	n, err := h.kvs[i].Value.AsUint()
	if err != nil || n > math.MaxUint16 {
		return 0, &FormatError{Path: path, Key: KeySplitCount, Msg: fmt.Sprintf("bad shard count %v (%v)", h.kvs[i].Value, err)}
	}
	return int(n), nil
}

func openSplit(path string, m0 []byte, h0 *header, count int) (*File, error) {
	match := splitName.FindStringSubmatch(path)
	if match == nil {
		unmap(m0)
		return nil, fmt.Errorf("gguf: %s: split.count is %d but the name is not <prefix>-NNNNN-of-NNNNN.gguf", path, count)
	}
	prefix := match[1]
	no, _ := strconv.Atoi(match[2])
	of, _ := strconv.Atoi(match[3])
	if of != count || no < 1 || no > count {
		unmap(m0)
		return nil, fmt.Errorf("gguf: %s: file name says shard %d of %d but split.count is %d", path, no, of, count)
	}
	maps := make([][]byte, count)
	heads := make([]*header, count)
	paths := make([]string, count)
	maps[no-1], heads[no-1] = m0, h0
	fail := func(err error) (*File, error) {
		for _, m := range maps {
			if m != nil {
				unmap(m)
			}
		}
		return nil, err
	}
	for i := range count {
		paths[i] = fmt.Sprintf("%s-%05d-of-%05d.gguf", prefix, i+1, count)
		if heads[i] == nil {
			m, h, err := openOne(paths[i])
			if err != nil {
				return fail(fmt.Errorf("gguf: %s: shard %d of %d: %w", path, i+1, count, err))
			}
			maps[i], heads[i] = m, h
		}
		h := heads[i]
		for _, want := range []struct {
			key string
			n   int
		}{{KeySplitNo, i}, {KeySplitCount, count}} {
			j, ok := h.keyIndex[want.key]
			if !ok {
				return fail(&FormatError{Path: paths[i], Key: want.key, Msg: "missing in a shard of a split model"})
			}
			if n, err := h.kvs[j].Value.AsUint(); err != nil || n != uint64(want.n) {
				return fail(&FormatError{Path: paths[i], Key: want.key, Msg: fmt.Sprintf("is %v, want %d", h.kvs[j].Value, want.n)})
			}
		}
	}
	f := newFile(paths[0], heads[0])
	f.Shards = paths
	f.maps = maps
	f.Tensors = nil
	for i, h := range heads {
		for _, t := range h.tensors {
			if _, dup := f.tensorIndex[t.Name]; dup && i > 0 {
				return fail(&FormatError{Path: paths[i], Tensor: t.Name, Msg: "tensor also in an earlier shard"})
			}
			f.tensorIndex[t.Name] = t
			f.Tensors = append(f.Tensors, t)
		}
	}
	if v, ok := f.Lookup(KeySplitTensorsCount); ok {
		if n, err := v.AsUint(); err != nil || n != uint64(len(f.Tensors)) {
			return fail(&FormatError{Path: paths[0], Key: KeySplitTensorsCount,
				Msg: fmt.Sprintf("is %v but the %d shards hold %d tensors", v, count, len(f.Tensors))})
		}
	}
	return f, nil
}

// Mapped reports whether the tensors' Data are views of read-only file
// mappings (Open), whose pages the system can drop and read again, rather
// than of memory the caller gave (Parse).
func (f *File) Mapped() bool { return len(f.maps) > 0 }

// Close unmaps the file data. Tensor Data slices must not be used after
// Close; they are set to nil.
func (f *File) Close() error {
	var errs []error
	for _, m := range f.maps {
		if err := unmap(m); err != nil {
			errs = append(errs, err)
		}
	}
	f.maps = nil
	for _, t := range f.Tensors {
		t.Data = nil
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("gguf: %s: munmap: %w", f.Path, err)
	}
	return nil
}

// Lookup returns the value of key.
func (f *File) Lookup(key string) (Value, bool) {
	i, ok := f.keyIndex[key]
	if !ok {
		return Value{}, false
	}
	return f.KVs[i].Value, true
}

// Tensor returns the tensor called name.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	t, ok := f.tensorIndex[name]
	return t, ok
}

// Architecture returns general.architecture, or "" if it is missing or not
// a string.
func (f *File) Architecture() string {
	s, _ := f.String("general.architecture")
	return s
}

// get returns key's value converted by conv, with errors that name the file
// and key.
func get[T any](f *File, key string, conv func(Value) (T, error)) (T, error) {
	v, ok := f.Lookup(key)
	if !ok {
		var zero T
		return zero, fmt.Errorf("gguf: %s: key %q: %w", f.Path, key, ErrMissingKey)
	}
	x, err := conv(v)
	if err != nil {
		return x, fmt.Errorf("gguf: %s: key %q: %w", f.Path, key, err)
	}
	return x, nil
}

// String returns the string value of key.
func (f *File) String(key string) (string, error) { return get(f, key, Value.AsString) }

// Uint returns the value of key, which may have any integer type and must
// not be negative.
func (f *File) Uint(key string) (uint64, error) { return get(f, key, Value.AsUint) }

// Int returns the value of key, which may have any integer type and must
// fit in an int64.
func (f *File) Int(key string) (int64, error) { return get(f, key, Value.AsInt) }

// Float returns the value of key, an f32, f64 or integer.
func (f *File) Float(key string) (float64, error) { return get(f, key, Value.AsFloat) }

// Bool returns the bool value of key.
func (f *File) Bool(key string) (bool, error) { return get(f, key, Value.AsBool) }

// Strings returns the array of strings at key.
func (f *File) Strings(key string) ([]string, error) { return get(f, key, Value.AsStrings) }

// Ints returns the array of integers (of any integer type) at key.
func (f *File) Ints(key string) ([]int64, error) { return get(f, key, Value.AsInts) }

// Floats returns the array of f32, f64 (or integers) at key.
func (f *File) Floats(key string) ([]float64, error) { return get(f, key, Value.AsFloats) }
