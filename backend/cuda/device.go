package cuda

import (
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/glmrun/glmrun/backend"
	"github.com/glmrun/glmrun/tensor"
)

// Device is one GPU as a backend.Device. Its methods may be called from
// one goroutine at a time (plus Used and Budget from any); every driver
// call runs on the device's own OS thread.
type Device struct {
	g      *gpu
	index  int
	mod    *module
	sigs   map[string]string
	budget int64
	perGPU int  // logical devices sharing this device's GPU (Open)
	fast   bool // Config.Fast: quantized activations where a kernel has them (mmvq)

	mu   sync.Mutex // guards used and err
	used int64
	err  error // first fault (sticky)

	scratch map[string]*mem
	experts map[*backend.Experts]*expertTab // MoE's weight pointer tables
	closers []func()                        // run first by Close (the collectives' NCCL communicators)
}

// mem is one device allocation.
type mem struct {
	ptr   uint64
	bytes int64
}

// buffer is a view of n values at ptr, float32 or (a KV cache from
// AllocType) stored as t; base is the allocation it came from (nil for a
// view that must not be freed).
type buffer struct {
	d    *Device
	ptr  uint64
	n    int
	t    tensor.Type // F32 (the zero value) or a cache type
	base *mem
}

func (b *buffer) Len() int { return b.n }

// Slice returns a view of values [off, off+n); in a cache type both are
// whole blocks of it.
func (b *buffer) Slice(off, n int) backend.Buffer {
	bs := b.t.BlockSize()
	if off < 0 || n < 0 || off+n > b.n || off%bs != 0 || n%bs != 0 {
		panic(fmt.Sprintf("cuda: buffer slice [%d, %d) of %d values of %s (blocks of %d)", off, off+n, b.n, b.t, bs))
	}
	return &buffer{d: b.d, ptr: b.ptr + uint64(off/bs*b.t.TypeSize()), n: n, t: b.t}
}

// bytes returns the size of the buffer's values in bytes.
func (b *buffer) bytes() int64 {
	size, _ := b.t.RowSize(int64(b.n)) // whole blocks: checked when made
	return size
}

// idBuf is a view of n int32 values.
type idBuf struct {
	d    *Device
	ptr  uint64
	n    int
	base *mem
}

func (b *idBuf) Len() int { return b.n }

func (b *idBuf) Slice(off, n int) backend.IDs {
	if off < 0 || n < 0 || off+n > b.n {
		panic(fmt.Sprintf("cuda: ids slice [%d, %d) of %d values", off, off+n, b.n))
	}
	return &idBuf{d: b.d, ptr: b.ptr + 4*uint64(off), n: n}
}

// weight is a matrix resident on the device in its GGUF type.
type weight struct {
	d        *Device
	name     string
	typ      tensor.Type
	rows     int
	cols     int
	rowBytes int
	scale    float32
	m        *mem
}

func (w *weight) Name() string      { return w.name }
func (w *weight) Type() tensor.Type { return w.typ }
func (w *weight) Rows() int         { return w.rows }
func (w *weight) Cols() int         { return w.cols }
func (w *weight) Bytes() int64      { return w.m.bytes }

// Name returns "cuda:N", or "cuda:N (on GPU G)" for a logical device
// that shares GPU G with others (Open).
func (d *Device) Name() string {
	if d.perGPU > 1 {
		return fmt.Sprintf("cuda:%d (on GPU %d)", d.index, d.g.ordinal)
	}
	return fmt.Sprintf("cuda:%d", d.index)
}

// Budget returns the memory budget in bytes.
func (d *Device) Budget() int64 { return d.budget }

// Used returns the bytes of weights, buffers and scratch space.
func (d *Device) Used() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.used
}

// ComputeCapability returns the device's major and minor compute
// capability.
func (d *Device) ComputeCapability() (major, minor int) { return d.g.major, d.g.minor }

// DeviceName returns the driver's name of the GPU.
func (d *Device) DeviceName() string { return d.g.name }

// fail records the first fault.
func (d *Device) fail(err error) {
	d.mu.Lock()
	if d.err == nil {
		d.err = fmt.Errorf("%s: %w", d.Name(), err)
	}
	d.mu.Unlock()
}

// faulted reports whether a fault was recorded (later work is skipped).
func (d *Device) faulted() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err != nil
}

// allocate reserves n bytes against the budget and allocates them.
func (d *Device) allocate(n int64, what string) (*mem, error) {
	if n <= 0 {
		return &mem{}, nil
	}
	d.mu.Lock()
	if d.budget > 0 && d.used+n > d.budget {
		used := d.used
		d.mu.Unlock()
		return nil, fmt.Errorf("%s: %s: %d bytes do not fit: %d of %d bytes in use", d.Name(), what, n, used, d.budget)
	}
	d.used += n
	d.mu.Unlock()
	p, err := d.g.alloc(n)
	if err != nil {
		d.mu.Lock()
		d.used -= n
		d.mu.Unlock()
		return nil, fmt.Errorf("%s: %s: %w", d.Name(), what, err)
	}
	return &mem{ptr: p, bytes: n}, nil
}

// release frees an allocation.
func (d *Device) release(m *mem) {
	if m == nil || m.bytes == 0 {
		return
	}
	if err := d.g.free(m.ptr); err != nil {
		d.fail(err)
	}
	d.mu.Lock()
	d.used -= m.bytes
	d.mu.Unlock()
	m.bytes, m.ptr = 0, 0
}

// Upload copies m to the device, kept in its GGUF type.
func (d *Device) Upload(m backend.Matrix) (backend.Weight, error) {
	if _, ok := mmTypes[m.Type]; !ok {
		return nil, fmt.Errorf("%s: weight %s: type %v has no CUDA kernel", d.Name(), m.Name, m.Type)
	}
	if len(m.Data) != m.Rows*m.RowBytes || m.Rows <= 0 || m.Cols <= 0 {
		return nil, fmt.Errorf("%s: weight %s: %d bytes for %d rows of %d", d.Name(), m.Name, len(m.Data), m.Rows, m.RowBytes)
	}
	a, err := d.allocate(int64(len(m.Data)), "weight "+m.Name)
	if err != nil {
		return nil, err
	}
	if err := d.g.htod(a.ptr, unsafe.Pointer(unsafe.SliceData(m.Data)), int64(len(m.Data))); err != nil {
		d.release(a)
		return nil, fmt.Errorf("%s: weight %s: %w", d.Name(), m.Name, err)
	}
	return &weight{d: d, name: m.Name, typ: m.Type, rows: m.Rows, cols: m.Cols, rowBytes: m.RowBytes, scale: m.Scale, m: a}, nil
}

// UploadVector copies v to a new buffer.
func (d *Device) UploadVector(name string, v []float32) (backend.Buffer, error) {
	a, err := d.allocate(4*int64(len(v)), "vector "+name)
	if err != nil {
		return nil, err
	}
	b := &buffer{d: d, ptr: a.ptr, n: len(v), base: a}
	if len(v) > 0 {
		if err := d.g.htod(a.ptr, unsafe.Pointer(&v[0]), 4*int64(len(v))); err != nil {
			d.release(a)
			return nil, fmt.Errorf("%s: vector %s: %w", d.Name(), name, err)
		}
	}
	return b, nil
}

// Alloc returns a buffer of n values (contents undefined).
func (d *Device) Alloc(n int) (backend.Buffer, error) {
	if n < 0 {
		return nil, fmt.Errorf("%s: negative buffer size %d", d.Name(), n)
	}
	a, err := d.allocate(4*int64(n), "buffer")
	if err != nil {
		return nil, err
	}
	return &buffer{d: d, ptr: a.ptr, n: n, base: a}, nil
}

// AllocType returns a zeroed buffer of n values stored as t, one of
// backend.CacheTypes() (n a whole number of t's blocks): a KV cache that
// Copy writes from float32 rows and the attention and the indexer read in
// place.
func (d *Device) AllocType(n int, t tensor.Type) (backend.Buffer, error) {
	size, err := backend.CacheBytes(n, t)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.Name(), err)
	}
	a, err := d.allocate(size, "cache")
	if err != nil {
		return nil, err
	}
	if size > 0 {
		d.run("fill_u8", dim3{min(cdiv(int(size), 256), 4096), 1, 1}, dim3{256, 1, 1}, 0, a.ptr, i32(0), uint64(size))
	}
	return &buffer{d: d, ptr: a.ptr, n: n, t: t, base: a}, nil
}

// AllocIDs returns an array of n ids (contents undefined).
func (d *Device) AllocIDs(n int) (backend.IDs, error) {
	if n < 0 {
		return nil, fmt.Errorf("%s: negative ids size %d", d.Name(), n)
	}
	a, err := d.allocate(4*int64(n), "ids")
	if err != nil {
		return nil, err
	}
	return &idBuf{d: d, ptr: a.ptr, n: n, base: a}, nil
}

// Free releases a buffer from Alloc or UploadVector.
func (d *Device) Free(b backend.Buffer) {
	if v := d.buf(b); v.base != nil {
		d.sync()
		d.release(v.base)
	}
}

// FreeIDs releases ids from AllocIDs.
func (d *Device) FreeIDs(b backend.IDs) {
	if v := d.ids(b); v.base != nil {
		d.sync()
		d.release(v.base)
	}
}

// Release frees a weight's device memory; the weight must not be used
// after.
func (d *Device) Release(w backend.Weight) {
	d.sync()
	d.release(d.weight(w).m)
}

// Close releases the scratch space, unloads the module and ends the
// device's thread. Buffers and weights not freed are released with the
// context.
func (d *Device) Close() error {
	err := d.Sync()
	for _, f := range d.closers {
		f()
	}
	d.closers = nil
	for _, m := range d.scratch {
		d.release(m)
	}
	for _, t := range d.experts {
		for _, m := range t.mem {
			if m != nil && m.ptr != 0 {
				d.release(m)
			}
		}
	}
	if d.mod != nil {
		if e := d.g.unload(d.mod); e != nil && err == nil {
			err = e
		}
	}
	d.g.close()
	return err
}

func (d *Device) buf(b backend.Buffer) *buffer {
	v, ok := b.(*buffer)
	if !ok || v.d != d {
		panic(fmt.Sprintf("cuda: buffer %T is not on %s", b, d.Name()))
	}
	return v
}

func (d *Device) ids(b backend.IDs) *idBuf {
	v, ok := b.(*idBuf)
	if !ok || v.d != d {
		panic(fmt.Sprintf("cuda: ids %T are not on %s", b, d.Name()))
	}
	return v
}

func (d *Device) weight(w backend.Weight) *weight {
	v, ok := w.(*weight)
	if !ok || v.d != d {
		panic(fmt.Sprintf("cuda: weight %T is not on %s", w, d.Name()))
	}
	return v
}

// ptr returns the device address of float32 buffer b, or 0 for nil. A
// buffer in a cache type panics: only the operations that take one (see
// cachePtr) may read it, never as float32.
func (d *Device) ptr(b backend.Buffer) uint64 {
	if b == nil {
		return 0
	}
	v := d.buf(b)
	if v.t != tensor.F32 {
		panic(fmt.Sprintf("%s: a %s buffer where float32 values are needed", d.Name(), v.t))
	}
	return v.ptr
}

// cachePtr returns the device address of b and the type code its kernels
// take (tensor.Type's number).
func (d *Device) cachePtr(b backend.Buffer) (uint64, int32) {
	v := d.buf(b)
	return v.ptr, int32(v.t)
}

func (d *Device) idsPtr(b backend.IDs) uint64 {
	if b == nil {
		return 0
	}
	return d.ids(b).ptr
}

// Write copies src to dst (converted as tensor.Quantize does for a cache
// type).
func (d *Device) Write(dst backend.Buffer, src []float32) {
	b := d.buf(dst)
	if len(src) != b.n {
		panic(fmt.Sprintf("%s: Write of %d values to a buffer of %d", d.Name(), len(src), b.n))
	}
	if len(src) == 0 || d.faulted() {
		return
	}
	p, n := unsafe.Pointer(&src[0]), 4*int64(len(src))
	if b.t != tensor.F32 {
		data := make([]byte, b.bytes())
		if err := tensor.Quantize(b.t, src, data); err != nil {
			panic(fmt.Sprintf("%s: Write of %d values to a %s buffer: %v", d.Name(), len(src), b.t, err))
		}
		p, n = unsafe.Pointer(&data[0]), int64(len(data))
	}
	d.g.upload(d, b.ptr, p, n)
}

// writeIDs copies host ids to dst.
func (d *Device) writeIDs(dst *idBuf, src []int32) {
	if len(src) == 0 || d.faulted() {
		return
	}
	d.g.upload(d, dst.ptr, unsafe.Pointer(&src[0]), 4*int64(len(src)))
}

// Read copies src to dst after the work queued before it. After a fault
// dst is filled with NaN (Sync reports the fault).
func (d *Device) Read(dst []float32, src backend.Buffer) {
	b := d.buf(src)
	if len(dst) != b.n {
		panic(fmt.Sprintf("%s: Read of a buffer of %d values into %d", d.Name(), b.n, len(dst)))
	}
	if len(dst) == 0 {
		return
	}
	if !d.faulted() {
		// A launch queued before may have failed meanwhile: the read
		// waits for it, so faulted tells after the read.
		err := d.readValues(dst, b)
		if err == nil && !d.faulted() {
			return
		}
		if err != nil {
			d.fail(err)
		}
	}
	nan := float32(math.NaN())
	for i := range dst {
		dst[i] = nan
	}
}

// readValues copies b's values to dst, widening a cache type's as
// tensor.Dequantize does.
func (d *Device) readValues(dst []float32, b *buffer) error {
	if b.t == tensor.F32 {
		return d.g.dtoh(unsafe.Pointer(&dst[0]), b.ptr, 4*int64(len(dst)))
	}
	data := make([]byte, b.bytes())
	if err := d.g.dtoh(unsafe.Pointer(&data[0]), b.ptr, int64(len(data))); err != nil {
		return err
	}
	return tensor.Dequantize(b.t, data, dst)
}

// ReadIDs copies src to dst (−1 everywhere after a fault).
func (d *Device) ReadIDs(dst []int32, src backend.IDs) {
	b := d.ids(src)
	if len(dst) != b.n {
		panic(fmt.Sprintf("%s: ReadIDs of %d ids into %d", d.Name(), b.n, len(dst)))
	}
	if len(dst) == 0 {
		return
	}
	if !d.faulted() {
		err := d.g.dtoh(unsafe.Pointer(&dst[0]), b.ptr, 4*int64(len(dst)))
		if err == nil && !d.faulted() {
			return
		}
		if err != nil {
			d.fail(err)
		}
	}
	for i := range dst {
		dst[i] = -1
	}
}

// sync waits for the stream, recording a fault.
func (d *Device) sync() {
	if err := d.g.sync(); err != nil {
		d.fail(err)
	}
}

// Sync waits for every queued operation and returns the first fault.
func (d *Device) Sync() error {
	d.sync()
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

// run launches kernel name unless the device has faulted.
func (d *Device) run(name string, grid, block dim3, shared uint32, args ...any) {
	c := d.launchCommand(name, grid, block, shared, args...)
	if d.faulted() {
		return
	}
	d.g.launch(&c)
}

// launchCommand returns the command that launches kernel name, its
// arguments checked against the kernel's signature.
func (d *Device) launchCommand(name string, grid, block dim3, shared uint32, args ...any) command {
	sig, ok := d.sigs[name]
	if !ok {
		panic("cuda: no kernel " + name) // concatenated: name need not escape
	}
	c := command{kind: cmdLaunch, dev: d, f: d.mod.funcs[name], grid: grid, block: block, shared: shared}
	encodeArgs(&c, name, sig, args)
	return c
}

// kernelName returns the name of the kernel whose function is f, for an
// error (a launch command carries the function only).
func (d *Device) kernelName(f uintptr) string {
	for name, g := range d.mod.funcs {
		if g == f {
			return name
		}
	}
	return fmt.Sprintf("kernel %#x", f)
}

// scratchF32 returns the device's scratch buffer called name, of at least
// n values, growing it if needed. Scratch space is reused by later
// operations: it lives only until the next operation that takes the same
// name.
func (d *Device) scratchF32(name string, n int) *buffer {
	m := d.grow(name, 4*int64(n))
	return &buffer{d: d, ptr: m.ptr, n: n}
}

func (d *Device) scratchIDs(name string, n int) *idBuf {
	m := d.grow(name, 4*int64(n))
	return &idBuf{d: d, ptr: m.ptr, n: n}
}

func (d *Device) grow(name string, bytes int64) *mem {
	if d.scratch == nil {
		d.scratch = map[string]*mem{}
	}
	m := d.scratch[name]
	if m != nil && m.bytes >= bytes {
		return m
	}
	if m != nil {
		d.sync()
		d.release(m)
	}
	bytes = max(bytes, 4096)
	if m != nil {
		bytes = max(bytes, 2*m.bytes)
	}
	nm, err := d.allocate(bytes, "scratch "+name)
	if err != nil {
		// Out of memory in the middle of a step: a fault, reported by Sync.
		d.fail(err)
		nm = &mem{}
	}
	d.scratch[name] = nm
	return nm
}

func i32(v int) int32 { return int32(v) }

func cdiv(a, b int) uint32 { return uint32((a + b - 1) / b) }

// elementwise launches a grid-stride kernel over n values.
func (d *Device) elementwise(name string, n int, args ...any) {
	if n == 0 {
		return
	}
	grid, block := elementwiseDims(n)
	d.run(name, grid, block, 0, args...)
}

// elementwiseDims is the launch shape of a grid-stride kernel over n values.
func elementwiseDims(n int) (grid, block dim3) {
	return dim3{min(cdiv(n, 256), 4096), 1, 1}, dim3{256, 1, 1}
}
