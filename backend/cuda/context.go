package cuda

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

// gpu is one device's context: a goroutine locked to an OS thread on
// which the device's primary context is current runs every driver call
// for the device, in the order they are submitted.
type gpu struct {
	drv     *driver
	ordinal int
	name    string
	major   int // compute capability
	minor   int
	total   uint64 // device memory in bytes

	work chan func()
	done chan struct{}
	once sync.Once

	// Owned by the worker goroutine.
	ctx    uintptr
	stream uintptr
	queued bool // work was queued on stream since it was last drained
}

// attributes of cuDeviceGetAttribute.
const (
	attrComputeMajor = 75
	attrComputeMinor = 76
)

// newGPU retains the primary context of device ordinal on a new locked
// OS thread and creates the device's stream.
func newGPU(drv *driver, ordinal int) (*gpu, error) {
	g := &gpu{drv: drv, ordinal: ordinal, work: make(chan func()), done: make(chan struct{})}
	ready := make(chan error)
	go g.loop(ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	return g, nil
}

func (g *gpu) loop(ready chan<- error) {
	runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
	d := g.drv
	err := func() error {
		var dev int32
		if err := d.check("cuDeviceGet", d.cuDeviceGet(&dev, int32(g.ordinal))); err != nil {
			return err
		}
		var major, minor int32
		if err := d.check("cuDeviceGetAttribute", d.cuDeviceGetAttribute(&major, attrComputeMajor, dev)); err != nil {
			return err
		}
		if err := d.check("cuDeviceGetAttribute", d.cuDeviceGetAttribute(&minor, attrComputeMinor, dev)); err != nil {
			return err
		}
		g.major, g.minor = int(major), int(minor)
		name := make([]byte, 256)
		if err := d.check("cuDeviceGetName", d.cuDeviceGetName(&name[0], int32(len(name)), dev)); err != nil {
			return err
		}
		g.name = cBytes(name)
		if err := d.check("cuDeviceTotalMem_v2", d.cuDeviceTotalMem_v2(&g.total, dev)); err != nil {
			return err
		}
		if err := d.check("cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain(&g.ctx, dev)); err != nil {
			return err
		}
		if err := d.check("cuCtxSetCurrent", d.cuCtxSetCurrent(g.ctx)); err != nil {
			d.cuDevicePrimaryCtxRelease_v2(dev)
			return err
		}
		if err := d.check("cuStreamCreate", d.cuStreamCreate(&g.stream, 0)); err != nil {
			d.cuDevicePrimaryCtxRelease_v2(dev)
			return err
		}
		return nil
	}()
	ready <- err
	if err != nil {
		return
	}
	for f := range g.work {
		f()
	}
	d.cuStreamSynchronize(g.stream)
	d.cuStreamDestroy_v2(g.stream)
	d.cuDevicePrimaryCtxRelease_v2(int32(g.ordinal))
	close(g.done)
}

// do runs f on the device's thread and waits for it.
func (g *gpu) do(f func() error) error {
	var err error
	ch := make(chan struct{})
	g.work <- func() {
		err = f()
		close(ch)
	}
	<-ch
	return err
}

// close releases the stream and the context and ends the thread.
func (g *gpu) close() {
	g.once.Do(func() {
		close(g.work)
		<-g.done
	})
}

// alloc returns n bytes of device memory.
func (g *gpu) alloc(n int64) (uint64, error) {
	var p uint64
	err := g.do(func() error { return g.drv.check("cuMemAlloc_v2", g.drv.cuMemAlloc_v2(&p, uint64(n))) })
	return p, err
}

// free releases device memory from alloc.
func (g *gpu) free(p uint64) error {
	return g.do(func() error { return g.drv.check("cuMemFree_v2", g.drv.cuMemFree_v2(p)) })
}

// memInfo returns the free and total device memory.
func (g *gpu) memInfo() (free, total uint64, err error) {
	err = g.do(func() error { return g.drv.check("cuMemGetInfo_v2", g.drv.cuMemGetInfo_v2(&free, &total)) })
	return
}

// htod copies n bytes from host memory src to device address dst, queued
// on the device's stream after the work before it, without draining the
// stream: from pageable memory the driver stages src before it returns,
// so src may change right after.
func (g *gpu) htod(dst uint64, src unsafe.Pointer, n int64) error {
	if n == 0 {
		return nil
	}
	return g.do(func() error {
		g.queued = true
		return g.drv.check("cuMemcpyHtoDAsync_v2", g.drv.cuMemcpyHtoDAsync_v2(dst, src, uint64(n), g.stream))
	})
}

// dtoh copies n bytes from device address src to host memory dst after
// the work queued before it.
func (g *gpu) dtoh(dst unsafe.Pointer, src uint64, n int64) error {
	if n == 0 {
		return nil
	}
	return g.do(func() error {
		if err := g.drain(); err != nil {
			return err
		}
		return g.drv.check("cuMemcpyDtoH_v2", g.drv.cuMemcpyDtoH_v2(dst, src, uint64(n)))
	})
}

// sync waits for the stream.
func (g *gpu) sync() error {
	return g.do(g.drain)
}

// drain waits for the work queued on the stream, if any was queued since
// the last drain (on the worker goroutine): a decode step's final read
// drains the stream once, and the Sync after it costs no second wait.
func (g *gpu) drain() error {
	if !g.queued {
		return nil
	}
	g.queued = false
	return g.drv.check("cuStreamSynchronize", g.drv.cuStreamSynchronize(g.stream))
}

// JIT options of cuModuleLoadDataEx.
const (
	jitInfoLogBuffer      = 3
	jitInfoLogBufferSize  = 4
	jitErrorLogBuffer     = 5
	jitErrorLogBufferSize = 6
)

// module is a loaded PTX module and its functions by name.
type module struct {
	handle uintptr
	funcs  map[string]uintptr
	// InfoLog is the JIT's information log.
	infoLog string
}

// loadModule JIT-compiles ptx (NUL-terminated by loadModule) and looks up
// the functions names. A failed compilation returns an *Error whose Log
// holds the JIT error log.
func (g *gpu) loadModule(ptx []byte, names []string) (*module, error) {
	m := &module{funcs: make(map[string]uintptr, len(names))}
	err := g.do(func() error {
		img := make([]byte, len(ptx)+1)
		copy(img, ptx)
		infoLog := make([]byte, 1<<14)
		errLog := make([]byte, 1<<14)
		opts := []int32{jitInfoLogBuffer, jitInfoLogBufferSize, jitErrorLogBuffer, jitErrorLogBufferSize}
		vals := []uintptr{
			uintptr(unsafe.Pointer(&infoLog[0])), uintptr(len(infoLog)),
			uintptr(unsafe.Pointer(&errLog[0])), uintptr(len(errLog)),
		}
		var p runtime.Pinner
		defer p.Unpin()
		p.Pin(&img[0])
		p.Pin(&infoLog[0])
		p.Pin(&errLog[0])
		code := g.drv.cuModuleLoadDataEx(&m.handle, unsafe.Pointer(&img[0]), uint32(len(opts)), &opts[0], &vals[0])
		m.infoLog = cBytes(infoLog)
		if err := g.drv.check("cuModuleLoadDataEx", code); err != nil {
			err.(*Error).Log = cBytes(errLog)
			return err
		}
		for _, name := range names {
			cname := append([]byte(name), 0)
			var f uintptr
			if err := g.drv.check("cuModuleGetFunction", g.drv.cuModuleGetFunction(&f, m.handle, &cname[0])); err != nil {
				g.drv.cuModuleUnload(m.handle)
				return fmt.Errorf("kernel %s: %w", name, err)
			}
			m.funcs[name] = f
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// unload releases a module.
func (g *gpu) unload(m *module) error {
	return g.do(func() error { return g.drv.check("cuModuleUnload", g.drv.cuModuleUnload(m.handle)) })
}

// dim3 is a grid or block size.
type dim3 [3]uint32

// launch queues kernel f on the device's stream with the given
// arguments, each a uint64 (device pointer), int32 or float32; their
// addresses are pinned for the call.
func (g *gpu) launch(name string, f uintptr, grid, block dim3, shared uint32, args []any) error {
	return g.do(func() error {
		vals := make([]uint64, len(args)) // one 8-byte slot per argument
		params := make([]unsafe.Pointer, len(args))
		var p runtime.Pinner
		defer p.Unpin()
		p.Pin(&vals[0])
		for i, a := range args {
			switch v := a.(type) {
			case uint64:
				vals[i] = v
			case int32:
				*(*int32)(unsafe.Pointer(&vals[i])) = v
			case float32:
				*(*float32)(unsafe.Pointer(&vals[i])) = v
			default:
				panic(fmt.Sprintf("cuda: %s: argument %d has type %T", name, i, a))
			}
			params[i] = unsafe.Pointer(&vals[i])
		}
		p.Pin(&params[0])
		g.queued = true
		code := g.drv.cuLaunchKernel(f, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared, g.stream,
			unsafe.Pointer(&params[0]), nil)
		if err := g.drv.check("cuLaunchKernel", code); err != nil {
			return fmt.Errorf("%s grid %v block %v: %w", name, grid, block, err)
		}
		return nil
	})
}
