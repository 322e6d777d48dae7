package mmap

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePagesWithin asks for transparent huge pages on the pages wholly
// inside b.
func hugePagesWithin(b []byte) error {
	page := uintptr(os.Getpagesize())
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	start := (page - addr%page) % page
	if uintptr(len(b)) <= start+page {
		return nil
	}
	end := start + (uintptr(len(b))-start)/page*page
	return unix.Madvise(b[start:end], unix.MADV_HUGEPAGE)
}
