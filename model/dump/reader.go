package dump

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/glmrun/glmrun/internal/npy"
)

// Layout is the on-disk format of a dump directory.
type Layout int

const (
	// Glmrun is the layout Writer produces: .npy files.
	Glmrun Layout = iota
	// LlamaCPP is llama.cpp's: raw little-endian f32/i32 files in ggml
	// order (ne0 fastest), listed with their ne, dtype and occurrence.
	LlamaCPP
)

// String returns "glmrun" or "llama.cpp".
func (l Layout) String() string {
	switch l {
	case Glmrun:
		return "glmrun"
	case LlamaCPP:
		return "llama.cpp"
	}
	return "Layout(" + strconv.Itoa(int(l)) + ")"
}

// Dump is an opened dump directory. Its index is read by Open; tensor data
// is read on demand by Read, so big dumps are compared one tensor at a time.
type Dump struct {
	Dir     string
	Layout  Layout
	Model   string  // the model the run used, as its index says
	Tokens  []int   // the token ids of the run
	Tensors []Entry // forward order
}

// Entry describes one tensor of a dump.
type Entry struct {
	// Name is glmrun's name ("embd", "blk.3.out", "blk.3.attn_out"). A
	// llama.cpp name is mapped: "l_out-3" -> "blk.3.out", "X-N" ->
	// "blk.N.X", globals unchanged; its occurrence k > 0 appends ".k".
	Name string
	// Source is the name in the dump's own index, with ".occK" for k > 0
	// in llama.cpp's layout ("l_out-3", "q_pe-0.occ1").
	Source string
	Layer  int   // -1 for globals
	Shape  []int // row-major, outermost first: [nTokens, width] for the residual stream
	Int    bool  // the data are int32 (llama.cpp's ffn_moe_topk, top_k)
	File   string
}

// Tensor is the data of one dump tensor. Exactly one of F32 and I32 is set
// (I32 only for Entry.Int).
type Tensor struct {
	Shape []int
	F32   []float32
	I32   []int32
}

// maxIndex bounds the size of an index.json we read.
const maxIndex = 256 << 20

// rawIndex is the union of both layouts' index.json.
type rawIndex struct {
	Model   string     `json:"model"`
	Tokens  []int      `json:"tokens"` // glmrun
	Prompt  []int      `json:"prompt"` // llama.cpp
	Layout  string     `json:"layout"` // llama.cpp
	Tensors []rawEntry `json:"tensors"`
}

type rawEntry struct {
	Name  string `json:"name"`
	Layer *int   `json:"layer"` // glmrun
	Shape []int  `json:"shape"` // glmrun
	File  string `json:"file"`
	Occ   *int   `json:"occ"`   // llama.cpp
	Dtype string `json:"dtype"` // llama.cpp
	Ne    []int  `json:"ne"`    // llama.cpp
	N     *int   `json:"n"`     // llama.cpp
}

// Open reads the index of the dump in dir, in either layout, and checks
// every entry (names, shapes against file sizes) without reading data.
func Open(dir string) (*Dump, error) {
	path := filepath.Join(dir, IndexFile)
	b, err := readBounded(path, maxIndex)
	if err != nil {
		return nil, fmt.Errorf("dump: %w", err)
	}
	var raw rawIndex
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("dump: %s: %w", path, err)
	}
	d := &Dump{Dir: dir, Model: raw.Model, Tokens: raw.Tokens}
	if isLlamaCPP(&raw) {
		d.Layout = LlamaCPP
		d.Tokens = raw.Prompt
	}
	seen := make(map[string]bool, len(raw.Tensors))
	for i, r := range raw.Tensors {
		var e Entry
		var err error
		if d.Layout == LlamaCPP {
			e, err = llamaEntry(r)
		} else {
			e, err = glmrunEntry(r)
		}
		if err == nil {
			err = checkSize(dir, &e)
		}
		if err == nil && seen[e.Name] {
			err = errors.New("name appears twice")
		}
		if err != nil {
			return nil, fmt.Errorf("dump: %s: tensor %d %q: %w", path, i, r.Name, err)
		}
		seen[e.Name] = true
		d.Tensors = append(d.Tensors, e)
	}
	return d, nil
}

// isLlamaCPP tells the layouts apart: llama.cpp's index has a layout string
// and a prompt, and its tensors carry ne.
func isLlamaCPP(raw *rawIndex) bool {
	if raw.Layout != "" || raw.Prompt != nil {
		return true
	}
	for _, t := range raw.Tensors {
		if t.Ne != nil {
			return true
		}
	}
	return false
}

// readBounded reads a whole file of at most max bytes.
func readBounded(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > max {
		return nil, fmt.Errorf("%s: %d bytes, more than the %d accepted", path, st.Size(), max)
	}
	return io.ReadAll(io.LimitReader(f, max))
}

// checkFile rejects a file name that is empty or leaves the directory.
func checkFile(file string) error {
	if file == "" || file == "." || file == ".." || strings.ContainsAny(file, `/\`) {
		return fmt.Errorf("bad file name %q", file)
	}
	return nil
}

// elements returns the product of shape, or an error for a negative
// dimension or a product past maxElements.
func elements(shape []int) (int64, error) {
	const maxElements = 1 << 40
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension in %v", shape)
		}
		if d > 0 && n > maxElements/int64(d) {
			return 0, fmt.Errorf("shape %v too large", shape)
		}
		n *= int64(d)
	}
	return n, nil
}

func glmrunEntry(r rawEntry) (Entry, error) {
	if r.Name == "" {
		return Entry{}, errors.New("no name")
	}
	if r.Shape == nil {
		return Entry{}, errors.New("no shape")
	}
	if _, err := elements(r.Shape); err != nil {
		return Entry{}, err
	}
	if err := checkFile(r.File); err != nil {
		return Entry{}, err
	}
	layer := -1
	if r.Layer != nil {
		layer = *r.Layer
	}
	e := Entry{Name: r.Name, Source: r.Name, Layer: layer, Shape: slices.Clone(r.Shape), File: r.File}
	switch r.Dtype {
	case "", "f32":
	case "i32":
		e.Int = true
	default:
		return Entry{}, fmt.Errorf("dtype %q: want f32 or i32", r.Dtype)
	}
	return e, nil
}

func llamaEntry(r rawEntry) (Entry, error) {
	if r.Name == "" {
		return Entry{}, errors.New("no name")
	}
	if len(r.Ne) == 0 {
		return Entry{}, errors.New("no ne")
	}
	if err := checkFile(r.File); err != nil {
		return Entry{}, err
	}
	occ := 0
	if r.Occ != nil {
		occ = *r.Occ
	}
	if occ < 0 {
		return Entry{}, fmt.Errorf("negative occ %d", occ)
	}
	e := Entry{Shape: llamaShape(r.Ne), File: r.File}
	n, err := elements(e.Shape)
	if err != nil {
		return Entry{}, err
	}
	if r.N != nil && int64(*r.N) != n {
		return Entry{}, fmt.Errorf("n = %d, but ne %v holds %d values", *r.N, r.Ne, n)
	}
	switch r.Dtype {
	case "f32", "":
	case "i32":
		e.Int = true
	default:
		return Entry{}, fmt.Errorf("dtype %q: want f32 or i32", r.Dtype)
	}
	e.Name, e.Layer = LlamaName(r.Name)
	e.Source = r.Name
	if occ > 0 {
		e.Name += "." + strconv.Itoa(occ)
		e.Source += ".occ" + strconv.Itoa(occ)
	}
	return e, nil
}

// llamaShape turns ggml's ne (innermost first) into a row-major shape
// (outermost first), dropping outer dimensions of 1 but keeping at least
// two: ne [256, 20, 1, 1] -> [20, 256]; ne [256, 1, 1, 1] -> [1, 256].
func llamaShape(ne []int) []int {
	n := len(ne)
	for n > 2 && ne[n-1] == 1 {
		n--
	}
	shape := make([]int, n)
	for i := range n {
		shape[i] = ne[n-1-i]
	}
	return shape
}

// LlamaName maps a llama.cpp graph node name to glmrun's name and layer:
// "l_out-N" is "blk.N.out" (the residual stream after layer N), any other
// "X-N" is "blk.N.X" ("attn_out-3" -> "blk.3.attn_out"), and a name without
// a layer suffix ("embd", "result_norm", "result_output") is unchanged with
// layer -1.
func LlamaName(name string) (string, int) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return name, -1
	}
	base, num := name[:i], name[i+1:]
	layer, err := strconv.Atoi(num)
	if err != nil || layer < 0 || strconv.Itoa(layer) != num {
		return name, -1
	}
	if base == "l_out" {
		base = "out"
	}
	return "blk." + num + "." + base, layer
}

// checkSize checks that e's file holds exactly the data its shape says.
func checkSize(dir string, e *Entry) error {
	st, err := os.Stat(filepath.Join(dir, e.File))
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", e.File)
	}
	n, err := elements(e.Shape)
	if err != nil {
		return err
	}
	if e.Layer < -1 {
		return fmt.Errorf("bad layer %d", e.Layer)
	}
	switch {
	case strings.HasSuffix(e.File, ".npy"):
		// The header is variable; Read checks the shape it states.
		if st.Size() < n*4 {
			return fmt.Errorf("%s: %d bytes, shape %v needs %d bytes of data", e.File, st.Size(), e.Shape, n*4)
		}
	default:
		if st.Size() != n*4 {
			return fmt.Errorf("%s: %d bytes, shape %v needs %d", e.File, st.Size(), e.Shape, n*4)
		}
	}
	return nil
}

// Lookup returns the entry named name (glmrun's name).
func (d *Dump) Lookup(name string) (*Entry, bool) {
	for i := range d.Tensors {
		if d.Tensors[i].Name == name {
			return &d.Tensors[i], true
		}
	}
	return nil, false
}

// Read reads the data of entry e of d.
func (d *Dump) Read(e *Entry) (*Tensor, error) {
	t, err := d.read(e)
	if err != nil {
		return nil, fmt.Errorf("dump: %s: tensor %q: %w", d.Dir, e.Name, err)
	}
	return t, nil
}

func (d *Dump) read(e *Entry) (*Tensor, error) {
	if err := checkFile(e.File); err != nil {
		return nil, err
	}
	n, err := elements(e.Shape)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(d.Dir, e.File)
	if strings.HasSuffix(e.File, ".npy") {
		a, err := npy.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if !slices.Equal(a.Shape, e.Shape) {
			return nil, fmt.Errorf("%s holds shape %v, index says %v", e.File, a.Shape, e.Shape)
		}
		if (a.I32 != nil) != e.Int {
			return nil, fmt.Errorf("%s: element type differs from the index", e.File)
		}
		return &Tensor{Shape: a.Shape, F32: a.F32, I32: a.I32}, nil
	}
	b, err := readBounded(path, n*4)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) != n*4 {
		return nil, fmt.Errorf("%s: %d bytes, shape %v needs %d", e.File, len(b), e.Shape, n*4)
	}
	t := &Tensor{Shape: slices.Clone(e.Shape)}
	if e.Int {
		t.I32 = make([]int32, n)
		for i := range t.I32 {
			t.I32[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
		}
	} else {
		t.F32 = make([]float32, n)
		for i := range t.F32 {
			t.F32[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	}
	return t, nil
}
