package dump

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/glmrun/glmrun/internal/npy"
)

// IndexFile is the name of the index in a dump directory (both layouts).
const IndexFile = "index.json"

// Info describes the run a dump comes from; it goes into index.json.
type Info struct {
	Model  string // model file or name
	Tokens []int  // the token ids of the run, in order
}

// Writer writes a glmrun dump directory (see the package comment). Each
// tensor goes to its .npy file as it arrives, so a dump of a big model is
// not held in memory; Close writes the .npy headers and index.json.
//
// A name seen again is appended along the outermost axis: a forward pass
// run one token at a time (shape [1, width] per call) yields one
// [nTokens, width] array per name, the same file a whole-prompt pass
// writes, so decode dumps compare with prefill dumps. A repeat must have
// the same layer and the same inner dimensions.
//
// IDHook does the same for integer tensors (model.IDHook), which Close
// writes as int32 .npy files, marked "dtype": "i32" in the index.
//
// Errors (a bad shape, a failed write) are sticky: the first one stops the
// dump and is returned by Close. A Writer is safe for concurrent use, but
// the index lists tensors in the order the calls arrive.
type Writer struct {
	mu      sync.Mutex
	dir     string
	info    Info
	entries []*wentry
	byName  map[string]*wentry
	files   map[string]bool // file names in use
	buf     []byte
	err     error
	closed  bool
}

// wentry is one tensor being written.
type wentry struct {
	name  string
	layer int
	shape []int // current shape: shape[0] grows with each append
	file  string
	f     *os.File // float tensors: written as they arrive

	// Integer tensors are kept in memory until Close: their rows may grow
	// from call to call (see IDHook).
	ints   bool
	idRows [][]int32
}

// headerLen is the space reserved for each .npy header, written at Close
// when the final shape is known. It is a multiple of 64, as the format
// asks, and fits any shape of up to 8 dimensions.
const headerLen = 256

// Create makes dir (and its parents) if needed and returns a Writer that
// dumps into it. Existing files of the same names are overwritten; an
// existing index.json is removed first, so that a dump that fails halfway
// does not leave an old index describing half-overwritten files.
func Create(dir string, info Info) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("dump: %w", err)
	}
	if err := os.Remove(filepath.Join(dir, IndexFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("dump: %w", err)
	}
	return &Writer{
		dir:    dir,
		info:   Info{Model: info.Model, Tokens: slices.Clone(info.Tokens)},
		byName: make(map[string]*wentry),
		files:  map[string]bool{IndexFile: true},
	}, nil
}

// Hook records one tensor: name (e.g. "blk.3.attn_out"), layer (-1 for
// globals such as "embd"), shape (row-major, outermost first) and data,
// which is copied to disk before Hook returns. It has the signature of
// model.Hook: pass w.Hook as the forward pass's hook.
func (w *Writer) Hook(name string, layer int, shape []int, data []float32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return
	}
	if w.closed {
		w.err = fmt.Errorf("dump: %s: tensor %q: hook called after Close", w.dir, name)
		return
	}
	if err := w.add(name, layer, shape, data); err != nil {
		w.err = fmt.Errorf("dump: %s: tensor %q: %w", w.dir, name, err)
	}
}

// IDHook records one integer tensor, such as the experts or the keys a
// layer selected; it has the signature of model.IDHook. The tensor is
// written as an int32 .npy file at Close. Calls for the same name are
// appended along the outermost axis like Hook's, except that the
// innermost dimension may change from call to call (a decode step sees
// more keys than the one before): Close pads every row with -1 to the
// widest row seen.
func (w *Writer) IDHook(name string, layer int, shape []int, ids []int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return
	}
	if w.closed {
		w.err = fmt.Errorf("dump: %s: tensor %q: hook called after Close", w.dir, name)
		return
	}
	if err := w.addIDs(name, layer, shape, ids); err != nil {
		w.err = fmt.Errorf("dump: %s: tensor %q: %w", w.dir, name, err)
	}
}

func (w *Writer) addIDs(name string, layer int, shape []int, ids []int32) error {
	if err := checkHookShape(name, shape, len(ids)); err != nil {
		return err
	}
	e := w.byName[name]
	if e == nil {
		e = &wentry{name: name, layer: layer, shape: slices.Clone(shape), file: w.fileName(name), ints: true}
		e.shape[0] = 0
		w.entries = append(w.entries, e)
		w.byName[name] = e
	} else {
		switch {
		case !e.ints:
			return errors.New("integer data for a float tensor")
		case layer != e.layer:
			return fmt.Errorf("layer %d, earlier calls said %d", layer, e.layer)
		case len(shape) != len(e.shape) || !slices.Equal(shape[1:len(shape)-1], e.shape[1:len(shape)-1]):
			return fmt.Errorf("shape %v cannot extend earlier %v (inner dimensions differ)", shape, e.shape)
		}
	}
	// Rows are the innermost vectors; a 1-D tensor has rows of one value.
	width, rows := 1, shape[0]
	if len(shape) > 1 {
		width = shape[len(shape)-1]
		rows = len(ids)
		if width > 0 {
			rows /= width
		} else {
			rows = 1
			for _, d := range shape[:len(shape)-1] {
				rows *= d
			}
		}
	}
	for r := range rows {
		e.idRows = append(e.idRows, slices.Clone(ids[r*width:(r+1)*width]))
	}
	e.shape[0] += shape[0]
	if len(shape) > 1 {
		e.shape[len(shape)-1] = max(e.shape[len(shape)-1], width)
	}
	return nil
}

// checkHookShape checks a hook call's shape against its data length n.
func checkHookShape(name string, shape []int, n int) error {
	if name == "" {
		return errors.New("empty name")
	}
	if len(shape) == 0 || len(shape) > 8 {
		return fmt.Errorf("shape %v: want 1 to 8 dimensions", shape)
	}
	p := 1
	for _, d := range shape {
		if d < 0 || (d > 0 && p > math.MaxInt32/d) {
			return fmt.Errorf("bad shape %v", shape)
		}
		p *= d
	}
	if p != n {
		return fmt.Errorf("shape %v needs %d values, got %d", shape, p, n)
	}
	return nil
}

func (w *Writer) add(name string, layer int, shape []int, data []float32) error {
	if err := checkHookShape(name, shape, len(data)); err != nil {
		return err
	}
	e := w.byName[name]
	if e != nil && e.ints {
		return errors.New("float data for an integer tensor")
	}
	if e == nil {
		file := w.fileName(name)
		f, err := os.Create(filepath.Join(w.dir, file))
		if err != nil {
			return err
		}
		// Reserve the header; Close fills it in.
		if _, err := f.Write(make([]byte, headerLen)); err != nil {
			f.Close()
			return err
		}
		e = &wentry{name: name, layer: layer, shape: slices.Clone(shape), file: file, f: f}
		w.entries = append(w.entries, e)
		w.byName[name] = e
	} else {
		if layer != e.layer {
			return fmt.Errorf("layer %d, earlier calls said %d", layer, e.layer)
		}
		if len(shape) != len(e.shape) || !slices.Equal(shape[1:], e.shape[1:]) {
			return fmt.Errorf("shape %v cannot extend earlier %v (inner dimensions differ)", shape, e.shape)
		}
		if e.shape[0] > math.MaxInt32-shape[0] {
			return fmt.Errorf("too many rows")
		}
		e.shape[0] += shape[0]
	}
	w.buf = slices.Grow(w.buf[:0], 4*len(data))[:4*len(data)]
	for i, v := range data {
		binary.LittleEndian.PutUint32(w.buf[4*i:], math.Float32bits(v))
	}
	_, err := e.f.Write(w.buf)
	return err
}

// fileName returns a file name for tensor name, unique in the dump: the
// name with any character outside [A-Za-z0-9._-] replaced by '_', plus
// ".npy".
func (w *Writer) fileName(name string) string {
	base := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return '_'
	}, name)
	if strings.HasPrefix(base, ".") {
		base = "_" + base
	}
	file := base + ".npy"
	for i := 2; w.files[file]; i++ {
		file = base + "~" + strconv.Itoa(i) + ".npy"
	}
	w.files[file] = true
	return file
}

// indexJSON is the layout of a glmrun index.json.
type indexJSON struct {
	Model   string       `json:"model"`
	Tokens  []int        `json:"tokens"`
	Tensors []tensorJSON `json:"tensors"`
}

type tensorJSON struct {
	Name  string `json:"name"`
	Layer int    `json:"layer"`
	Shape []int  `json:"shape"`
	File  string `json:"file"`
	Dtype string `json:"dtype,omitempty"` // "i32" for integer tensors; float32 otherwise
}

// Close completes every .npy file and writes index.json. It returns the
// first error of the dump, if any; a second Close returns an error.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return fmt.Errorf("dump: %s: already closed", w.dir)
	}
	w.closed = true
	err := w.err
	idx := indexJSON{Model: w.info.Model, Tokens: w.info.Tokens, Tensors: []tensorJSON{}}
	if idx.Tokens == nil {
		idx.Tokens = []int{}
	}
	for _, e := range w.entries {
		t := tensorJSON{Name: e.name, Layer: e.layer, Shape: e.shape, File: e.file}
		if e.ints {
			t.Dtype = "i32"
			if err == nil {
				err = w.writeIDs(e)
			}
		} else {
			if err == nil {
				h, werr := npy.Header("<f4", e.shape, headerLen)
				if werr == nil {
					_, werr = e.f.WriteAt(h, 0)
				}
				if werr != nil {
					err = fmt.Errorf("dump: %s: tensor %q: %w", w.dir, e.name, werr)
				}
			}
			if cerr := e.f.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("dump: %s: tensor %q: %w", w.dir, e.name, cerr)
			}
		}
		idx.Tensors = append(idx.Tensors, t)
	}
	if err != nil {
		return err
	}
	b, err := marshalIndex(idx)
	if err != nil {
		return fmt.Errorf("dump: %s: %w", w.dir, err)
	}
	if err := os.WriteFile(filepath.Join(w.dir, IndexFile), b, 0o644); err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	return nil
}

// writeIDs writes integer tensor e, every row padded with -1 to the widest.
func (w *Writer) writeIDs(e *wentry) error {
	width := 1
	if len(e.shape) > 1 {
		width = e.shape[len(e.shape)-1]
	}
	h, err := npy.Header("<i4", e.shape, headerLen)
	if err != nil {
		return fmt.Errorf("dump: %s: tensor %q: %w", w.dir, e.name, err)
	}
	b := make([]byte, 0, headerLen+4*width*len(e.idRows))
	b = append(b, h...)
	for _, row := range e.idRows {
		for j := range width {
			v := int32(-1)
			if j < len(row) {
				v = row[j]
			}
			b = binary.LittleEndian.AppendUint32(b, uint32(v))
		}
	}
	if err := os.WriteFile(filepath.Join(w.dir, e.file), b, 0o644); err != nil {
		return fmt.Errorf("dump: %s: tensor %q: %w", w.dir, e.name, err)
	}
	return nil
}

// marshalIndex encodes idx with one tensor per line, so that the index
// reads well and diffs well.
func marshalIndex(idx indexJSON) ([]byte, error) {
	model, err := json.Marshal(idx.Model)
	if err != nil {
		return nil, err
	}
	tokens, err := json.Marshal(idx.Tokens)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "{\"model\": %s,\n \"tokens\": %s,\n \"tensors\": [", model, tokens)
	for i, t := range idx.Tensors {
		tb, err := json.Marshal(t)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n  ")
		b.Write(tb)
	}
	b.WriteString("\n]}\n")
	return []byte(b.String()), nil
}
