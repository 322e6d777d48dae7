package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/glmrun/glmrun/model/dump"
)

const diffUsage = `usage: glmrun diff [--atol A] [--rtol R] [--json] DIR_A DIR_B

Compares two hidden-state dumps tensor by tensor, in DIR_A's order, and names
the first tensor that diverges. Either directory may be a glmrun dump
("glmrun dump") or a llama.cpp dump (index.json + raw .f32/.i32 files; its
names are mapped: l_out-N -> blk.N.out, attn_out-N -> blk.N.attn_out, ...).
DIR_B is the reference. A float tensor diverges when

    max|A - B| > atol + rtol * max|B|

or when NaN/Inf values differ; integer tensors (selected experts, selected
keys) are compared row by row as sets. Shapes must agree (ignoring sizes of 1).

Exit status: 0 when no tensor diverges, 1 when one does, 2 for bad flags,
an unreadable dump or dumps without a tensor in common.

Flags:
`

// errDiverged is returned by runDiff when a tensor diverges (exit status 1).
var errDiverged = errors.New("dumps diverge")

// troubleError is a failure to compare at all (an unreadable dump): it
// exits with status 2 like a usage error, as cmp and diff do, so that a
// script can tell it from a divergence.
type troubleError struct{ err error }

func (e troubleError) Error() string   { return e.err.Error() }
func (e troubleError) Unwrap() []error { return []error{errUsage, e.err} }

func runDiff(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("diff", stderr)
	atol := fs.Float64("atol", dump.DefaultTolerance.ATol, "absolute tolerance")
	rtol := fs.Float64("rtol", dump.DefaultTolerance.RTol, "tolerance relative to the tensor's max |B|")
	asJSON := fs.Bool("json", false, "print the report as JSON instead of a table")
	fs.Usage = func() {
		fmt.Fprint(stderr, diffUsage)
		fs.PrintDefaults()
	}
	dirs, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(dirs) != 2 {
		return fmt.Errorf("%w: want two dump directories, got %d arguments", errUsage, len(dirs))
	}
	for _, v := range []struct {
		name string
		v    float64
	}{{"atol", *atol}, {"rtol", *rtol}} {
		if !(v.v >= 0) || math.IsInf(v.v, 0) {
			return fmt.Errorf("%w: --%s %g: want a finite number >= 0", errUsage, v.name, v.v)
		}
	}
	a, err := dump.Open(dirs[0])
	if err != nil {
		return troubleError{err}
	}
	b, err := dump.Open(dirs[1])
	if err != nil {
		return troubleError{err}
	}
	rep, err := dump.Compare(a, b, dump.Tolerance{ATol: *atol, RTol: *rtol})
	if err != nil {
		return troubleError{err}
	}
	if len(rep.Results) == 0 {
		return troubleError{fmt.Errorf("%s and %s have no tensor in common", a.Dir, b.Dir)}
	}
	if *asJSON {
		err = printDiffJSON(stdout, a, b, rep)
	} else {
		err = printDiffTable(stdout, a, b, rep)
	}
	if err != nil {
		return err
	}
	if f := rep.FirstDivergence(); f != nil {
		return fmt.Errorf("%w: first divergence at %s", errDiverged, f.Name)
	}
	return nil
}

// parseInterleaved parses flags that may come before, between or after the
// positional arguments, which it returns.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		rest := fs.Args()
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil // everything after "--" is positional
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// fmtNum prints a statistic compactly; 0 prints as "0".
func fmtNum(v float64) string {
	if v == 0 {
		return "0"
	}
	return fmt.Sprintf("%.3g", v)
}

func fmtShape(s []int) string {
	return strings.ReplaceAll(fmt.Sprint(s), " ", ",")
}

// printDiffTable prints one row per compared tensor and a final line naming
// the first divergence.
func printDiffTable(w io.Writer, a, b *dump.Dump, rep *dump.Report) error {
	fmt.Fprintf(w, "A: %s (%s, %s)\nB: %s (%s, %s)\natol %g, rtol %g: a tensor diverges when max|A-B| > atol + rtol*max|B|\n\n",
		a.Dir, a.Layout, a.Model, b.Dir, b.Layout, b.Model, rep.Tolerance.ATol, rep.Tolerance.RTol)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "tensor\tshape\tmax abs\tmax rel\tcosine\tstatus")
	for i := range rep.Results {
		r := &rep.Results[i]
		status := "ok"
		if r.Diverges {
			status = "DIVERGES"
		}
		shape := fmtShape(r.ShapeA)
		switch {
		case r.ShapeMismatch:
			fmt.Fprintf(tw, "%s\t%s vs %s\t-\t-\t-\t%s (shape)\n", r.Name, shape, fmtShape(r.ShapeB), status)
		case r.Int:
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t%s (%d rows differ as sets)\n", r.Name, shape, status, r.RowsDiffer)
		default:
			if r.NonFinite > 0 {
				status += fmt.Sprintf(" (%d NaN/Inf differ)", r.NonFinite)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.6f\t%s\n", r.Name, shape, fmtNum(r.MaxAbs), fmtNum(r.RelErr), r.Cosine, status)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(rep.OnlyA) > 0 {
		fmt.Fprintf(w, "only in A (not compared): %s\n", strings.Join(rep.OnlyA, " "))
	}
	if len(rep.OnlyB) > 0 {
		fmt.Fprintf(w, "only in B (not compared): %s\n", strings.Join(rep.OnlyB, " "))
	}
	f := rep.FirstDivergence()
	var err error
	switch {
	case f == nil:
		_, err = fmt.Fprintf(w, "no divergence (%d tensors compared)\n", len(rep.Results))
	case f.ShapeMismatch:
		_, err = fmt.Fprintf(w, "first divergence: %s (shape %s vs %s)\n", f.Name, fmtShape(f.ShapeA), fmtShape(f.ShapeB))
	case f.Int:
		_, err = fmt.Fprintf(w, "first divergence: %s (%d rows differ as sets)\n", f.Name, f.RowsDiffer)
	default:
		_, err = fmt.Fprintf(w, "first divergence: %s (max abs %.3g > %.3g, cosine %.6f)\n", f.Name, f.MaxAbs, f.Limit, f.Cosine)
	}
	return err
}

// jsonNum returns v as a JSON number, or as the string "NaN", "+Inf" or
// "-Inf", which JSON numbers cannot express.
func jsonNum(v float64) any {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return v
}

// printDiffJSON prints the report as one JSON object.
func printDiffJSON(w io.Writer, a, b *dump.Dump, rep *dump.Report) error {
	type tensorJSON struct {
		Name          string `json:"name"`
		Layer         int    `json:"layer"`
		ShapeA        []int  `json:"shape_a"`
		ShapeB        []int  `json:"shape_b"`
		ShapeMismatch bool   `json:"shape_mismatch"`
		Int           bool   `json:"int"`
		RowsDiffer    int    `json:"rows_differ,omitempty"`
		NonFinite     int    `json:"non_finite"`
		MaxAbs        any    `json:"max_abs"`
		MaxRel        any    `json:"max_rel"`
		Cosine        any    `json:"cosine"`
		Limit         any    `json:"limit"`
		Diverges      bool   `json:"diverges"`
	}
	out := struct {
		A               string       `json:"a"`
		B               string       `json:"b"`
		ATol            float64      `json:"atol"`
		RTol            float64      `json:"rtol"`
		Tensors         []tensorJSON `json:"tensors"`
		FirstDivergence *string      `json:"first_divergence"`
		OnlyA           []string     `json:"only_a"`
		OnlyB           []string     `json:"only_b"`
	}{A: a.Dir, B: b.Dir, ATol: rep.Tolerance.ATol, RTol: rep.Tolerance.RTol,
		Tensors: []tensorJSON{}, OnlyA: rep.OnlyA, OnlyB: rep.OnlyB}
	if out.OnlyA == nil {
		out.OnlyA = []string{}
	}
	if out.OnlyB == nil {
		out.OnlyB = []string{}
	}
	for _, r := range rep.Results {
		out.Tensors = append(out.Tensors, tensorJSON{
			Name: r.Name, Layer: r.Layer, ShapeA: r.ShapeA, ShapeB: r.ShapeB,
			ShapeMismatch: r.ShapeMismatch, Int: r.Int, RowsDiffer: r.RowsDiffer, NonFinite: r.NonFinite,
			MaxAbs: jsonNum(r.MaxAbs), MaxRel: jsonNum(r.RelErr), Cosine: jsonNum(r.Cosine), Limit: jsonNum(r.Limit),
			Diverges: r.Diverges,
		})
	}
	if f := rep.FirstDivergence(); f != nil {
		out.FirstDivergence = &f.Name
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(out)
}
