package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"sort"

	"github.com/glmrun/glmrun/tensor"
)

// Magic is the first four bytes of every GGUF file, "GGUF", read as a
// little-endian uint32.
const Magic = 0x46554747

// DefaultAlignment is the data alignment of a file without general.alignment.
const DefaultAlignment = 32

// KeyAlignment is the metadata key that sets the data alignment.
const KeyAlignment = "general.alignment"

const (
	maxDims       = 4
	maxNesting    = 64      // deepest array-of-array nesting accepted
	maxAlignment  = 1 << 30 // larger alignments are certainly corrupt
	minKVSize     = 8 + 4   // key length + value type
	minTensorSize = 8 + 4 + 4 + 8
)

// decoder reads GGUF primitives from b, tracking the offset for errors.
type decoder struct {
	path string
	b    []byte
	off  int64
	// context for errors
	key    string
	tensor string
}

func (d *decoder) errf(off int64, format string, args ...any) *FormatError {
	return &FormatError{Path: d.path, Off: off, Key: d.key, Tensor: d.tensor, Msg: fmt.Sprintf(format, args...)}
}

func (d *decoder) remaining() int64 { return int64(len(d.b)) - d.off }

// need checks that n more bytes are there.
func (d *decoder) need(n int64, what string) error {
	if n < 0 || n > d.remaining() {
		return d.errf(d.off, "truncated file: %s needs %d bytes, %d left", what, n, d.remaining())
	}
	return nil
}

func (d *decoder) u32(what string) (uint32, error) {
	if err := d.need(4, what); err != nil {
		return 0, err
	}
	x := binary.LittleEndian.Uint32(d.b[d.off:])
	d.off += 4
	return x, nil
}

func (d *decoder) u64(what string) (uint64, error) {
	if err := d.need(8, what); err != nil {
		return 0, err
	}
	x := binary.LittleEndian.Uint64(d.b[d.off:])
	d.off += 8
	return x, nil
}

// length reads a u64 count of items of at least minSize bytes each and
// checks that that many items can fit in the rest of the file.
func (d *decoder) length(what string, minSize int64) (int, error) {
	start := d.off
	n, err := d.u64(what)
	if err != nil {
		return 0, err
	}
	if minSize < 1 {
		minSize = 1
	}
	if n > uint64(d.remaining()/minSize) {
		return 0, d.errf(start, "%s %d past the end of the file (%d bytes left)", what, n, d.remaining())
	}
	return int(n), nil
}

func (d *decoder) str(what string) (string, error) {
	n, err := d.length(what+" length", 1)
	if err != nil {
		return "", err
	}
	s := string(d.b[d.off : d.off+int64(n)])
	d.off += int64(n)
	return s, nil
}

// value reads a value of type t (already read).
func (d *decoder) value(t ValueType, depth int) (Value, error) {
	start := d.off
	switch {
	case t == TypeString:
		s, err := d.str("string")
		return String(s), err
	case t == TypeArray:
		return d.array(depth)
	case t.valid():
		sz := int64(t.size())
		if err := d.need(sz, t.String()+" value"); err != nil {
			return Value{}, err
		}
		bits := getBits(d.b[d.off:], int(sz))
		if t == TypeBool && bits > 1 {
			return Value{}, d.errf(start, "bool value %d is not 0 or 1", bits)
		}
		d.off += sz
		return scalar(t, bits), nil
	}
	return Value{}, d.errf(start-4, "unknown value type %d", uint32(t))
}

func (d *decoder) array(depth int) (Value, error) {
	if depth >= maxNesting {
		return Value{}, d.errf(d.off, "arrays nested more than %d deep", maxNesting)
	}
	et, err := d.u32("array element type")
	if err != nil {
		return Value{}, err
	}
	elem := ValueType(et)
	if !elem.valid() {
		return Value{}, d.errf(d.off-4, "unknown array element type %d", et)
	}
	v := Value{typ: TypeArray, elem: elem}
	switch elem {
	case TypeString:
		n, err := d.length("string array length", 8)
		if err != nil {
			return Value{}, err
		}
		// First pass: bounds and total size, so that all strings share
		// one allocation.
		off, total := d.off, int64(0)
		for i := 0; i < n; i++ {
			if int64(len(d.b))-off < 8 {
				return Value{}, d.errf(off, "truncated file: string %d of %d", i, n)
			}
			l := binary.LittleEndian.Uint64(d.b[off:])
			if l > uint64(int64(len(d.b))-off-8) {
				return Value{}, d.errf(off, "string %d of %d: length %d past the end of the file", i, n, l)
			}
			off += 8 + int64(l)
			total += int64(l)
		}
		buf := make([]byte, 0, total)
		ends := make([]int, n)
		for i := 0; i < n; i++ {
			l := int64(binary.LittleEndian.Uint64(d.b[d.off:]))
			buf = append(buf, d.b[d.off+8:d.off+8+l]...)
			ends[i] = len(buf)
			d.off += 8 + l
		}
		all := string(buf)
		v.strs = make([]string, n)
		prev := 0
		for i, e := range ends {
			v.strs[i] = all[prev:e]
			prev = e
		}
		v.n = n
	case TypeArray:
		n, err := d.length("nested array length", 12)
		if err != nil {
			return Value{}, err
		}
		v.arrs = make([]Value, 0, n) // n is bounded by the bytes left
		for i := 0; i < n; i++ {
			a, err := d.array(depth + 1)
			if err != nil {
				return Value{}, err
			}
			v.arrs = append(v.arrs, a)
		}
		v.n = n
	default:
		sz := int64(elem.size())
		start := d.off
		n, err := d.length(elem.String()+" array length", sz)
		if err != nil {
			return Value{}, err
		}
		raw := d.b[d.off : d.off+int64(n)*sz]
		if elem == TypeBool {
			for i, c := range raw {
				if c > 1 {
					return Value{}, d.errf(start+8+int64(i), "bool array element %d is %d, not 0 or 1", i, c)
				}
			}
		}
		v.raw = append([]byte(nil), raw...)
		v.n = n
		d.off += int64(n) * sz
	}
	return v, nil
}

// header is what parse learns about one GGUF file (one shard).
type header struct {
	version   uint32
	kvs       []KV
	keyIndex  map[string]int
	tensors   []*TensorInfo
	alignment uint64
	dataStart int64
	// unpadded: the file has no tensors and ends right after the tensor
	// infos, without padding (as older llama.cpp wrote vocab-only files).
	unpadded bool
}

// parse decodes the GGUF file b (the whole file, usually a memory map).
// Tensor Data slices alias b. path is used in error messages and stored as
// each tensor's Shard.
func parse(path string, b []byte) (*header, error) {
	d := &decoder{path: path, b: b}
	if len(b) < 4 {
		return nil, d.errf(0, "not a GGUF file: %d bytes, too short for the magic", len(b))
	}
	magic, _ := d.u32("magic")
	if magic != Magic {
		if magic == 0x47475546 {
			return nil, d.errf(0, "big-endian GGUF is not supported")
		}
		return nil, d.errf(0, "not a GGUF file: magic %q", b[:4])
	}
	version, err := d.u32("version")
	if err != nil {
		return nil, err
	}
	switch {
	case version == 1:
		return nil, d.errf(4, "unsupported GGUF version 1 (32-bit counts); only 2 and 3 are supported")
	case version != 2 && version != 3:
		if bits.ReverseBytes32(version) == 2 || bits.ReverseBytes32(version) == 3 {
			return nil, d.errf(4, "big-endian GGUF is not supported")
		}
		return nil, d.errf(4, "unsupported GGUF version %d; only 2 and 3 are supported", version)
	}
	h := &header{version: version, alignment: DefaultAlignment}
	tensorCountOff := d.off
	nt, err := d.u64("tensor count")
	if err != nil {
		return nil, err
	}
	nkv, err := d.length("metadata count", minKVSize)
	if err != nil {
		return nil, err
	}
	// Metadata.
	h.kvs = make([]KV, 0, nkv)
	h.keyIndex = make(map[string]int, nkv)
	for i := 0; i < nkv; i++ {
		kvOff := d.off
		key, err := d.str(fmt.Sprintf("key %d", i))
		if err != nil {
			return nil, err
		}
		d.key = key
		if _, dup := h.keyIndex[key]; dup {
			return nil, d.errf(kvOff, "duplicate key")
		}
		t, err := d.u32("value type")
		if err != nil {
			return nil, err
		}
		v, err := d.value(ValueType(t), 0)
		if err != nil {
			return nil, err
		}
		if key == KeyAlignment {
			a, err := v.AsUint()
			if err != nil {
				return nil, d.errf(kvOff, "alignment %v", err)
			}
			if a == 0 || a&(a-1) != 0 || a > maxAlignment {
				return nil, d.errf(kvOff, "alignment %d is not a power of two up to %d", a, maxAlignment)
			}
			h.alignment = a
		}
		d.key = ""
		h.keyIndex[key] = len(h.kvs)
		h.kvs = append(h.kvs, KV{Key: key, Value: v})
	}
	// Tensor infos.
	if nt > uint64(d.remaining()/minTensorSize) {
		return nil, d.errf(tensorCountOff, "tensor count %d past the end of the file (%d bytes left)", nt, d.remaining())
	}
	h.tensors = make([]*TensorInfo, 0, nt)
	names := make(map[string]bool, nt)
	var offs []int64
	for i := 0; i < int(nt); i++ {
		tiOff := d.off
		name, err := d.str(fmt.Sprintf("tensor %d name", i))
		if err != nil {
			return nil, err
		}
		d.tensor = name
		if names[name] {
			return nil, d.errf(tiOff, "duplicate tensor name")
		}
		names[name] = true
		nd, err := d.u32("dimension count")
		if err != nil {
			return nil, err
		}
		if nd > maxDims {
			return nil, d.errf(d.off-4, "%d dimensions, at most %d allowed", nd, maxDims)
		}
		ti := &TensorInfo{Name: name, Dims: make([]int64, nd), Shard: path}
		for j := range ti.Dims {
			x, err := d.u64("dimension")
			if err != nil {
				return nil, err
			}
			if x > math.MaxInt64 {
				return nil, d.errf(d.off-8, "dimension %d is %d, too large", j, x)
			}
			ti.Dims[j] = int64(x)
		}
		typ, err := d.u32("type")
		if err != nil {
			return nil, err
		}
		ti.Type = tensor.Type(typ)
		if !ti.Type.Known() {
			return nil, d.errf(d.off-4, "unknown ggml type %d", typ)
		}
		if ti.Offset, err = d.u64("offset"); err != nil {
			return nil, err
		}
		size, err := tensorSize(ti)
		if err != nil {
			return nil, d.errf(tiOff, "%v", err)
		}
		ti.size = size
		h.tensors = append(h.tensors, ti)
		offs = append(offs, tiOff)
		d.tensor = ""
	}
	// Data section.
	a := int64(h.alignment)
	h.dataStart = (d.off + a - 1) / a * a
	h.unpadded = len(h.tensors) == 0 && d.off == int64(len(b)) && h.dataStart != d.off
	dataLen := int64(len(b)) - h.dataStart
	for i, ti := range h.tensors {
		d.tensor = ti.Name
		if ti.Offset%h.alignment != 0 {
			return nil, d.errf(offs[i], "data offset %d is not a multiple of the alignment %d", ti.Offset, h.alignment)
		}
		if ti.Offset > uint64(max(dataLen, 0)) || ti.size > dataLen-int64(ti.Offset) {
			return nil, d.errf(offs[i], "data [%d, +%d) is outside the data section (%d bytes at offset %d; file truncated?)",
				ti.Offset, ti.size, max(dataLen, 0), h.dataStart)
		}
		lo := h.dataStart + int64(ti.Offset)
		ti.Data = b[lo : lo+ti.size : lo+ti.size]
	}
	d.tensor = ""
	if err := checkOverlap(d, h.dataStart, h.tensors); err != nil {
		return nil, err
	}
	return h, nil
}

// tensorSize checks ti's dims and type and returns its size in bytes.
func tensorSize(ti *TensorInfo) (int64, error) {
	n := int64(1)
	for _, x := range ti.Dims {
		if x != 0 && n > math.MaxInt64/x {
			return 0, fmt.Errorf("element count of dims %v overflows int64", ti.Dims)
		}
		n *= x
	}
	ne0 := int64(1)
	if len(ti.Dims) > 0 {
		ne0 = ti.Dims[0]
	}
	bs := int64(ti.Type.BlockSize())
	if ne0%bs != 0 {
		return 0, fmt.Errorf("row length %d is not a multiple of the %s block size %d", ne0, ti.Type, bs)
	}
	if n == 0 {
		return 0, nil
	}
	blocks := n / bs
	ts := int64(ti.Type.TypeSize())
	if blocks > math.MaxInt64/ts {
		return 0, fmt.Errorf("byte size of dims %v overflows int64", ti.Dims)
	}
	return blocks * ts, nil
}

func checkOverlap(d *decoder, dataStart int64, ts []*TensorInfo) error {
	idx := make([]int, 0, len(ts))
	for i, t := range ts {
		if t.size > 0 {
			idx = append(idx, i)
		}
	}
	sort.Slice(idx, func(a, b int) bool { return ts[idx[a]].Offset < ts[idx[b]].Offset })
	for k := 1; k < len(idx); k++ {
		p, c := ts[idx[k-1]], ts[idx[k]]
		if p.Offset+uint64(p.size) > c.Offset {
			d.tensor = c.Name
			return d.errf(dataStart+int64(c.Offset), "data overlaps tensor %q (data offsets %d+%d and %d)", p.Name, p.Offset, p.size, c.Offset)
		}
	}
	return nil
}
