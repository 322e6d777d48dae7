package cpu

import (
	"fmt"

	"github.com/glmrun/glmrun/backend"
	"github.com/glmrun/glmrun/tensor"
)

// cacheBuf is a CPU buffer stored in a KV cache type (F16, BF16 or
// Q8_0; float32 buffers are buf): n values in their bytes.
type cacheBuf struct {
	t    tensor.Type
	n    int
	data []byte
}

func (b *cacheBuf) Len() int { return b.n }

// Slice returns a view of values [off, off+n); both must be whole blocks
// of the type.
func (b *cacheBuf) Slice(off, n int) backend.Buffer {
	bs := b.t.BlockSize()
	if off < 0 || n < 0 || off+n > b.n || off%bs != 0 || n%bs != 0 {
		panic(fmt.Sprintf("cpu: view [%d, %d) of a %s buffer of %d values (blocks of %d)", off, off+n, b.t, b.n, bs))
	}
	ts := b.t.TypeSize()
	lo, hi := off/bs*ts, (off+n)/bs*ts
	return &cacheBuf{t: b.t, n: n, data: b.data[lo:hi:hi]}
}

// AllocType returns a new zeroed buffer of n values stored as t, one of
// backend.CacheTypes() (n a whole number of t's blocks).
func (d *Device) AllocType(n int, t tensor.Type) (backend.Buffer, error) {
	size, err := backend.CacheBytes(n, t)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.Name(), err)
	}
	if t == tensor.F32 {
		return d.Alloc(n)
	}
	if err := d.reserveBuffer(size); err != nil {
		return nil, err
	}
	// Zero bytes are zero values in every type (a Q8_0 block of scale 0).
	return &cacheBuf{t: t, n: n, data: make([]byte, size)}, nil
}

// rows is a latent or indexer-key buffer as the attention reads it: rows
// of w values, float32 or stored in a cache type. It is a value, so that
// taking a prefix allocates nothing.
type rows struct {
	f32   []float32 // float32 rows, or nil
	typed bool      // rows in data, stored as t
	t     tensor.Type
	data  []byte
	n     int // values in data
	w     int
	rb    int // bytes per row of data
}

// rowsOf returns b's rows of w values (b a CPU buffer of either kind).
func rowsOf(b backend.Buffer, w int) rows {
	switch v := b.(type) {
	case buf:
		return rows{f32: v, w: w}
	case *cacheBuf:
		rb, err := v.t.RowSize(int64(w))
		if err != nil {
			panic(fmt.Sprintf("cpu: rows of %d values of a %s buffer: %v", w, v.t, err))
		}
		return rows{typed: true, t: v.t, data: v.data, n: v.n, w: w, rb: int(rb)}
	case nil:
		return rows{w: w}
	}
	panic(fmt.Sprintf("cpu: buffer %T is not a CPU buffer", b))
}

// values returns the number of values the buffer holds.
func (r rows) values() int {
	if r.typed {
		return r.n
	}
	return len(r.f32)
}

// prefix returns the first n rows.
func (r rows) prefix(n int) rows {
	if r.typed {
		r.n, r.data = n*r.w, r.data[:n*r.rb:n*r.rb]
		return r
	}
	r.f32 = r.f32[: n*r.w : n*r.w]
	return r
}

// row returns row s in float32: the buffer's own values, or converted
// into tmp (w values).
func (r rows) row(s int, tmp []float32) []float32 {
	if !r.typed {
		return r.f32[s*r.w : (s+1)*r.w]
	}
	tmp = tmp[:r.w]
	convertRow(tmp, r.t, r.data[s*r.rb:(s+1)*r.rb])
	return tmp
}

// float32s returns all of r's values in float32: a float32 buffer's own,
// a cache type's converted into *buf (grown as needed). The exact
// device's reference reads a typed cache this way, and so do the fast
// causal prefill's heads.
func (r rows) float32s(buf *[]float32) []float32 {
	if !r.typed {
		return r.f32
	}
	*buf = grow(*buf, r.n)
	convertRow(*buf, r.t, r.data)
	return *buf
}

// tile makes the float32 rows idx[i] addressable as base[offs[i]:][:w]:
// a float32 buffer's rows where they are, a cache type's converted into
// tmp (len(idx)·w values), so that the kernels read each row from memory
// once in its stored width.
func (r rows) tile(offs, idx []int32, tmp []float32) (base []float32) {
	if !r.typed {
		for i, s := range idx {
			offs[i] = s * int32(r.w)
		}
		return r.f32
	}
	for i, s := range idx {
		offs[i] = int32(i * r.w)
		convertRow(tmp[i*r.w:(i+1)*r.w], r.t, r.data[int(s)*r.rb:(int(s)+1)*r.rb])
	}
	return tmp
}

// convertRow writes the values of src (stored as t) to dst in float32,
// exactly as tensor.Dequantize does, with the vector kernels where the CPU
// has them.
func convertRow(dst []float32, t tensor.Type, src []byte) {
	if convertRowVec(dst, t, src) {
		return
	}
	if err := tensor.Dequantize(t, src, dst); err != nil {
		panic(fmt.Sprintf("cpu: %d bytes of %s into %d values: %v", len(src), t, len(dst), err))
	}
}

// writeCache stores the float32 values src into the cache buffer dst.
func writeCache(dst *cacheBuf, src []float32) {
	if err := tensor.Quantize(dst.t, src, dst.data); err != nil {
		panic(fmt.Sprintf("cpu: %d values into a %s buffer of %d: %v", len(src), dst.t, dst.n, err))
	}
}
