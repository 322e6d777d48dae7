package mmap

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"unsafe"
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

// TestAnonymous: the memory is zeroed, writable to its last byte, aligned
// for huge pages on Unix (64 bytes is what its users need everywhere), and
// released; sizes of 0 or less are errors.
func TestAnonymous(t *testing.T) {
	align := uintptr(HugePageAlign)
	if runtime.GOOS == "windows" {
		align = 64
	}
	for _, size := range []int{1, 4095, 4 << 20, 8<<20 + 123} {
		b, err := Anonymous(size)
		if err != nil {
			t.Fatalf("%d bytes: %v", size, err)
		}
		if len(b) != size {
			t.Errorf("%d bytes: got %d", size, len(b))
		}
		if addr := uintptr(unsafe.Pointer(unsafe.SliceData(b))); addr%align != 0 {
			t.Errorf("%d bytes at %#x: not aligned to %d", size, addr, align)
		}
		for i := range b {
			if b[i] != 0 {
				t.Fatalf("%d bytes: byte %d is %d, not zero", size, i, b[i])
			}
			b[i] = byte(i)
		}
		if b[size-1] != byte(size-1) {
			t.Errorf("%d bytes: the last byte did not keep its value", size)
		}
		if err := Release(b); err != nil {
			t.Errorf("%d bytes: Release: %v", size, err)
		}
	}
	for _, size := range []int{0, -1} {
		if _, err := Anonymous(size); err == nil {
			t.Errorf("Anonymous(%d) did not fail", size)
		}
	}
	if err := Release(nil); err != nil {
		t.Errorf("Release(nil): %v", err)
	}
}
