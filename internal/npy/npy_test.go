package npy

import (
	"bytes"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name  string
		shape []int
	}{
		{"vector", []int{5}},
		{"matrix", []int{3, 4}},
		{"scalar-like", []int{1, 1, 1}},
		{"empty", []int{0, 7}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := 1
			for _, d := range tc.shape {
				n *= d
			}
			data := make([]float32, n)
			for i := range data {
				data[i] = float32(i)*0.5 - 1
			}
			var buf bytes.Buffer
			if err := WriteFloat32(&buf, tc.shape, data); err != nil {
				t.Fatal(err)
			}
			if (buf.Len()-n*4)%64 != 0 {
				t.Errorf("header length %d is not a multiple of 64", buf.Len()-n*4)
			}
			a, err := Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
			if err != nil {
				t.Fatal(err)
			}
			if len(a.Shape) != len(tc.shape) {
				t.Fatalf("shape %v, want %v", a.Shape, tc.shape)
			}
			for i := range tc.shape {
				if a.Shape[i] != tc.shape[i] {
					t.Fatalf("shape %v, want %v", a.Shape, tc.shape)
				}
			}
			for i := range data {
				if a.F32[i] != data[i] {
					t.Fatalf("value %d: %v, want %v", i, a.F32[i], data[i])
				}
			}
		})
	}
}

func TestReadRejectsLies(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteFloat32(&buf, []int{2, 2}, []float32{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	b := bytes.Replace(buf.Bytes(), []byte("(2, 2)"), []byte("(9999999, 99999)"), 1)
	if _, err := Read(bytes.NewReader(b), int64(len(b))); err == nil {
		t.Fatal("a header claiming more data than the file holds was accepted")
	}
	if _, err := Read(bytes.NewReader([]byte("not npy at all")), 14); err == nil {
		t.Fatal("bad magic accepted")
	}
}

func TestHeaderFixedSize(t *testing.T) {
	h, err := Header("<i4", []int{3, 4}, 256)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 256 || h[255] != '\n' {
		t.Fatalf("header of %d bytes ending in %q, want 256 ending in newline", len(h), h[len(h)-1])
	}
	data := make([]byte, 4*12)
	a, err := Read(bytes.NewReader(append(h, data...)), int64(256+len(data)))
	if err != nil || len(a.I32) != 12 || a.Shape[0] != 3 || a.Shape[1] != 4 {
		t.Fatalf("read back: %v %+v", err, a)
	}
	if _, err := Header("<f4", []int{1, 2, 3, 4}, 32); err == nil {
		t.Fatal("a header longer than its size was accepted")
	}
}
