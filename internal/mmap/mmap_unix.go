//go:build unix

package mmap

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

func mapFile(f *os.File, size int) ([]byte, error) {
	return unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
}

func unmap(b []byte) error { return unix.Munmap(b) }

func dontNeed(b []byte) error { return unix.Madvise(b, unix.MADV_DONTNEED) }

// anonymous maps size bytes plus an alignment's worth, then unmaps what lies
// before the first aligned byte and after the last page needed.
func anonymous(size int) ([]byte, error) {
	page := uintptr(os.Getpagesize())
	need := (uintptr(size) + page - 1) / page * page
	total := need + HugePageAlign
	p, err := unix.MmapPtr(-1, 0, nil, total, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, err
	}
	addr := uintptr(p)
	head := (HugePageAlign - addr%HugePageAlign) % HugePageAlign
	if head > 0 {
		if err := unix.MunmapPtr(p, head); err != nil {
			_ = unix.MunmapPtr(p, total)
			return nil, err
		}
	}
	start := unsafe.Add(p, head)
	if tail := total - head - need; tail > 0 {
		if err := unix.MunmapPtr(unsafe.Add(start, need), tail); err != nil {
			_ = unix.MunmapPtr(start, total-head)
			return nil, err
		}
	}
	return unsafe.Slice((*byte)(start), size), nil
}

func release(b []byte) error {
	page := uintptr(os.Getpagesize())
	n := (uintptr(len(b)) + page - 1) / page * page
	return unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(b)), n)
}
