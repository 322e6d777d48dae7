//go:build windows

package mmap

import (
	"os"
	"unsafe"

	"golang.org/x/sys/windows"
)

func mapFile(f *os.File, size int) ([]byte, error) {
	h, err := windows.CreateFileMapping(windows.Handle(f.Fd()), nil, windows.PAGE_READONLY,
		uint32(uint64(size)>>32), uint32(size), nil)
	if err != nil {
		return nil, os.NewSyscallError("CreateFileMapping", err)
	}
	// The view keeps the mapping object alive after its handle closes.
	defer windows.CloseHandle(h)
	addr, err := windows.MapViewOfFile(h, windows.FILE_MAP_READ, 0, 0, uintptr(size))
	if err != nil {
		return nil, os.NewSyscallError("MapViewOfFile", err)
	}
	// addr is memory the system owns, outside Go's heap: reading the
	// integer as a pointer is what a uintptr-to-pointer conversion would
	// do, without vet's warning meant for Go memory.
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	return unsafe.Slice((*byte)(p), size), nil
}

func unmap(b []byte) error {
	return windows.UnmapViewOfFile(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}

// dontNeed does nothing: a read-only view's pages are dropped by the
// system's working-set trimming.
func dontNeed([]byte) error { return nil }

// anonymous commits size bytes. The region starts on a 64 KB boundary;
// Windows' large pages need a privilege, so the pages are small and a 2 MB
// alignment would buy nothing.
func anonymous(size int) ([]byte, error) {
	addr, err := windows.VirtualAlloc(0, uintptr(size), windows.MEM_RESERVE|windows.MEM_COMMIT, windows.PAGE_READWRITE)
	if err != nil {
		return nil, os.NewSyscallError("VirtualAlloc", err)
	}
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	return unsafe.Slice((*byte)(p), size), nil
}

func release(b []byte) error {
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return os.NewSyscallError("VirtualFree", windows.VirtualFree(addr, 0, windows.MEM_RELEASE))
}
