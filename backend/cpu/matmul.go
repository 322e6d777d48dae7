package cpu

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/glmrun/glmrun/backend"
	"github.com/glmrun/glmrun/tensor"
)

// CPU runs the parallel kernels with a fixed number of worker goroutines.
// A CPU has no other state and may be shared.
type CPU struct {
	workers int
}

// New returns a CPU that uses workers goroutines per kernel; workers <= 0
// means runtime.GOMAXPROCS(0).
func New(workers int) *CPU {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	return &CPU{workers: workers}
}

// Workers returns the number of worker goroutines.
func (c *CPU) Workers() int { return c.workers }

// serialWork is the number of multiply-adds below which MatMul stays on the
// calling goroutine.
const serialWork = 1 << 16

// MatMul computes dst[t, r] = Σ_i w[r, i] · x[t, i] (times w.Scale when
// that is non-zero) for n activation rows:
// x is [n, w.Cols] and dst is [n, w.Rows], both row-major. Each weight row
// is dequantized once and dotted with all n activation rows.
//
// The weight's type must be one tensor.Dequantize supports; models check
// that when they load, so a failure here is a broken invariant and panics.
func (c *CPU) MatMul(dst, x []float32, n int, w backend.Matrix) {
	if len(x) < n*w.Cols || len(dst) < n*w.Rows {
		panic(fmt.Sprintf("cpu: MatMul %s: x has %d values, dst %d; want %d x %d and %d x %d",
			w.Name, len(x), len(dst), n, w.Cols, n, w.Rows))
	}
	workers := c.workers
	if work := w.Rows * w.Cols * n; work < serialWork || workers < 2 {
		workers = 1
	}
	if workers > w.Rows {
		workers = w.Rows
	}
	if workers == 1 {
		matMulRows(dst, x, n, w, 0, w.Rows, make([]float32, w.Cols))
		return
	}
	var wg sync.WaitGroup
	chunk := (w.Rows + workers - 1) / workers
	for lo := 0; lo < w.Rows; lo += chunk {
		hi := min(lo+chunk, w.Rows)
		wg.Add(1)
		go func() {
			defer wg.Done()
			matMulRows(dst, x, n, w, lo, hi, make([]float32, w.Cols))
		}()
	}
	wg.Wait()
}

// matMulRows computes output rows [lo, hi) of MatMul using row as scratch.
func matMulRows(dst, x []float32, n int, w backend.Matrix, lo, hi int, row []float32) {
	for r := lo; r < hi; r++ {
		DequantizeRow(row, w, r)
		for t := 0; t < n; t++ {
			v := Dot(row, x[t*w.Cols:(t+1)*w.Cols])
			if w.Scale != 0 {
				v *= w.Scale
			}
			dst[t*w.Rows+r] = v
		}
	}
}

// DequantizeRow writes row r of w, converted to float32, to dst[:w.Cols].
// It panics if the type is not supported (see MatMul).
func DequantizeRow(dst []float32, w backend.Matrix, r int) {
	if err := tensor.Dequantize(w.Type, w.Row(r), dst[:w.Cols]); err != nil {
		panic(fmt.Sprintf("cpu: %s row %d: %v", w.Name, r, err))
	}
}

// Dequantize writes all of w, converted to float32, to dst[:w.Rows*w.Cols].
func Dequantize(dst []float32, w backend.Matrix) {
	for r := 0; r < w.Rows; r++ {
		DequantizeRow(dst[r*w.Cols:(r+1)*w.Cols], w, r)
	}
}

// CheckType reports whether w's type can be dequantized, by converting its
// first row. Models call it when they load so that MatMul cannot fail.
func CheckType(w backend.Matrix) error {
	return tensor.Dequantize(w.Type, w.Row(0), make([]float32, w.Cols))
}
