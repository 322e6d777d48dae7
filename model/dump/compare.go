package dump

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Tolerance says when two float tensors diverge. Like numpy.allclose, but
// against the scale of the whole reference tensor rather than element by
// element (so near-zero elements do not turn rounding noise into a
// divergence): tensor a diverges from reference b when
//
//	max|a - b| > ATol + RTol * max|b|
//
// or when their non-finite values (NaN, ±Inf) differ in place or kind.
type Tolerance struct {
	ATol float64
	RTol float64
}

// DefaultTolerance is the rule glmrun diff uses unless told otherwise: 1e-3
// absolute, the bound an f32 engine meets against llama.cpp's f32 hidden
// states, plus 1e-4 of the tensor's scale for models whose activations
// grow large.
var DefaultTolerance = Tolerance{ATol: 1e-3, RTol: 1e-4}

// Result is the comparison of one tensor present in both dumps.
type Result struct {
	Name   string
	Layer  int
	ShapeA []int
	ShapeB []int
	// ShapeMismatch reports shapes that differ (ignoring dimensions of
	// size 1); such a tensor diverges and has no statistics.
	ShapeMismatch bool
	// Int reports an integer tensor (selected experts, selected keys),
	// compared row by row as sets (see CompareTensors); MaxAbs, RelErr and
	// Cosine are then zero.
	Int bool
	// RowsDiffer counts the rows of an integer tensor whose sets differ.
	RowsDiffer int
	// NonFinite counts the elements where a and b differ in being NaN or
	// infinite (a NaN in both, or the same infinity, is agreement).
	NonFinite int
	MaxAbs    float64 // max |a - b| over the finite pairs
	MaxB      float64 // max |b| over the finite elements of b
	// RelErr is MaxAbs / MaxB: the error relative to the tensor's scale
	// (0 when both are 0, +Inf when only b is all zeros).
	RelErr float64
	// Cosine is the cosine similarity of a and b as flat vectors over the
	// finite pairs (1 when both are zero, 0 when only one is).
	Cosine   float64
	Limit    float64 // ATol + RTol*MaxB: the bound MaxAbs is held to
	Diverges bool
}

// Report is the comparison of two dumps.
type Report struct {
	Tolerance Tolerance
	// Results holds one entry per tensor present in both dumps, in the
	// order of the first dump.
	Results []Result
	// First is the index in Results of the first tensor that diverges, or
	// -1 when none does.
	First int
	// OnlyA and OnlyB name the tensors found in one dump only.
	OnlyA, OnlyB []string
}

// FirstDivergence returns the first tensor that diverges, or nil.
func (r *Report) FirstDivergence() *Result {
	if r.First < 0 {
		return nil
	}
	return &r.Results[r.First]
}

// Compare compares dump a with reference dump b, tensor by tensor in a's
// order, over the names present in both. It reads one pair of tensors at a
// time. An error means a tensor could not be read; differences, including
// shape mismatches, are results.
func Compare(a, b *Dump, tol Tolerance) (*Report, error) {
	rep := &Report{Tolerance: tol, First: -1}
	inA := make(map[string]bool, len(a.Tensors))
	for i := range a.Tensors {
		ea := &a.Tensors[i]
		inA[ea.Name] = true
		eb, ok := b.Lookup(ea.Name)
		if !ok {
			rep.OnlyA = append(rep.OnlyA, ea.Name)
			continue
		}
		ta, err := a.Read(ea)
		if err != nil {
			return nil, err
		}
		tb, err := b.Read(eb)
		if err != nil {
			return nil, err
		}
		res := CompareTensors(ea.Name, ta, tb, tol)
		res.Layer = ea.Layer
		if res.Diverges && rep.First < 0 {
			rep.First = len(rep.Results)
		}
		rep.Results = append(rep.Results, res)
	}
	for _, eb := range b.Tensors {
		if !inA[eb.Name] {
			rep.OnlyB = append(rep.OnlyB, eb.Name)
		}
	}
	return rep, nil
}

// CompareTensors compares tensor a with reference b under tol. Shapes are
// compared ignoring dimensions of size 1 ([1, 256] matches [256]).
//
// Integer tensors (either side integer; a float side must hold whole
// numbers) are selections: each row is compared as a set, since two
// correct engines may list the same experts or keys in another order. For
// a tensor named "top_k" or "*.top_k" (the DSA indexer's selected key
// cells, one row per query position from 0), values outside 0..row are
// dropped first: llama.cpp lists masked cells too. Rows may then differ in
// length; any row whose sets differ makes the tensor diverge.
func CompareTensors(name string, a, b *Tensor, tol Tolerance) Result {
	res := Result{Name: name, ShapeA: a.Shape, ShapeB: b.Shape, Limit: tol.ATol, Cosine: 1}
	if a.I32 != nil || b.I32 != nil {
		return compareInts(res, a, b)
	}
	if !sameShape(a.Shape, b.Shape) || len(a.F32) != len(b.F32) {
		res.ShapeMismatch, res.Diverges, res.Cosine = true, true, 0
		return res
	}
	var dot, na, nb float64
	for i, x := range a.F32 {
		xa, xb := float64(x), float64(b.F32[i])
		fa, fb := isFinite(xa), isFinite(xb)
		if !fa || !fb {
			if !sameNonFinite(xa, xb) {
				res.NonFinite++
			}
			continue
		}
		res.MaxAbs = max(res.MaxAbs, math.Abs(xa-xb))
		res.MaxB = max(res.MaxB, math.Abs(xb))
		dot += xa * xb
		na += xa * xa
		nb += xb * xb
	}
	switch {
	case na == 0 && nb == 0:
		res.Cosine = 1
	case na == 0 || nb == 0:
		res.Cosine = 0
	default:
		res.Cosine = dot / math.Sqrt(na*nb)
	}
	switch {
	case res.MaxB > 0:
		res.RelErr = res.MaxAbs / res.MaxB
	case res.MaxAbs > 0:
		res.RelErr = math.Inf(1)
	}
	res.Limit = tol.ATol + tol.RTol*res.MaxB
	res.Diverges = res.NonFinite > 0 || res.MaxAbs > res.Limit || math.IsNaN(res.MaxAbs)
	return res
}

func isFinite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

func sameNonFinite(a, b float64) bool {
	return (math.IsNaN(a) && math.IsNaN(b)) || (math.IsInf(a, 1) && math.IsInf(b, 1)) || (math.IsInf(a, -1) && math.IsInf(b, -1))
}

// squeeze returns shape without its dimensions of size 1.
func squeeze(shape []int) []int {
	out := make([]int, 0, len(shape))
	for _, d := range shape {
		if d != 1 {
			out = append(out, d)
		}
	}
	return out
}

func sameShape(a, b []int) bool { return slices.Equal(squeeze(a), squeeze(b)) }

// compareInts compares two selection tensors row by row as sets.
func compareInts(res Result, a, b *Tensor) Result {
	res.Int, res.Cosine = true, 0
	ra, okA := intRows(a)
	rb, okB := intRows(b)
	if !okA || !okB || len(ra) != len(rb) {
		res.ShapeMismatch, res.Diverges = true, true
		return res
	}
	causal := res.Name == "top_k" || strings.HasSuffix(res.Name, ".top_k")
	for i := range ra {
		sa, sb := ra[i], rb[i]
		if causal {
			sa, sb = keepRange(sa, i), keepRange(sb, i)
		}
		if !sameSet(sa, sb) {
			res.RowsDiffer++
		}
	}
	res.Diverges = res.RowsDiffer > 0
	return res
}

// intRows splits t into rows of its innermost dimension, converting float
// data to integers; ok is false when a float is not a whole number.
func intRows(t *Tensor) (rows [][]int64, ok bool) {
	width := 1
	if len(t.Shape) > 0 {
		width = t.Shape[len(t.Shape)-1]
	}
	var vals []int64
	if t.I32 != nil {
		vals = make([]int64, len(t.I32))
		for i, v := range t.I32 {
			vals[i] = int64(v)
		}
	} else {
		vals = make([]int64, len(t.F32))
		for i, v := range t.F32 {
			if float32(math.Trunc(float64(v))) != v || math.Abs(float64(v)) > 1<<31 {
				return nil, false
			}
			vals[i] = int64(v)
		}
	}
	if width <= 0 || len(vals)%width != 0 {
		return nil, len(vals) == 0
	}
	for i := 0; i < len(vals); i += width {
		rows = append(rows, vals[i:i+width])
	}
	return rows, true
}

// keepRange returns the values of s in 0..hi.
func keepRange(s []int64, hi int) []int64 {
	out := make([]int64, 0, len(s))
	for _, v := range s {
		if v >= 0 && v <= int64(hi) {
			out = append(out, v)
		}
	}
	return out
}

// sameSet reports whether a and b hold the same set of values.
func sameSet(a, b []int64) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// String returns a one-line summary of r, as in glmrun diff's table.
func (r *Result) String() string {
	status := "ok"
	if r.Diverges {
		status = "DIVERGES"
	}
	switch {
	case r.ShapeMismatch:
		return fmt.Sprintf("%s: shape %v vs %v: %s", r.Name, r.ShapeA, r.ShapeB, status)
	case r.Int:
		return fmt.Sprintf("%s %v: %d rows differ as sets: %s", r.Name, r.ShapeA, r.RowsDiffer, status)
	}
	return fmt.Sprintf("%s %v: max abs %.3g (limit %.3g), rel %.3g, cos %.6f, non-finite %d: %s",
		r.Name, r.ShapeA, r.MaxAbs, r.Limit, r.RelErr, r.Cosine, r.NonFinite, status)
}
