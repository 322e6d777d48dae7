package gguf

import (
	"bytes"
	"errors"
	"os"
	"runtime"
	"testing"
)

// FuzzOpen feeds arbitrary bytes to the parser that Open runs on the
// mapped file. It must never panic, must return a *FormatError for bad
// input, must bound its allocations by the input size, and whatever it
// accepts must survive a rewrite with the Writer unchanged.
func FuzzOpen(f *testing.F) {
	f.Add(tinyFile(f))
	f.Add(baseFile(f))
	f.Add([]byte("GGUF\x03\x00\x00\x00"))
	// A real file as llama.cpp wrote it, and real metadata and tensor
	// infos with each tensor cut to one row, so that most mutations hit
	// the header rather than the tensor data.
	b, err := os.ReadFile("../testdata/formats/llama-dense.real.Q2_K.gguf")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	for _, path := range []string{
		"../testdata/formats/llama-dense.real.IQ4_XS.gguf",
		"../testdata/models/glm5-mini.Q4_K_M.gguf",
	} {
		f.Add(oneRowFile(f, path))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		file, err := Parse("fuzz.gguf", data)
		runtime.ReadMemStats(&after)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20+32*uint64(len(data)) {
			t.Fatalf("parsing %d bytes allocated %d", len(data), alloc)
		}
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a *FormatError", err)
			}
			return
		}
		for _, ti := range file.Tensors {
			size, err := ti.Type.RowSize(ti.NumElements())
			if err != nil || size != int64(len(ti.Data)) {
				t.Fatalf("tensor %q: %d bytes for %s %v (%v)", ti.Name, len(ti.Data), ti.Type, ti.Dims, err)
			}
		}
		for _, kv := range file.KVs {
			_ = kv.Value.String()
		}
		if file.Alignment > 1<<16 {
			return // valid, but the rewrite would pad the header to the alignment
		}
		var buf bytes.Buffer
		if _, err := NewWriterFrom(file).WriteTo(&buf); err != nil {
			t.Fatalf("rewrite: %v", err)
		}
		again, err := Parse("again.gguf", buf.Bytes())
		if err != nil {
			t.Fatalf("rewritten file does not parse: %v", err)
		}
		if len(again.KVs) != len(file.KVs) || len(again.Tensors) != len(file.Tensors) {
			t.Fatalf("rewrite changed the counts")
		}
		for i, ti := range again.Tensors {
			if ti.Name != file.Tensors[i].Name || !bytes.Equal(ti.Data, file.Tensors[i].Data) {
				t.Fatalf("rewrite changed tensor %q", file.Tensors[i].Name)
			}
		}
		var buf2 bytes.Buffer
		if _, err := NewWriterFrom(again).WriteTo(&buf2); err != nil || !bytes.Equal(buf.Bytes(), buf2.Bytes()) {
			t.Fatalf("second rewrite differs (%v)", err)
		}
	})
}

// oneRowFile returns the file at path with every tensor cut to its first
// row.
func oneRowFile(tb testing.TB, path string) []byte {
	file, err := Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer file.Close()
	w := NewWriterFrom(file)
	for _, ti := range file.Tensors {
		dims := []int64{ti.RowLen()}
		size, err := ti.Type.RowSize(dims[0])
		if err != nil {
			tb.Fatal(err)
		}
		if err := w.ReplaceTensor(ti.Name, ti.Type, dims, ti.Data[:size]); err != nil {
			tb.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// tinyFile returns the bytes of tinyWriter's file.
func tinyFile(tb testing.TB) []byte {
	var buf bytes.Buffer
	if _, err := tinyWriter(tb).WriteTo(&buf); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}
