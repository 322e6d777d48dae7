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

// HugePageAlign is the alignment of the memory Anonymous returns on Unix:
// the size of an x86-64 or arm64 transparent huge page, so that every whole
// 2 MB of the memory can be one.
const HugePageAlign = 2 << 20

// Anonymous returns size bytes (size > 0) of zeroed read-write memory
// outside Go's heap, starting on a HugePageAlign boundary on Unix (on
// Windows, on its 64 KB allocation granularity); on Linux the
// system is asked for transparent huge pages (madvise(MADV_HUGEPAGE))
// before any page is touched. It is for large buffers written once and
// then streamed (repacked weights): memory from the Go heap may have been
// touched already, in small pages, when it is handed out. Release frees
// it; the garbage collector never does.
func Anonymous(size int) ([]byte, error) {
	if size <= 0 {
		return nil, fmt.Errorf("mmap: anonymous memory of %d bytes", size)
	}
	b, err := anonymous(size)
	if err != nil {
		return nil, fmt.Errorf("mmap: anonymous memory of %d bytes: %w", size, err)
	}
	_ = hugePages(pagesWithin(b)) // advice: an error costs speed only
	return b, nil
}

// Release frees memory Anonymous returned; nothing of it may be used
// after. An empty b does nothing.
func Release(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return release(b)
}
