package convert

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"runtime"
	"sync"

	"github.com/glmrun/glmrun/safetensors"
	"github.com/glmrun/glmrun/tensor"
)

// chunkElems bounds the float32 elements converted at once: the working
// memory of the conversion is a few buffers of this size.
const chunkElems = 4 << 20

// streamer writes output tensors, converting chunk by chunk.
type streamer struct {
	f32     []float32
	out     []byte
	workers int
	block   []int // quantization_config.weight_block_size, or nil
	// ck releases source pages once read: each is read once (kv_b_proj
	// twice), so the resident set stays a few chunks.
	ck *safetensors.Checkpoint
	// progress is called with the bytes of tensor data written so far.
	progress func(n int64)
}

func newStreamer(block []int, ck *safetensors.Checkpoint, progress func(int64)) *streamer {
	return &streamer{workers: max(runtime.GOMAXPROCS(0), 1), block: block, ck: ck, progress: progress}
}

// buffers returns the reused float32 and output buffers, grown to elems
// values and outBytes bytes.
func (st *streamer) buffers(elems int, outBytes int64) ([]float32, []byte) {
	if cap(st.f32) < elems {
		st.f32 = make([]float32, elems)
	}
	if int64(cap(st.out)) < outBytes {
		st.out = make([]byte, outBytes)
	}
	return st.f32[:elems], st.out[:outBytes]
}

// write produces o's data on w.
func (st *streamer) write(w io.Writer, o *outTensor) error {
	cols := o.ne[0]
	switch o.kind {
	case kindCopy:
		s := o.srcs[0]
		return st.rows(w, o, s, 0, s.t.NumElements()/cols)
	case kindStack:
		for _, s := range o.srcs {
			if err := st.rows(w, o, s, 0, s.t.NumElements()/cols); err != nil {
				return err
			}
		}
		return nil
	case kindVB:
		// Head h's value rows follow its dn key rows in kv_b_proj.
		dv := o.ne[1]
		dn := o.srcs[0].t.Shape[0]/o.ne[2] - dv
		for h := range o.ne[2] {
			if err := st.rows(w, o, o.srcs[0], h*(dn+dv)+dn, dv); err != nil {
				return err
			}
		}
		return nil
	case kindKB:
		// Head h's dn key rows of kr latent values, transposed into kr rows
		// of dn values.
		dn, kr, heads := o.ne[0], o.ne[1], o.ne[2]
		dv := o.srcs[0].t.Shape[0]/heads - dn
		block := make([]float32, dn*kr)
		for h := range heads {
			if err := st.readRows(o.srcs[0], h*(dn+dv), dn, block); err != nil {
				return err
			}
			f32, _ := st.buffers(int(dn*kr), 0)
			for j := range dn {
				for c := range kr {
					f32[c*dn+j] = block[j*kr+c]
				}
			}
			if err := st.encodeWrite(w, o, f32, kr); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("convert: tensor %s: unknown kind %d", o.name, o.kind)
}

// rows converts rows [r0, r0+n) of source s, each of o.ne[0] elements,
// to o's type and writes them.
func (st *streamer) rows(w io.Writer, o *outTensor, s source, r0, n int64) error {
	cols := o.ne[0]
	per := max(chunkElems/cols, 1)
	srcRow, err := s.t.DType.ByteSize(cols)
	if err != nil {
		return ckErr(s.t, "%v", err)
	}
	for done := int64(0); done < n; {
		k := min(per, n-done)
		r := r0 + done
		if raw, ok := rawCopy(s, o.typ); ok {
			// The type is unchanged: the bytes are the source's (a
			// signalling BF16 NaN made quiet, as a round trip through
			// float32 would).
			data := s.t.Data[r*srcRow : (r+k)*srcRow]
			if raw == tensor.BF16 && hasSignalingBF16(data) {
				_, buf := st.buffers(0, int64(len(data)))
				copy(buf, data)
				quietBF16(buf)
				data = buf
			}
			if _, err := w.Write(data); err != nil {
				return err
			}
			st.ck.EvictRange(s.t, r*srcRow, (r+k)*srcRow)
			st.progress(int64(len(data)))
		} else {
			f32, _ := st.buffers(int(k*cols), 0)
			if err := st.readRows(s, r, k, f32); err != nil {
				return err
			}
			if err := st.encodeWrite(w, o, f32, k); err != nil {
				return err
			}
		}
		done += k
	}
	return nil
}

// rawCopy reports whether s can be copied byte for byte into type t.
func rawCopy(s source, t tensor.Type) (tensor.Type, bool) {
	if s.scale != nil {
		return 0, false
	}
	switch {
	case s.t.DType == safetensors.F32 && t == tensor.F32,
		s.t.DType == safetensors.F16 && t == tensor.F16,
		s.t.DType == safetensors.BF16 && t == tensor.BF16:
		return t, true
	}
	return 0, false
}

func hasSignalingBF16(b []byte) bool {
	for i := 0; i+1 < len(b); i += 2 {
		h := binary.LittleEndian.Uint16(b[i:])
		if h&0x7fff > 0x7f80 && h&0x40 == 0 {
			return true
		}
	}
	return false
}

func quietBF16(b []byte) {
	for i := 0; i+1 < len(b); i += 2 {
		h := binary.LittleEndian.Uint16(b[i:])
		if h&0x7fff > 0x7f80 {
			binary.LittleEndian.PutUint16(b[i:], h|0x40)
		}
	}
}

// readRows converts rows [r0, r0+n) of s to float32 in dst, applying FP8
// block scales (value × scale, in float32) when s has them.
func (st *streamer) readRows(s source, r0, n int64, dst []float32) error {
	t := s.t
	cols := t.NumElements() // a vector is one row
	if len(t.Shape) >= 2 && t.Shape[0] > 0 {
		cols /= t.Shape[0]
	}
	rowBytes, err := t.DType.ByteSize(cols)
	if err != nil {
		return ckErr(t, "%v", err)
	}
	data := t.Data[r0*rowBytes : (r0+n)*rowBytes]
	err = st.parallel(n, func(a, b int64) error {
		return safetensors.ToFloat32(t.DType, data[a*rowBytes:b*rowBytes], dst[a*cols:b*cols])
	})
	if err != nil {
		return ckErr(t, "%v", err)
	}
	st.ck.EvictRange(t, r0*rowBytes, (r0+n)*rowBytes)
	if s.scale == nil {
		return nil
	}
	br, bc, err := scaleBlocks(t, s.scale, st.block)
	if err != nil {
		return err
	}
	sc := make([]float32, s.scale.NumElements())
	if err := safetensors.ToFloat32(s.scale.DType, s.scale.Data, sc); err != nil {
		return ckErr(s.scale, "%v", err)
	}
	scCols := (cols + bc - 1) / bc
	return st.parallel(n, func(a, b int64) error {
		for r := a; r < b; r++ {
			row := dst[r*cols : (r+1)*cols]
			srow := sc[((r0+r)/br)*scCols:]
			for c := range row {
				row[c] *= srow[int64(c)/bc]
			}
		}
		return nil
	})
}

// encodeWrite converts n rows of float32 to o's type and writes them.
func (st *streamer) encodeWrite(w io.Writer, o *outTensor, f32 []float32, n int64) error {
	cols := o.ne[0]
	rowBytes, err := o.typ.RowSize(cols)
	if err != nil {
		return err
	}
	_, out := st.buffers(0, rowBytes*n)
	err = st.parallel(n, func(a, b int64) error {
		return encode(o.typ, f32[a*cols:b*cols], out[a*rowBytes:b*rowBytes])
	})
	if err != nil {
		return fmt.Errorf("convert: tensor %s: %w", o.name, err)
	}
	if _, err := w.Write(out); err != nil {
		return err
	}
	st.progress(int64(len(out)))
	return nil
}

// encode converts float32 values to type t the way gguf-py does: F16 as
// numpy's astype (round to nearest even, NaN payloads kept), BF16, Q8_0
// as ggml's reference quantizers (tensor.Quantize).
func encode(t tensor.Type, src []float32, dst []byte) error {
	switch t {
	case tensor.F32:
		for i, v := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
		return nil
	case tensor.F16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], f32ToF16Numpy(v))
		}
		return nil
	}
	return tensor.Quantize(t, src, dst)
}

// f32ToF16Numpy is numpy's float32 → float16 conversion: tensor.F32ToF16
// for numbers; a NaN keeps the top 10 bits of its payload (at least one
// set) rather than being made quiet.
func f32ToF16Numpy(f float32) uint16 {
	if f != f {
		b := math.Float32bits(f)
		h := uint16(b>>16)&0x8000 | 0x7c00 | uint16(b&0x7fffff>>13)
		if h&0x3ff == 0 {
			h |= 1
		}
		return h
	}
	return tensor.F32ToF16(f)
}

// parallel runs fn over [0, n) split into contiguous ranges, one per
// worker when the range is large enough to pay for the goroutines.
func (st *streamer) parallel(n int64, fn func(a, b int64) error) error {
	w := int64(st.workers)
	if w <= 1 || n < 2*w {
		return fn(0, n)
	}
	var wg sync.WaitGroup
	errs := make([]error, w)
	for i := range w {
		a, b := n*i/w, n*(i+1)/w
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(a, b)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
