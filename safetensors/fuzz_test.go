package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"runtime"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the header parser that Open runs on
// the mapped file. It must never panic, must return a *FormatError for bad
// input, must bound its allocations by the input size, and every tensor it
// accepts must lie inside the data and survive a rewrite with Write.
func FuzzParse(f *testing.F) {
	f.Add(encode(f, map[string]string{"format": "pt"}, sampleTensors()...))
	f.Add(rawFile(`{"w":{"dtype":"F8_E4M3","shape":[2,2],"data_offsets":[0,4]}}`, make([]byte, 4)))
	f.Add(rawFile(`{}`, nil))
	// The real test checkpoints' headers with their data cut off, so that
	// most mutations hit the header.
	for _, path := range []string{"../testdata/hf/glm5-fp8s/model.safetensors", "../testdata/hf/flash-hfs/model.safetensors"} {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		if n := 8 + binary.LittleEndian.Uint64(b); n < uint64(len(b)) {
			b = b[:n]
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		file, err := Parse("fuzz.safetensors", data)
		runtime.ReadMemStats(&after)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20+64*uint64(len(data)) {
			t.Fatalf("parsing %d bytes allocated %d", len(data), alloc)
		}
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a *FormatError", err)
			}
			return
		}
		for _, tt := range file.Tensors {
			size, err := tt.DType.ByteSize(tt.NumElements())
			if err != nil || size != int64(len(tt.Data)) {
				t.Fatalf("tensor %q: %d bytes for %s %v (%v)", tt.Name, len(tt.Data), tt.DType, tt.Shape, err)
			}
			if CanConvert(tt.DType) && tt.NumElements() <= 1<<16 {
				if err := ToFloat32(tt.DType, tt.Data, make([]float32, tt.NumElements())); err != nil {
					t.Fatalf("tensor %q: %v", tt.Name, err)
				}
			}
		}
		var buf bytes.Buffer
		if err := Write(&buf, file.Metadata, file.Tensors); err != nil {
			t.Fatal(err)
		}
		again, err := Parse("rewrite.safetensors", buf.Bytes())
		if err != nil {
			t.Fatalf("rewrite does not parse: %v", err)
		}
		if len(again.Tensors) != len(file.Tensors) {
			t.Fatalf("rewrite has %d tensors, want %d", len(again.Tensors), len(file.Tensors))
		}
		for i, tt := range file.Tensors {
			u := again.Tensors[i]
			if u.Name != tt.Name || u.DType != tt.DType || !bytes.Equal(u.Data, tt.Data) {
				t.Fatalf("rewrite changed tensor %q", tt.Name)
			}
		}
	})
}
