package cuda

import (
	"fmt"
	"strings"
)

// nccl holds the bound functions of a loaded NCCL library (libnccl.so.2),
// for collectives within one process: one communicator per device from
// ncclCommInitAll, and each collective issued for every device between
// ncclGroupStart and ncclGroupEnd.
type nccl struct {
	path               string
	lib                uintptr
	ncclGetVersion     func(v *int32) int32
	ncclCommInitAll    func(comms *uintptr, n int32, devs *int32) int32
	ncclCommDestroy    func(c uintptr) int32
	ncclAllReduce      func(send, recv uint64, count uint64, dtype, op int32, comm, stream uintptr) int32
	ncclBroadcast      func(send, recv uint64, count uint64, dtype, root int32, comm, stream uintptr) int32
	ncclGroupStart     func() int32
	ncclGroupEnd       func() int32
	ncclGetErrorString func(code int32) uintptr
}

// NCCL's ncclFloat32 and ncclSum.
const (
	ncclFloat32 = 7
	ncclSum     = 0
)

// ncclPath is the NCCL library to load: $GLMRUN_LIBNCCL or the system's.
func ncclPath() string { return envOr("GLMRUN_LIBNCCL", defaultNCCL) }

// loadNCCL opens the NCCL library and binds the functions it needs.
func loadNCCL(path string) (*nccl, error) {
	lib, err := openNamed(path)
	if err != nil {
		return nil, fmt.Errorf("no NCCL: %v", err)
	}
	n := &nccl{path: path, lib: lib}
	syms := []symbol{
		{"ncclGetVersion", &n.ncclGetVersion},
		{"ncclCommInitAll", &n.ncclCommInitAll},
		{"ncclCommDestroy", &n.ncclCommDestroy},
		{"ncclAllReduce", &n.ncclAllReduce},
		{"ncclBroadcast", &n.ncclBroadcast},
		{"ncclGroupStart", &n.ncclGroupStart},
		{"ncclGroupEnd", &n.ncclGroupEnd},
		{"ncclGetErrorString", &n.ncclGetErrorString},
	}
	if missing := bindSymbols(lib, syms); len(missing) > 0 {
		closeLibrary(lib)
		return nil, fmt.Errorf("no NCCL: %s lacks %s", path, strings.Join(missing, ", "))
	}
	return n, nil
}

// check turns an ncclResult_t into nil or an error naming call.
func (n *nccl) check(call string, code int32) error {
	if code == 0 {
		return nil
	}
	msg := "unknown error"
	if s := n.ncclGetErrorString(code); s != 0 {
		msg = cString(s)
	}
	return fmt.Errorf("%s: %s (%d)", call, msg, code)
}

// ncclComms is one communicator per device of a collective.
type ncclComms struct {
	lib   *nccl
	comms []uintptr
}

// newNCCL makes the communicators of devs, one GPU each (NCCL takes no
// two ranks on one GPU: logical devices cannot use it).
func newNCCL(devs []*Device) (*ncclComms, error) {
	lib, err := loadNCCL(ncclPath())
	if err != nil {
		return nil, err
	}
	ords := make([]int32, len(devs))
	seen := map[int]bool{}
	for i, d := range devs {
		if seen[d.g.ordinal] {
			closeLibrary(lib.lib)
			return nil, fmt.Errorf("NCCL takes one device a GPU: %s shares GPU %d", d.Name(), d.g.ordinal)
		}
		seen[d.g.ordinal] = true
		ords[i] = int32(d.g.ordinal)
	}
	c := &ncclComms{lib: lib, comms: make([]uintptr, len(devs))}
	// NCCL sets the calling thread's device as it goes: call it from
	// device 0's thread and make that thread's context current again.
	g0 := devs[0].g
	err = g0.do(func() error {
		defer g0.drv.cuCtxSetCurrent(g0.ctx)
		return lib.check("ncclCommInitAll", lib.ncclCommInitAll(&c.comms[0], int32(len(devs)), &ords[0]))
	})
	if err != nil {
		closeLibrary(lib.lib)
		return nil, err
	}
	return c, nil
}

// group issues one collective per device (op(i) for device i) as one NCCL
// group from device 0's thread, after every device's queued work has
// reached its stream.
func (c *ncclComms) group(devs []*Device, call string, op func(i int) int32) error {
	for _, d := range devs {
		g := d.g
		// The collective's work will be on the stream: the next read or
		// sync must drain it.
		if err := g.do(func() error { g.queued = true; return nil }); err != nil {
			return err
		}
	}
	g0 := devs[0].g
	return g0.do(func() error {
		defer g0.drv.cuCtxSetCurrent(g0.ctx)
		if err := c.lib.check("ncclGroupStart", c.lib.ncclGroupStart()); err != nil {
			return err
		}
		var first error
		for i := range devs {
			if err := c.lib.check(call, op(i)); err != nil && first == nil {
				first = err
			}
		}
		if err := c.lib.check("ncclGroupEnd", c.lib.ncclGroupEnd()); err != nil && first == nil {
			first = err
		}
		return first
	})
}

// close destroys the communicators.
func (c *ncclComms) close() {
	for _, comm := range c.comms {
		if comm != 0 {
			c.lib.ncclCommDestroy(comm)
		}
	}
}
