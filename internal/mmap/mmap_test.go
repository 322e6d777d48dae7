package mmap

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestFile(t *testing.T) {
	want := bytes.Repeat([]byte("glmrun "), 3000) // more than a page
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, want, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := File(f, len(want))
	f.Close() // the mapping outlives the file
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, want) {
		t.Fatal("the mapping differs from the file")
	}
	page := os.Getpagesize()
	if err := DontNeed(b[:page]); err != nil {
		t.Errorf("DontNeed: %v", err)
	}
	if !bytes.Equal(b, want) {
		t.Fatal("the mapping changed after DontNeed")
	}
	// Unaligned parts: less than a page inside, and one spanning pages.
	for _, r := range [][2]int{{1, 10}, {3, 3 * page / 2}, {page - 1, 2*page + 1}, {0, len(b)}} {
		if err := DontNeedWithin(b[r[0]:r[1]]); err != nil {
			t.Errorf("DontNeedWithin(b[%d:%d]): %v", r[0], r[1], err)
		}
	}
	if !bytes.Equal(b, want) {
		t.Fatal("the mapping changed after DontNeedWithin")
	}
	if err := Unmap(b); err != nil {
		t.Errorf("Unmap: %v", err)
	}
	if _, err := File(f, 0); err == nil {
		t.Error("a mapping of 0 bytes was made")
	}
}

// TestHugePagesWithin: the advice takes any slice, aligned or not, empty or
// smaller than a page, and the memory stays usable.
func TestHugePagesWithin(t *testing.T) {
	b := make([]byte, 8<<20+123)
	for _, s := range [][]byte{nil, b[:0], b[1:100], b[7:], b} {
		if err := HugePagesWithin(s); err != nil {
			t.Errorf("%d bytes: %v", len(s), err)
		}
	}
	for i := range b {
		b[i] = byte(i)
	}
	if b[len(b)-1] != byte(len(b)-1) {
		t.Error("memory changed")
	}
}
