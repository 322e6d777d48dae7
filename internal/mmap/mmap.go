// Package mmap maps files read-only into memory, on Unix with mmap(2) and on
// Windows with a file mapping view, so that model weights are read in place
// and share the page cache.
package mmap

import (
	"fmt"
	"os"
	"unsafe"
)

// File maps the first size bytes of f read-only (size > 0). The mapping
// outlives f: f may be closed at once. Unmap releases it.
func File(f *os.File, size int) ([]byte, error) {
	if size <= 0 {
		return nil, fmt.Errorf("mmap: %s: size %d", f.Name(), size)
	}
	return mapFile(f, size)
}

// Unmap releases a mapping File returned. An empty b does nothing.
func Unmap(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return unmap(b)
}

// DontNeed tells the system that the pages of b (page-aligned, inside a
// mapping) will not be read soon: they leave the process's resident set
// and stay in the page cache. It is advice; where the system has no such
// call it does nothing.
func DontNeed(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return dontNeed(b)
}

// DontNeedWithin is DontNeed for the pages wholly inside b, a part of a
// mapping that need not be page-aligned (one tensor's bytes): the pages it
// shares with its neighbours stay.
func DontNeedWithin(b []byte) error {
	return DontNeed(pagesWithin(b))
}

// pagesWithin returns the whole pages inside b (possibly none).
func pagesWithin(b []byte) []byte {
	page := uintptr(os.Getpagesize())
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	start := (page - addr%page) % page
	if uintptr(len(b)) <= start {
		return nil
	}
	end := start + (uintptr(len(b))-start)/page*page
	return b[start:end]
}

// HugePagesWithin advises the system to back the pages wholly inside b, a
// large buffer not yet written (a repacked copy of weights), with huge
// pages: a matrix streamed for every token then costs a TLB miss per 2 MB
// instead of per 4 KB. On Linux it is madvise(MADV_HUGEPAGE), which counts
// where transparent huge pages are enabled "always" or "madvise"; elsewhere
// it does nothing. It is advice: an error changes nothing but the speed.
func HugePagesWithin(b []byte) error {
	if p := pagesWithin(b); len(p) > 0 {
		return hugePages(p)
	}
	return nil
}
