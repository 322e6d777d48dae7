package safetensors

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
)

// Write writes a safetensors file holding tensors (their Name, DType,
// Shape and Data; data in the given order) and metadata (may be nil). It
// exists for tests and for making synthetic checkpoints; glmrun itself
// only reads the format. The header is padded with spaces to a multiple of
// 8 bytes, as the reference writer does.
func Write(w io.Writer, metadata map[string]string, tensors []*Tensor) error {
	var hdr bytes.Buffer
	hdr.WriteByte('{')
	first := true
	sep := func() {
		if !first {
			hdr.WriteByte(',')
		}
		first = false
	}
	if metadata != nil {
		sep()
		b, err := json.Marshal(metadata)
		if err != nil {
			return fmt.Errorf("safetensors: %w", err)
		}
		fmt.Fprintf(&hdr, "%q:%s", MetadataKey, b)
	}
	var off int64
	for _, t := range tensors {
		size, err := t.DType.ByteSize(t.NumElements())
		if err != nil {
			return &FormatError{Tensor: t.Name, Msg: err.Error()}
		}
		if size != int64(len(t.Data)) {
			return &FormatError{Tensor: t.Name, Msg: fmt.Sprintf("%s %s takes %d bytes, have %d", t.DType, t.ShapeString(), size, len(t.Data))}
		}
		sep()
		name, _ := json.Marshal(t.Name)
		shape := t.Shape
		if shape == nil {
			shape = []int64{}
		}
		sh, _ := json.Marshal(shape)
		fmt.Fprintf(&hdr, `%s:{"dtype":%q,"shape":%s,"data_offsets":[%d,%d]}`, name, string(t.DType), sh, off, off+size)
		off += size
	}
	hdr.WriteByte('}')
	for hdr.Len()%8 != 0 {
		hdr.WriteByte(' ')
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(hdr.Len()))
	bw.Write(n[:])
	bw.Write(hdr.Bytes())
	for _, t := range tensors {
		if _, err := bw.Write(t.Data); err != nil {
			return fmt.Errorf("safetensors: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	return nil
}
