//go:build unix

package cuda

import "github.com/ebitengine/purego"

const (
	defaultLibrary = "libcuda.so.1"
	defaultNCCL    = "libnccl.so.2"
)

func openLibrary(path string) (uintptr, error) {
	return purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
}

func librarySymbol(lib uintptr, name string) (uintptr, error) { return purego.Dlsym(lib, name) }

func closeLibrary(lib uintptr) { purego.Dlclose(lib) }
