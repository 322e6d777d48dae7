//go:build windows

package cuda

import "golang.org/x/sys/windows"

const (
	defaultLibrary = "nvcuda.dll"
	defaultNCCL    = "nccl.dll" // NCCL has no Windows build; the name only fails to load
)

func openLibrary(path string) (uintptr, error) {
	h, err := windows.LoadLibrary(path)
	return uintptr(h), err
}

func librarySymbol(lib uintptr, name string) (uintptr, error) {
	return windows.GetProcAddress(windows.Handle(lib), name)
}

func closeLibrary(lib uintptr) { windows.FreeLibrary(windows.Handle(lib)) }
