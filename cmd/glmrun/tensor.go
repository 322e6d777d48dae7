package main

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/internal/npy"
	"github.com/glmrun/glmrun/internal/units"
	"github.com/glmrun/glmrun/model"
	"github.com/glmrun/glmrun/tensor"
)

// runTensor writes one tensor of a GGUF file, dequantized to float32, as a
// NumPy .npy file whose shape is the GGUF dims reversed (C order).
func runTensor(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("tensor", stderr)
	out := fs.String("o", "", "output .npy file (default NAME.npy)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: glmrun tensor [flags] FILE.gguf NAME\n\n"+
			"Writes tensor NAME dequantized to float32 as a .npy file with shape = GGUF dims reversed.\n"+
			"NAME is a GGUF name (blk.0.attn_q_a.weight) or, for glm-dsa/deepseek2 files, a Hugging Face\n"+
			"name (model.layers.0.self_attn.q_a_proj.weight; one expert of a stacked tensor:\n"+
			"model.layers.1.mlp.experts.3.up_proj.weight).\n\nflags:")
		fs.PrintDefaults()
	}
	pos, err := parseFlagsAnywhere(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return fmt.Errorf("%w: want FILE.gguf and a tensor NAME, have %d arguments", errUsage, len(pos))
	}
	path, name := pos[0], pos[1]
	f, err := gguf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()

	sel, err := selectTensor(f, name)
	if err != nil {
		return err
	}
	ti := sel.info
	if !tensor.CanDequantize(ti.Type) {
		// Dequantize names the type ("quant type TQ1_0 is not supported
		// yet"); ask it before allocating the output.
		err := tensor.Dequantize(ti.Type, nil, nil)
		if err == nil {
			err = fmt.Errorf("quant type %s is not supported", ti.Type)
		}
		return fmt.Errorf("tensor %s: %w", ti.Name, err)
	}
	n := int64(1)
	for _, d := range sel.shape {
		n *= int64(d)
	}
	if n != int64(int(n)) {
		return fmt.Errorf("tensor %s: %d elements do not fit in memory here", ti.Name, n)
	}
	dst := make([]float32, n)
	if err := tensor.Dequantize(ti.Type, sel.data, dst); err != nil {
		return fmt.Errorf("tensor %s: %w", ti.Name, err)
	}
	if *out == "" {
		*out = name + ".npy"
	}
	if err := npy.WriteFloat32File(*out, sel.shape, dst); err != nil {
		return fmt.Errorf("tensor %s: %w", ti.Name, err)
	}
	what := ti.Name
	if sel.expert >= 0 {
		what = fmt.Sprintf("%s expert %d", ti.Name, sel.expert)
	}
	fmt.Fprintf(stdout, "%s: %s %s %s -> %s float32 %s\n", *out, what, ti.Type, formatShape(ti.Dims), npyShape(sel.shape), units.Bytes(4*n))
	return nil
}

// tensorSelection is the data of a whole tensor or of one expert of a
// stacked expert tensor.
type tensorSelection struct {
	info   *gguf.TensorInfo
	data   []byte
	shape  []int // C order (GGUF dims reversed)
	expert int   // -1 for the whole tensor
}

// expertIndex finds the expert index in an HF name like
// "model.layers.1.mlp.experts.7.up_proj.weight".
var expertIndex = regexp.MustCompile(`\.mlp\.experts\.([0-9]+)\.`)

// selectTensor finds name in f as a GGUF name or, failing that, as a
// Hugging Face name; the error for an unknown name suggests close names.
func selectTensor(f *gguf.File, name string) (*tensorSelection, error) {
	if ti, ok := f.Tensor(name); ok {
		return &tensorSelection{info: ti, data: ti.Data, shape: reversedDims(ti.Dims), expert: -1}, nil
	}
	arch := f.Architecture()
	mapped, mapErr := model.HFToGGUF(arch, name)
	if mapErr == nil {
		if ti, ok := f.Tensor(mapped); ok {
			m := expertIndex.FindStringSubmatch(name)
			if m == nil {
				return &tensorSelection{info: ti, data: ti.Data, shape: reversedDims(ti.Dims), expert: -1}, nil
			}
			return expertSlice(ti, m[1])
		}
	}
	msg := fmt.Sprintf("no tensor %q in %s", name, f.Path)
	if mapErr == nil {
		msg += fmt.Sprintf(" (Hugging Face name of %s, not in the file either)", mapped)
	}
	names := make([]string, len(f.Tensors))
	for i, ti := range f.Tensors {
		names[i] = ti.Name
	}
	query := name
	if mapErr == nil {
		query = mapped
	}
	if s := closeNames(query, names, 5); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, ", ") + "?"
	} else if len(names) == 0 {
		msg += "; the file has no tensors"
	}
	return nil, fmt.Errorf("%s", msg)
}

// expertSlice returns expert e (decimal string) of a stacked expert tensor
// ne{X, F, E}: its ne{X, F} block, shape (F, X).
func expertSlice(ti *gguf.TensorInfo, es string) (*tensorSelection, error) {
	e, err := strconv.Atoi(es)
	if err != nil || len(ti.Dims) != 3 || int64(e) >= ti.Dims[2] {
		return nil, fmt.Errorf("tensor %s %s: no expert %s", ti.Name, formatShape(ti.Dims), es)
	}
	row, err := ti.Type.RowSize(ti.Dims[0])
	if err != nil {
		return nil, fmt.Errorf("tensor %s: %w", ti.Name, err)
	}
	per := row * ti.Dims[1]
	if int64(len(ti.Data)) < per*(int64(e)+1) {
		return nil, fmt.Errorf("tensor %s: data holds %d bytes, expert %d needs %d", ti.Name, len(ti.Data), e, per*(int64(e)+1))
	}
	return &tensorSelection{
		info:   ti,
		data:   ti.Data[per*int64(e) : per*(int64(e)+1)],
		shape:  []int{int(ti.Dims[1]), int(ti.Dims[0])},
		expert: e,
	}, nil
}

// reversedDims returns GGUF ne dims in C order, outermost first.
func reversedDims(dims []int64) []int {
	s := make([]int, len(dims))
	for i, d := range dims {
		s[len(dims)-1-i] = int(d)
	}
	return s
}

// npyShape prints a C-order shape the way NumPy does: (512, 256), (16,).
func npyShape(shape []int) string {
	s := make([]string, len(shape))
	for i, d := range shape {
		s[i] = strconv.Itoa(d)
	}
	if len(s) == 1 {
		return "(" + s[0] + ",)"
	}
	return "(" + strings.Join(s, ", ") + ")"
}

// closeNames returns up to limitN names close to query: those containing it,
// then those within a small edit distance, nearest first.
func closeNames(query string, names []string, limitN int) []string {
	type cand struct {
		name string
		dist int
	}
	limit := max(2, len(query)/4)
	var cands []cand
	for _, n := range names {
		switch {
		case len(query) >= 3 && strings.Contains(n, query):
			cands = append(cands, cand{n, 0})
		default:
			if d := editDistance(query, n); d <= limit {
				cands = append(cands, cand{n, d})
			}
		}
	}
	slices.SortStableFunc(cands, func(a, b cand) int { return a.dist - b.dist })
	var out []string
	for i := 0; i < len(cands) && i < limitN; i++ {
		out = append(out, cands[i].name)
	}
	return out
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
