package backend

import (
	"encoding/binary"
	"fmt"
	"math"

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
	// Packed, when set, holds the same rows again in tensor.Repack's
	// layout (groups of tensor.PackRows rows interleaved), which the CPU
	// backend's fast products read instead of Data. The CPU's Upload
	// makes it; Data stays the rows' own layout for everything else.
	Packed []byte
	// LookupOnly marks a matrix whose rows are only looked up (GetRows:
	// token embeddings), never multiplied, so that a device does not lay
	// it out for products.
	LookupOnly bool
	// Head marks the output head: a model multiplies it with one token
	// per sequence and step (a prompt's last), so that a device lays it
	// out for single-token products (the CPU repacks it even where its
	// prompt kernels prefer the rows' own layout).
	Head bool
	// Mapped says that Data is a view of a read-only file mapping: a
	// device that keeps its own copy may drop those pages from the
	// process's memory (they are read from the file again if needed).
	Mapped bool
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
	s.Packed = m.PackedRows(row, row+n)
	return s
}

// PackedRows returns the groups of Packed that hold rows [lo, hi), or nil
// when there is no packed copy or the range cuts a group of
// tensor.PackRows rows.
func (m Matrix) PackedRows(lo, hi int) []byte {
	const pr = tensor.PackRows
	if m.Packed == nil || lo%pr != 0 || hi%pr != 0 {
		return nil
	}
	gb := len(m.Packed) / (m.Rows / pr)
	return m.Packed[lo/pr*gb : hi/pr*gb]
}

// Row returns the bytes of row r.
func (m Matrix) Row(r int) []byte {
	return m.Data[r*m.RowBytes : (r+1)*m.RowBytes]
}

// SliceCols returns columns [col, col+n) of every row of m as a new
// matrix (a head block of attn_output, a column shard of ffn_down). When
// both ends fall on quantization block boundaries the rows keep m's type
// and bytes; otherwise they are dequantized to F32, which gives the same
// products. The result owns new memory.
func (m Matrix) SliceCols(col, n int) (Matrix, error) {
	if col < 0 || n <= 0 || col+n > m.Cols {
		return Matrix{}, fmt.Errorf("backend: %s: columns [%d, %d) out of range [0, %d)", m.Name, col, col+n, m.Cols)
	}
	if ColsAligned(m.Type, col, n) {
		bs := m.Type.BlockSize()
		rb, err := m.Type.RowSize(int64(n))
		if err != nil {
			return Matrix{}, fmt.Errorf("backend: %s: %w", m.Name, err)
		}
		off := col / bs * m.Type.TypeSize()
		data := make([]byte, 0, int(rb)*m.Rows)
		for r := 0; r < m.Rows; r++ {
			data = append(data, m.Row(r)[off:off+int(rb)]...)
		}
		s := m
		s.Cols, s.RowBytes, s.Data, s.Packed, s.Mapped = n, int(rb), data, nil, false
		return s, nil
	}
	row := make([]float32, m.Cols)
	data := make([]byte, 0, 4*n*m.Rows)
	for r := 0; r < m.Rows; r++ {
		if err := tensor.Dequantize(m.Type, m.Row(r), row); err != nil {
			return Matrix{}, fmt.Errorf("backend: %s: %w", m.Name, err)
		}
		for _, v := range row[col : col+n] {
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
		}
	}
	s := m
	s.Type, s.Cols, s.RowBytes, s.Data, s.Packed, s.Mapped = tensor.F32, n, 4*n, data, nil, false
	return s, nil
}

// ColsAligned reports whether SliceCols(col, n) keeps m's type.
func ColsAligned(t tensor.Type, col, n int) bool {
	bs := t.BlockSize()
	return bs > 0 && col%bs == 0 && n%bs == 0
}
