package gguf

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/tensor"
)

// streamOf returns w's metadata in a tensor-less writer and its tensors as
// StreamTensors that write their data in pieces of at most piece bytes (0:
// in one call), to check that WriteStream reassembles them.
func streamOf(w *Writer, piece int) (*Writer, []StreamTensor) {
	meta := &Writer{Version: w.Version, kvs: w.kvs, unpadded: w.unpadded}
	var ts []StreamTensor
	for _, t := range w.tensors {
		data := t.data
		ts = append(ts, StreamTensor{Name: t.name, Type: t.typ, Dims: t.dims, Write: func(out io.Writer) error {
			for rest := data; len(rest) > 0; {
				n := len(rest)
				if piece > 0 {
					n = min(n, piece)
				}
				if _, err := out.Write(rest[:n]); err != nil {
					return err
				}
				rest = rest[n:]
			}
			return nil
		}})
	}
	return meta, ts
}

// TestWriteStreamSameAsWriteTo: streaming a file's tensors gives the bytes
// WriteTo gives for the same writer, for llama.cpp-written models and a
// writer with every value type, an odd alignment and an empty tensor.
func TestWriteStreamSameAsWriteTo(t *testing.T) {
	type input struct {
		name string
		w    *Writer
	}
	var inputs []input
	tiny := tinyWriter(t)
	inputs = append(inputs, input{"tiny", tiny})
	aligned := tinyWriter(t)
	aligned.SetKV(KeyAlignment, Uint32(64))
	inputs = append(inputs, input{"tiny-align64", aligned})
	inputs = append(inputs, input{"no-tensors", &Writer{Version: 3, kvs: tiny.kvs}})
	for _, path := range []string{"../testdata/models/glm5-dense.Q4_K_M.gguf", "../testdata/formats/llama-dense.real.Q5_K_M.gguf"} {
		f, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		inputs = append(inputs, input{filepath.Base(path), NewWriterFrom(f)})
	}
	for _, in := range inputs {
		for _, piece := range []int{0, 1000} {
			var want, got bytes.Buffer
			if _, err := in.w.WriteTo(&want); err != nil {
				t.Fatal(err)
			}
			meta, ts := streamOf(in.w, piece)
			n, err := meta.WriteStream(&got, ts)
			if err != nil {
				t.Fatalf("%s: %v", in.name, err)
			}
			if n != int64(got.Len()) {
				t.Errorf("%s: WriteStream returned %d, wrote %d bytes", in.name, n, got.Len())
			}
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Errorf("%s (pieces of %d): WriteStream's %d bytes differ from WriteTo's %d", in.name, piece, got.Len(), want.Len())
			}
		}
	}
}

// failWriter fails every write.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// TestWriteStreamErrors: each misuse gives an error that names the tensor
// or the problem, and nothing panics.
func TestWriteStreamErrors(t *testing.T) {
	q8 := func(name string, write func(io.Writer) error) StreamTensor {
		return StreamTensor{Name: name, Type: tensor.Q8_0, Dims: []int64{32, 2}, Write: write}
	}
	exact := func(out io.Writer) error { _, err := out.Write(make([]byte, 68)); return err }
	cases := []struct {
		name    string
		w       *Writer
		out     io.Writer
		tensors []StreamTensor
		want    string
	}{
		{"short", NewWriter(), io.Discard, []StreamTensor{q8("w", func(out io.Writer) error {
			_, err := out.Write(make([]byte, 67))
			return err
		})}, `tensor "w": 67 data bytes written, Q8_0 [32 2] needs 68`},
		{"long", NewWriter(), io.Discard, []StreamTensor{q8("w", func(out io.Writer) error {
			_, err := out.Write(make([]byte, 69))
			return err
		})}, `tensor "w": 69 data bytes written`},
		{"write error", NewWriter(), io.Discard, []StreamTensor{q8("w", func(io.Writer) error {
			return errors.New("source gone")
		})}, `tensor "w": source gone`},
		{"output error", NewWriter(), failWriter{}, []StreamTensor{q8("w", exact)}, "disk full"},
		{"twice", NewWriter(), io.Discard, []StreamTensor{q8("w", exact), q8("w", exact)}, `tensor "w" added twice`},
		{"no write", NewWriter(), io.Discard, []StreamTensor{q8("w", nil)}, `tensor "w": no Write function`},
		{"bad row", NewWriter(), io.Discard, []StreamTensor{{Name: "r", Type: tensor.Q8_0, Dims: []int64{31, 2}, Write: exact}},
			`tensor "r": row length 31 is not a multiple of the Q8_0 block size 32`},
		{"unknown type", NewWriter(), io.Discard, []StreamTensor{{Name: "u", Type: tensor.Type(99), Dims: []int64{4}, Write: exact}},
			`tensor "u": unknown ggml type 99`},
		{"negative", NewWriter(), io.Discard, []StreamTensor{{Name: "n", Type: tensor.F32, Dims: []int64{-1}, Write: exact}},
			`tensor "n": negative dimension`},
		{"held tensors", tinyWriter(t), io.Discard, nil, "already holds 5 tensors"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.w.WriteStream(c.out, c.tensors)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one containing %q", err, c.want)
			}
		})
	}
}
