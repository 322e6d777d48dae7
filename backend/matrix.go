package backend

import (
	"fmt"

	"github.com/glmrun/glmrun/tensor"
)

// Matrix is a weight matrix of Rows rows of Cols elements each, stored in
// its GGUF type: row r occupies Data[r*RowBytes : (r+1)*RowBytes]. A GGUF
// tensor with ne {Cols, Rows} (or {Cols, a, b} with Rows = a*b) maps to a
// Matrix unchanged; multiplying activations x by it computes W·x, the
// PyTorch [out=Rows, in=Cols] convention.
type Matrix struct {
	Name     string      // GGUF tensor name, for messages
	Type     tensor.Type // storage type
	Rows     int         // output dimension
	Cols     int         // input dimension (ggml ne0)
	RowBytes int         // bytes per row
	Data     []byte      // Rows*RowBytes bytes, usually a view into an mmap
	// Scale, when non-zero, multiplies every product with the matrix
	// (llama.cpp's optional per-tensor "<name>.scale").
	Scale float32
}

// NewMatrix checks that data holds rows rows of cols elements of type t
// and returns the matrix.
func NewMatrix(name string, t tensor.Type, rows, cols int, data []byte) (Matrix, error) {
	if rows <= 0 || cols <= 0 {
		return Matrix{}, fmt.Errorf("backend: %s: bad shape %d x %d", name, rows, cols)
	}
	rb, err := t.RowSize(int64(cols))
	if err != nil {
		return Matrix{}, fmt.Errorf("backend: %s: %w", name, err)
	}
	if int64(len(data)) != rb*int64(rows) {
		return Matrix{}, fmt.Errorf("backend: %s: %d bytes of data, want %d rows of %d", name, len(data), rows, rb)
	}
	return Matrix{Name: name, Type: t, Rows: rows, Cols: cols, RowBytes: int(rb), Data: data}, nil
}

// Slice returns rows [row, row+n) of m as a matrix (an expert or a head
// block of a stacked tensor). It panics if the range is out of bounds,
// which is a programming error: shapes are checked when a model loads.
func (m Matrix) Slice(row, n int) Matrix {
	if row < 0 || n <= 0 || row+n > m.Rows {
		panic(fmt.Sprintf("backend: %s: rows [%d, %d) out of range [0, %d)", m.Name, row, row+n, m.Rows))
	}
	s := m
	s.Rows = n
	s.Data = m.Data[row*m.RowBytes : (row+n)*m.RowBytes]
	return s
}

// Row returns the bytes of row r.
func (m Matrix) Row(r int) []byte {
	return m.Data[r*m.RowBytes : (r+1)*m.RowBytes]
}
