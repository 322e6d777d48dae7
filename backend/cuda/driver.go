package cuda

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// driver holds the bound driver API functions of one loaded libcuda. The
// _v2 names are the ones cuda.h maps the plain names to.
type driver struct {
	path string
	lib  uintptr

	cuGetErrorName               func(code int32, s *uintptr) int32
	cuGetErrorString             func(code int32, s *uintptr) int32
	cuInit                       func(flags uint32) int32
	cuDriverGetVersion           func(v *int32) int32
	cuDeviceGetCount             func(n *int32) int32
	cuDeviceGet                  func(d *int32, ordinal int32) int32
	cuDeviceGetAttribute         func(v *int32, attr int32, d int32) int32
	cuDeviceGetName              func(name *byte, n int32, d int32) int32
	cuDeviceTotalMem_v2          func(n *uint64, d int32) int32
	cuDevicePrimaryCtxRetain     func(c *uintptr, d int32) int32
	cuDevicePrimaryCtxRelease_v2 func(d int32) int32
	cuCtxSetCurrent              func(c uintptr) int32
	cuCtxSynchronize             func() int32
	cuStreamCreate               func(s *uintptr, flags uint32) int32
	cuStreamDestroy_v2           func(s uintptr) int32
	cuStreamSynchronize          func(s uintptr) int32
	cuEventCreate                func(e *uintptr, flags uint32) int32
	cuEventRecord                func(e, s uintptr) int32
	cuEventSynchronize           func(e uintptr) int32
	cuEventElapsedTime           func(ms *float32, start, end uintptr) int32
	cuEventDestroy_v2            func(e uintptr) int32
	cuMemGetInfo_v2              func(free, total *uint64) int32
	cuMemAlloc_v2                func(p *uint64, n uint64) int32
	cuMemFree_v2                 func(p uint64) int32
	cuMemcpyHtoD_v2              func(dst uint64, src unsafe.Pointer, n uint64) int32
	cuMemcpyHtoDAsync_v2         func(dst uint64, src unsafe.Pointer, n uint64, s uintptr) int32
	cuMemcpyDtoH_v2              func(dst unsafe.Pointer, src uint64, n uint64) int32
	cuMemcpyDtoD_v2              func(dst, src uint64, n uint64) int32
	cuModuleLoadDataEx           func(m *uintptr, image unsafe.Pointer, n uint32, opts *int32, vals *uintptr) int32
	cuModuleUnload               func(m uintptr) int32
	cuModuleGetFunction          func(f *uintptr, m uintptr, name *byte) int32
	cuLaunchKernel               func(f uintptr, gx, gy, gz, bx, by, bz, shared uint32, s uintptr, params, extra unsafe.Pointer) int32

	// Stream capture and graphs (CUDA 12.0 and later; graphs is false
	// when the driver lacks any of them) and pinned host memory.
	graphs                      bool
	cuMemAllocHost_v2           func(p *unsafe.Pointer, n uint64) int32
	cuMemFreeHost               func(p unsafe.Pointer) int32
	cuStreamBeginCapture_v2     func(s uintptr, mode int32) int32
	cuStreamEndCapture          func(s uintptr, g *uintptr) int32
	cuGraphInstantiateWithFlags func(x *uintptr, g uintptr, flags uint64) int32
	cuGraphExecUpdate_v2        func(x, g uintptr, info *graphUpdateInfo) int32
	cuGraphLaunch               func(x, s uintptr) int32
	cuGraphDestroy              func(g uintptr) int32
	cuGraphExecDestroy          func(x uintptr) int32

	// Peer copies and cross-stream ordering (p2p is false when the driver
	// lacks any of them).
	p2p                   bool
	cuStreamWaitEvent     func(s, e uintptr, flags uint32) int32
	cuMemcpyPeerAsync     func(dst uint64, dstCtx uintptr, src uint64, srcCtx uintptr, n uint64, s uintptr) int32
	cuDeviceCanAccessPeer func(can *int32, dev, peer int32) int32
	cuCtxEnablePeerAccess func(peer uintptr, flags uint32) int32
}

// graphUpdateInfo is CUgraphExecUpdateResultInfo.
type graphUpdateInfo struct {
	result        int32
	errorNode     uintptr
	errorFromNode uintptr
}

// libraryPath is the driver library to load: $GLMRUN_LIBCUDA or the
// system's (libcuda.so.1, nvcuda.dll on Windows).
func libraryPath() string { return envOr("GLMRUN_LIBCUDA", defaultLibrary) }

// envOr returns the environment variable name, or def where it is unset
// or empty.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// loadDriver opens the driver library and binds every function with
// librarySymbol + RegisterFunc (RegisterLibFunc would panic on a missing symbol).
// Failures wrap ErrNoDriver and list every missing name.
func loadDriver(path string) (*driver, error) {
	lib, err := openNamed(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoDriver, err)
	}
	d := &driver{path: path, lib: lib}
	syms := []symbol{
		{"cuGetErrorName", &d.cuGetErrorName},
		{"cuGetErrorString", &d.cuGetErrorString},
		{"cuInit", &d.cuInit},
		{"cuDriverGetVersion", &d.cuDriverGetVersion},
		{"cuDeviceGetCount", &d.cuDeviceGetCount},
		{"cuDeviceGet", &d.cuDeviceGet},
		{"cuDeviceGetAttribute", &d.cuDeviceGetAttribute},
		{"cuDeviceGetName", &d.cuDeviceGetName},
		{"cuDeviceTotalMem_v2", &d.cuDeviceTotalMem_v2},
		{"cuDevicePrimaryCtxRetain", &d.cuDevicePrimaryCtxRetain},
		{"cuDevicePrimaryCtxRelease_v2", &d.cuDevicePrimaryCtxRelease_v2},
		{"cuCtxSetCurrent", &d.cuCtxSetCurrent},
		{"cuCtxSynchronize", &d.cuCtxSynchronize},
		{"cuStreamCreate", &d.cuStreamCreate},
		{"cuStreamDestroy_v2", &d.cuStreamDestroy_v2},
		{"cuStreamSynchronize", &d.cuStreamSynchronize},
		{"cuEventCreate", &d.cuEventCreate},
		{"cuEventRecord", &d.cuEventRecord},
		{"cuEventSynchronize", &d.cuEventSynchronize},
		{"cuEventElapsedTime", &d.cuEventElapsedTime},
		{"cuEventDestroy_v2", &d.cuEventDestroy_v2},
		{"cuMemGetInfo_v2", &d.cuMemGetInfo_v2},
		{"cuMemAlloc_v2", &d.cuMemAlloc_v2},
		{"cuMemFree_v2", &d.cuMemFree_v2},
		{"cuMemcpyHtoD_v2", &d.cuMemcpyHtoD_v2},
		{"cuMemcpyHtoDAsync_v2", &d.cuMemcpyHtoDAsync_v2},
		{"cuMemcpyDtoH_v2", &d.cuMemcpyDtoH_v2},
		{"cuMemcpyDtoD_v2", &d.cuMemcpyDtoD_v2},
		{"cuModuleLoadDataEx", &d.cuModuleLoadDataEx},
		{"cuModuleUnload", &d.cuModuleUnload},
		{"cuModuleGetFunction", &d.cuModuleGetFunction},
		{"cuLaunchKernel", &d.cuLaunchKernel},
	}
	if missing := bindSymbols(lib, syms); len(missing) > 0 {
		closeLibrary(lib)
		return nil, fmt.Errorf("%w: %s lacks %s", ErrNoDriver, path, strings.Join(missing, ", "))
	}
	// Graphs are optional: a driver without them launches one kernel at
	// a time.
	graphSyms := []symbol{
		{"cuMemAllocHost_v2", &d.cuMemAllocHost_v2},
		{"cuMemFreeHost", &d.cuMemFreeHost},
		{"cuStreamBeginCapture_v2", &d.cuStreamBeginCapture_v2},
		{"cuStreamEndCapture", &d.cuStreamEndCapture},
		{"cuGraphInstantiateWithFlags", &d.cuGraphInstantiateWithFlags},
		{"cuGraphExecUpdate_v2", &d.cuGraphExecUpdate_v2},
		{"cuGraphLaunch", &d.cuGraphLaunch},
		{"cuGraphDestroy", &d.cuGraphDestroy},
		{"cuGraphExecDestroy", &d.cuGraphExecDestroy},
	}
	d.graphs = bindOptional(lib, graphSyms)
	d.p2p = bindOptional(lib, []symbol{
		{"cuStreamWaitEvent", &d.cuStreamWaitEvent},
		{"cuMemcpyPeerAsync", &d.cuMemcpyPeerAsync},
		{"cuDeviceCanAccessPeer", &d.cuDeviceCanAccessPeer},
		{"cuCtxEnablePeerAccess", &d.cuCtxEnablePeerAccess},
	})
	return d, nil
}

// symbol is a library function's name and the Go function variable to
// bind it to.
type symbol struct {
	name string
	fn   any
}

// bindSymbols binds every function of syms that lib has (librarySymbol +
// RegisterFunc: RegisterLibFunc would panic on a missing one) and returns
// the names of those it lacks.
func bindSymbols(lib uintptr, syms []symbol) (missing []string) {
	for _, s := range syms {
		p, err := librarySymbol(lib, s.name)
		if err != nil || p == 0 {
			missing = append(missing, s.name)
			continue
		}
		purego.RegisterFunc(s.fn, p)
	}
	return missing
}

// bindOptional binds the functions of one optional group and reports
// whether the library has them all.
func bindOptional(lib uintptr, syms []symbol) bool { return len(bindSymbols(lib, syms)) == 0 }

// openNamed opens the library at path, its error naming the path.
func openNamed(path string) (uintptr, error) {
	lib, err := openLibrary(path)
	if err != nil {
		msg := err.Error()
		if !strings.Contains(msg, path) {
			msg = path + ": " + msg
		}
		return 0, errors.New(msg)
	}
	return lib, nil
}

// check turns a CUresult into nil or an *Error naming call.
func (d *driver) check(call string, code int32) error {
	if code == 0 {
		return nil
	}
	e := &Error{Call: call, Code: int(code), Name: fmt.Sprintf("CUDA_ERROR_%d", code), Text: "unknown error"}
	var s uintptr
	if d.cuGetErrorName(code, &s) == 0 && s != 0 {
		e.Name = cString(s)
	}
	if d.cuGetErrorString(code, &s) == 0 && s != 0 {
		e.Text = cString(s)
	}
	return e
}

// cString copies the NUL-terminated C string at p.
func cString(p uintptr) string {
	var b []byte
	for i := uintptr(0); i < 4096; i++ {
		c := *(*byte)(unsafe.Add(unsafe.Pointer(nil), p+i)) //nolint:govet // C memory from the driver
		if c == 0 {
			break
		}
		b = append(b, c)
	}
	return string(b)
}

// cBytes returns the NUL-terminated prefix of b as a string.
func cBytes(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
