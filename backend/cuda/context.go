package cuda

import (
	"fmt"
	"os"
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

	work chan command
	done chan struct{}
	once sync.Once

	// Owned by the worker goroutine.
	ctx    uintptr
	stream uintptr
	event  uintptr                  // recorded on stream by collectives, for other streams to wait on
	queued bool                     // work was queued on stream since it was last drained
	vals   *[maxArgs]uint64         // a launch's argument values, or an upload's bytes (pinned)
	params *[maxArgs]unsafe.Pointer // the addresses of vals (pinned)
	graph  graphState
}

// graphState is how a GPU's thread records the work queued between two
// waits for the stream as a CUDA graph and launches it as one: the
// launches and small uploads from the first after a wait up to the next
// call that is not one (a read, a sync, an allocation, a large upload)
// are captured, then the graph is launched, through the executable graph
// of the previous segment updated with the new arguments where its
// kernels are the same in the same order (a decode step after a decode
// step), else a new one. Small uploads, captured or not, read their
// bytes from pinned staging memory, reused once the stream drains.
type graphState struct {
	on        bool           // capture (the driver has graphs and they are not turned off)
	capturing bool           // the stream is capturing
	exec      uintptr        // the last executable graph, or 0
	staging   unsafe.Pointer // pinned host memory for small uploads (nil: none)
	used      int            // bytes of staging in use
	log       []command      // the segment's commands, to run them one by one if the capture fails
	// The driver's out-parameters of endCapture, kept here so that a
	// step's end allocates nothing.
	graph uintptr
	info  graphUpdateInfo
}

// stagingBytes is the pinned memory for the small uploads between two
// waits for the stream (a decode step uploads its token ids).
const stagingBytes = 64 << 10

// maxArgs is the most arguments a kernel launch carries; an upload of at
// most 8·maxArgs bytes travels in a command too.
const maxArgs = 32

// The kinds of command.
const (
	cmdCall   = iota // run fn; its caller waits for it (gpu.do)
	cmdLaunch        // launch kernel f with args
	cmdUpload        // copy the nbytes at args to device address dst
)

// command is one entry of a GPU's queue, run in order on the GPU's
// thread. Launches and small uploads are queued by value and nobody waits
// for them: issuing one costs a channel send, no allocation and no round
// trip; one that fails records the fault on dev, which its next Sync
// reports (as the driver reports a kernel's fault at the next
// synchronisation).
type command struct {
	kind   int
	fn     func() // cmdCall
	dev    *Device
	f      uintptr
	grid   dim3
	block  dim3
	shared uint32
	nargs  int
	dst    uint64 // cmdUpload
	nbytes int
	args   [maxArgs]uint64
}

// queueDepth is how many commands may wait for the GPU's thread before an
// issuing goroutine blocks.
const queueDepth = 256

// attributes of cuDeviceGetAttribute.
const (
	attrComputeMajor = 75
	attrComputeMinor = 76
)

// newGPU retains the primary context of device ordinal on a new locked
// OS thread and creates the device's stream.
func newGPU(drv *driver, ordinal int) (*gpu, error) {
	g := &gpu{drv: drv, ordinal: ordinal, work: make(chan command, queueDepth), done: make(chan struct{})}
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
		// Non-blocking: the synchronous copies of other devices on
		// the same GPU (reads, after their own stream drained) must not
		// wait for this stream, which may be capturing a graph.
		if err := d.check("cuStreamCreate", d.cuStreamCreate(&g.stream, streamNonBlocking)); err != nil {
			d.cuDevicePrimaryCtxRelease_v2(dev)
			return err
		}
		return nil
	}()
	ready <- err
	if err != nil {
		return
	}
	if d.check("cuEventCreate", d.cuEventCreate(&g.event, eventDisableTiming)) != nil {
		g.event = 0
	}
	// The argument slots are allocated and pinned once: the driver reads
	// them through params during cuLaunchKernel.
	var pin runtime.Pinner
	g.vals, g.params = new([maxArgs]uint64), new([maxArgs]unsafe.Pointer)
	for i := range g.params {
		g.params[i] = unsafe.Pointer(&g.vals[i])
	}
	pin.Pin(g.vals)
	pin.Pin(g.params)
	if d.graphs && d.cuMemAllocHost_v2(&g.graph.staging, stagingBytes) == 0 && graphsWanted() {
		g.graph.on = true
		g.graph.log = make([]command, 0, 256)
	}
	for c := range g.work {
		switch c.kind {
		case cmdCall:
			g.endCapture()
			c.fn()
		default:
			g.queue(&c)
		}
	}
	g.endCapture()
	if g.graph.exec != 0 {
		d.cuGraphExecDestroy(g.graph.exec)
	}
	if g.graph.staging != nil {
		d.cuStreamSynchronize(g.stream)
		d.cuMemFreeHost(g.graph.staging)
	}
	if g.event != 0 {
		d.cuEventDestroy_v2(g.event)
	}
	pin.Unpin()
	d.cuStreamSynchronize(g.stream)
	d.cuStreamDestroy_v2(g.stream)
	d.cuDevicePrimaryCtxRelease_v2(int32(g.ordinal))
	close(g.done)
}

// do runs f on the device's thread and waits for it.
func (g *gpu) do(f func() error) error {
	var err error
	ch := make(chan struct{})
	g.work <- command{kind: cmdCall, fn: func() {
		err = f()
		close(ch)
	}}
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
// on the device's stream after the work before it: from pageable memory
// the driver stages src before it returns, so src may change right after
// (and, as CUDA documents for pageable sources, it waits for the stream's
// earlier work first: large uploads are weights and tables, not part of a
// step; a step's small ones go through upload).
func (g *gpu) htod(dst uint64, src unsafe.Pointer, n int64) error {
	if n == 0 {
		return nil
	}
	return g.do(func() error {
		g.queued = true
		return g.drv.check("cuMemcpyHtoDAsync_v2", g.drv.cuMemcpyHtoDAsync_v2(dst, src, uint64(n), g.stream))
	})
}

// upload queues a copy of the n bytes at src to device address dst on
// behalf of d: copies of at most 8·maxArgs bytes travel in the command
// (the caller may change src at once) and nobody waits for them, a
// failure is d's fault; larger ones go through htod.
func (g *gpu) upload(d *Device, dst uint64, src unsafe.Pointer, n int64) {
	if n == 0 {
		return
	}
	if n > 8*maxArgs {
		if err := g.htod(dst, src, n); err != nil {
			d.fail(err)
		}
		return
	}
	c := command{kind: cmdUpload, dev: d, dst: dst, nbytes: int(n)}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&c.args[0])), n), unsafe.Slice((*byte)(src), n))
	g.work <- c
}

// uploadNow runs an upload command from the pinned staging memory: a
// copy from pinned memory is truly asynchronous (one from pageable memory
// waits for the stream's earlier work), and a captured one reads its
// bytes when the graph runs. Each upload takes a fresh slot until the
// stream drains. Without staging memory (a driver without it) the copy
// comes from the argument slots, pageable memory that the driver stages
// before it returns.
func (g *gpu) uploadNow(c *command) {
	src := unsafe.Pointer(g.vals)
	if g.graph.staging != nil {
		src = unsafe.Add(g.graph.staging, g.graph.used)
		copy(unsafe.Slice((*byte)(src), c.nbytes), unsafe.Slice((*byte)(unsafe.Pointer(&c.args[0])), c.nbytes))
		g.graph.used += (c.nbytes + 15) &^ 15
	} else {
		*g.vals = c.args
	}
	g.queued = true
	code := g.drv.cuMemcpyHtoDAsync_v2(c.dst, src, uint64(c.nbytes), g.stream)
	if err := g.drv.check("cuMemcpyHtoDAsync_v2", code); err != nil {
		c.dev.fail(err)
	}
}

// queue runs a launch or upload command: captured into the segment's
// graph where graphs are on, else at once.
func (g *gpu) queue(c *command) {
	gs := &g.graph
	if gs.staging != nil && c.kind == cmdUpload && gs.used+c.nbytes+16 > stagingBytes {
		// The staging memory is full: the copies (and graphs) that read
		// it must run before it is reused.
		g.endCapture()
		if err := g.drain(); err != nil {
			c.dev.fail(err)
		}
	}
	if gs.on && !gs.capturing {
		if code := g.drv.cuStreamBeginCapture_v2(g.stream, captureRelaxed); code != 0 {
			gs.on = false // this driver will not capture: launch one by one
		} else {
			gs.capturing = true
			gs.log = gs.log[:0]
		}
	}
	if gs.capturing {
		gs.log = append(gs.log, *c)
	}
	g.run(c)
}

// run launches or uploads c on the stream (captured or not).
func (g *gpu) run(c *command) {
	if c.kind == cmdUpload {
		g.uploadNow(c)
	} else {
		g.launchNow(c)
	}
}

// eventDisableTiming is CU_EVENT_DISABLE_TIMING: an event only for
// ordering.
const eventDisableTiming = 2

// streamNonBlocking is CU_STREAM_NON_BLOCKING.
const streamNonBlocking = 1

// captureRelaxed is CU_STREAM_CAPTURE_MODE_RELAXED: the GPU's thread may
// still allocate while its stream captures.
const captureRelaxed = 2

// endCapture ends the segment being captured, if any, and launches its
// graph. If the capture or the graph fails, graphs are turned off for
// the GPU and the segment's commands run one by one instead, so that no
// queued work is lost.
func (g *gpu) endCapture() {
	gs := &g.graph
	if !gs.capturing {
		return
	}
	gs.capturing = false
	d := g.drv
	gs.graph = 0
	if code := d.cuStreamEndCapture(g.stream, &gs.graph); code != 0 || gs.graph == 0 {
		g.uncaptured()
		return
	}
	graph := gs.graph
	defer d.cuGraphDestroy(graph)
	if gs.exec != 0 {
		if d.cuGraphExecUpdate_v2(gs.exec, graph, &gs.info) != 0 {
			d.cuGraphExecDestroy(gs.exec)
			gs.exec = 0
		}
	}
	if gs.exec == 0 {
		if d.cuGraphInstantiateWithFlags(&gs.exec, graph, 0) != 0 {
			gs.exec = 0
			g.uncaptured()
			return
		}
	}
	g.queued = true
	if err := d.check("cuGraphLaunch", d.cuGraphLaunch(gs.exec, g.stream)); err != nil && len(gs.log) > 0 {
		gs.log[0].dev.fail(err)
	}
	gs.log = gs.log[:0]
}

// uncaptured turns graphs off and runs the failed segment's commands one
// by one.
func (g *gpu) uncaptured() {
	gs := &g.graph
	gs.on = false
	for i := range gs.log {
		g.run(&gs.log[i])
	}
	gs.log = gs.log[:0]
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
	err := g.drv.check("cuStreamSynchronize", g.drv.cuStreamSynchronize(g.stream))
	g.graph.used = 0 // the graphs that read the staging memory have run
	return err
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

// launch queues a launch command (kind cmdLaunch, its arguments in args,
// one 8-byte slot each) on the device's stream. It returns when the
// command is queued; a failure is c.dev's fault.
func (g *gpu) launch(c *command) {
	g.work <- *c
}

// launchNow runs a launch command on the GPU's thread.
func (g *gpu) launchNow(c *command) {
	copy(g.vals[:c.nargs], c.args[:c.nargs])
	g.queued = true
	code := g.drv.cuLaunchKernel(c.f, c.grid[0], c.grid[1], c.grid[2], c.block[0], c.block[1], c.block[2], c.shared, g.stream,
		unsafe.Pointer(g.params), nil)
	if err := g.drv.check("cuLaunchKernel", code); err != nil {
		c.dev.fail(fmt.Errorf("%s grid %v block %v: %w", c.dev.kernelName(c.f), c.grid, c.block, err))
	}
}

// graphsWanted reports whether CUDA graphs are wanted: unless
// GLMRUN_CUDA_GRAPHS=0.
func graphsWanted() bool { return os.Getenv("GLMRUN_CUDA_GRAPHS") != "0" }
