package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/glmrun/glmrun/internal/mmap"
)

// MaxHeaderSize bounds the JSON header, as the reference implementation
// does (100 MB): a real header is a few megabytes at most.
const MaxHeaderSize = 100_000_000

// MetadataKey is the header entry that holds the free-form string metadata
// instead of a tensor.
const MetadataKey = "__metadata__"

// FormatError reports an invalid safetensors file: which file, which
// tensor (when one is concerned) and what is wrong.
type FormatError struct {
	Path   string // the file
	Tensor string // tensor name, or ""
	Msg    string
}

// Error formats the problem as "safetensors: FILE: tensor "NAME": what".
func (e *FormatError) Error() string {
	var sb strings.Builder
	sb.WriteString("safetensors: ")
	if e.Path != "" {
		sb.WriteString(e.Path)
		sb.WriteString(": ")
	}
	if e.Tensor != "" {
		fmt.Fprintf(&sb, "tensor %q: ", e.Tensor)
	}
	sb.WriteString(e.Msg)
	return sb.String()
}

// Tensor is one tensor of a safetensors file.
type Tensor struct {
	Name  string
	DType DType
	// Shape is outermost first (torch order): a [rows, cols] matrix has
	// cols contiguous elements per row.
	Shape []int64
	// Data is the tensor's bytes, a slice of the file's mapping: valid
	// until the File is closed, never to be written.
	Data []byte
	// Path is the file the tensor is in, Offset where its data starts.
	Path   string
	Offset int64
}

// NumElements returns the product of the shape (1 for a scalar).
func (t *Tensor) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// ShapeString formats the shape as torch prints it: [1024, 128].
func (t *Tensor) ShapeString() string { return shapeString(t.Shape) }

func shapeString(shape []int64) string {
	s := make([]string, len(shape))
	for i, d := range shape {
		s[i] = strconv.FormatInt(d, 10)
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// File is an open safetensors file.
type File struct {
	Path string
	// Metadata is the header's __metadata__ (often {"format": "pt"}).
	Metadata map[string]string
	// Tensors are sorted by name, the order the reference library (and
	// llama.cpp's converter) iterates them in.
	Tensors []*Tensor

	byName map[string]*Tensor
	mapped []byte // the mmap to release on Close; nil for Parse
}

// Tensor returns the tensor called name.
func (f *File) Tensor(name string) (*Tensor, bool) {
	t, ok := f.byName[name]
	return t, ok
}

// Close unmaps the file. The tensors' Data must not be used afterwards.
func (f *File) Close() error {
	m := f.mapped
	f.mapped = nil
	return mmap.Unmap(m)
}

// Open maps and validates the safetensors file at path.
func Open(path string) (*File, error) {
	m, err := mapFile(path)
	if err != nil {
		return nil, err
	}
	f, err := Parse(path, m)
	if err != nil {
		mmap.Unmap(m)
		return nil, err
	}
	f.mapped = m
	return f, nil
}

func mapFile(path string) ([]byte, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, &FormatError{Path: path, Msg: "not a regular file"}
	}
	size := st.Size()
	if size == 0 {
		return []byte{}, nil
	}
	if size > math.MaxInt {
		return nil, &FormatError{Path: path, Msg: fmt.Sprintf("file of %d bytes is too large to map", size)}
	}
	m, err := mmap.File(fd, int(size))
	if err != nil {
		return nil, fmt.Errorf("safetensors: %s: mmap: %w", path, err)
	}
	return m, nil
}

// headerEntry is one tensor entry of the JSON header.
type headerEntry struct {
	DType       *string       `json:"dtype"`
	Shape       []json.Number `json:"shape"`
	DataOffsets []json.Number `json:"data_offsets"`
}

// Parse validates a whole safetensors file held in data (name is used in
// errors). The returned tensors' Data are slices of data. Every error is a
// *FormatError.
func Parse(name string, data []byte) (*File, error) {
	bad := func(tensor, format string, args ...any) error {
		return &FormatError{Path: name, Tensor: tensor, Msg: fmt.Sprintf(format, args...)}
	}
	if len(data) < 8 {
		return nil, bad("", "file of %d bytes is shorter than the 8-byte header length", len(data))
	}
	n := binary.LittleEndian.Uint64(data)
	if n > MaxHeaderSize {
		return nil, bad("", "header length %d is over the %d-byte limit", n, MaxHeaderSize)
	}
	if n > uint64(len(data)-8) {
		return nil, bad("", "header length %d runs past the end of the file (%d bytes): truncated?", n, len(data))
	}
	hdr := data[8 : 8+n]
	body := data[8+n:]
	if !utf8.Valid(hdr) {
		return nil, bad("", "header is not valid UTF-8")
	}
	// The header may be padded with spaces; it must be one JSON object.
	trimmed := bytes.TrimRight(hdr, " ")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, bad("", "header is not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, bad("", "header is not a JSON object")
	}
	f := &File{Path: name, byName: map[string]*Tensor{}}
	type span struct {
		begin, end uint64
		t          *Tensor
	}
	var spans []span
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, bad("", "header JSON: %v", err)
		}
		key, ok := tok.(string)
		if !ok {
			return nil, bad("", "header JSON: key %v is not a string", tok)
		}
		if seen[key] {
			return nil, bad(key, "appears twice in the header")
		}
		seen[key] = true
		if key == MetadataKey {
			var md map[string]string
			if err := dec.Decode(&md); err != nil {
				return nil, bad("", "%s is not an object of strings: %v", MetadataKey, err)
			}
			f.Metadata = md
			continue
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, bad(key, "header JSON: %v", err)
		}
		t, begin, end, err := parseEntry(key, raw)
		if err != nil {
			return nil, &FormatError{Path: name, Tensor: key, Msg: err.Error()}
		}
		spans = append(spans, span{begin, end, t})
	}
	if _, err := dec.Token(); err != nil {
		return nil, bad("", "header JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, bad("", "header JSON: data after the object")
	}

	// The tensors must tile the data section: sorted by offset, each starts
	// where the previous ended, and the last ends at the end of the file.
	slices.SortFunc(spans, func(a, b span) int {
		if a.begin != b.begin {
			if a.begin < b.begin {
				return -1
			}
			return 1
		}
		if a.end < b.end {
			return -1
		} else if a.end > b.end {
			return 1
		}
		return 0
	})
	pos := uint64(0)
	for _, s := range spans {
		switch {
		case s.end > uint64(len(body)):
			return nil, bad(s.t.Name, "data_offsets [%d, %d] run past the %d data bytes of the file: truncated or a lying header",
				s.begin, s.end, len(body))
		case s.begin < pos:
			return nil, bad(s.t.Name, "data_offsets [%d, %d] overlap the previous tensor, which ends at %d", s.begin, s.end, pos)
		case s.begin > pos:
			return nil, bad(s.t.Name, "data_offsets [%d, %d] leave a gap after byte %d", s.begin, s.end, pos)
		}
		s.t.Data = body[s.begin:s.end:s.end]
		s.t.Offset = int64(8 + n + s.begin)
		pos = s.end
	}
	if pos != uint64(len(body)) {
		return nil, bad("", "tensors cover %d of the %d data bytes", pos, len(body))
	}
	for _, s := range spans {
		s.t.Path = name
		f.Tensors = append(f.Tensors, s.t)
		f.byName[s.t.Name] = s.t
	}
	slices.SortFunc(f.Tensors, func(a, b *Tensor) int { return strings.Compare(a.Name, b.Name) })
	return f, nil
}

// parseEntry checks one tensor entry and returns the tensor (without data)
// and its data range.
func parseEntry(name string, raw json.RawMessage) (t *Tensor, begin, end uint64, err error) {
	var e headerEntry
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&e); err != nil {
		return nil, 0, 0, fmt.Errorf("bad entry: %v", err)
	}
	if name == "" {
		return nil, 0, 0, errors.New("empty tensor name")
	}
	if e.DType == nil {
		return nil, 0, 0, errors.New("no dtype")
	}
	dt := DType(*e.DType)
	if !dt.Known() {
		return nil, 0, 0, fmt.Errorf("unknown dtype %q", *e.DType)
	}
	if e.Shape == nil {
		return nil, 0, 0, errors.New("no shape")
	}
	shape := make([]int64, len(e.Shape))
	numel := int64(1)
	for i, s := range e.Shape {
		d, err := strconv.ParseInt(string(s), 10, 64)
		if err != nil || d < 0 {
			return nil, 0, 0, fmt.Errorf("shape entry %s is not a non-negative integer", s)
		}
		shape[i] = d
		if d != 0 && numel > math.MaxInt64/d {
			return nil, 0, 0, fmt.Errorf("shape %v has too many elements", e.Shape)
		}
		numel *= d
	}
	if len(e.DataOffsets) != 2 {
		return nil, 0, 0, fmt.Errorf("data_offsets has %d entries, want 2", len(e.DataOffsets))
	}
	for i, o := range e.DataOffsets {
		v, err := strconv.ParseUint(string(o), 10, 64)
		if err != nil {
			return nil, 0, 0, fmt.Errorf("data_offsets entry %s is not a non-negative integer", o)
		}
		if i == 0 {
			begin = v
		} else {
			end = v
		}
	}
	if end < begin {
		return nil, 0, 0, fmt.Errorf("data_offsets [%d, %d] end before they begin", begin, end)
	}
	size, err := dt.ByteSize(numel)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("shape %s: %v", shapeString(shape), err)
	}
	if uint64(size) != end-begin {
		return nil, 0, 0, fmt.Errorf("%s %s takes %d bytes, data_offsets [%d, %d] hold %d",
			dt, shapeString(shape), size, begin, end, end-begin)
	}
	return &Tensor{Name: name, DType: dt, Shape: shape}, begin, end, nil
}

// Evict tells the kernel that t's data will not be read again soon, so
// that its pages leave the process's resident memory (MADV_DONTNEED on
// the file mapping; the page cache keeps them, and a later read faults
// them back in). A converter that reads each tensor once calls it as it
// goes, so that its resident set stays a few chunks rather than growing to
// the whole checkpoint. It does nothing for a File from Parse.
func (f *File) Evict(t *Tensor) error { return f.EvictRange(t, 0, int64(len(t.Data))) }

// EvictRange is Evict for the bytes [from, to) of t.Data. Pages shared
// with a neighbouring range are released too; reading them again costs a
// page fault, not a disk read.
func (f *File) EvictRange(t *Tensor, from, to int64) error {
	from, to = max(from, 0), min(to, int64(len(t.Data)))
	if len(f.mapped) == 0 || from >= to || t.Path != f.Path {
		return nil
	}
	page := int64(os.Getpagesize())
	start := (t.Offset + from) / page * page
	end := min((t.Offset+to+page-1)/page*page, int64(len(f.mapped)))
	if start >= end {
		return nil
	}
	return mmap.DontNeed(f.mapped[start:end])
}
