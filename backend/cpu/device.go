package cpu

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/glmrun/glmrun/internal/meminfo"
	"github.com/glmrun/glmrun/internal/mmap"

	"github.com/glmrun/glmrun/backend"
	"github.com/glmrun/glmrun/tensor"
)

func init() { backend.Register("cpu", Open) }

// Open returns c.Devices virtual CPU devices, each with its own worker set
// of c.Threads goroutines (0: DefaultThreads), the fast matrix product when
// c.Fast is set (see CPU.MatMul; batch-invariant with c.BatchInvariant, see
// CPU.SetBatchInvariant) and its own memory budget c.Memory (0: none),
// and the collective that joins them. Host memory is device memory:
// uploads keep references and Read/Write are plain copies.
func Open(c backend.Config) ([]backend.Device, backend.Collective, error) {
	if c.Devices < 1 {
		return nil, nil, fmt.Errorf("cpu: %d devices, want at least 1", c.Devices)
	}
	if c.Memory < 0 {
		return nil, nil, fmt.Errorf("cpu: negative memory budget %d", c.Memory)
	}
	devs := make([]backend.Device, c.Devices)
	for i := range devs {
		newDevice := NewDevice
		if c.Fast {
			newDevice = NewFastDevice
		}
		d := newDevice(i, c.Threads, c.Memory)
		d.cpu.SetBatchInvariant(c.BatchInvariant)
		d.cpu.SetRepack(c.Fast && !c.BatchInvariant && !c.NoRepack)
		devs[i] = d
	}
	return devs, &Collective{n: c.Devices}, nil
}

// Device is a virtual CPU device: a worker set and a memory budget.
// Operations run synchronously on the calling goroutine (and the workers
// MatMul starts), so the stream order is the call order. A Device may be
// used by several goroutines at once.
type Device struct {
	index  int
	cpu    *CPU
	budget int64
	scr    sync.Pool // of *scratch, so that sessions may share the device

	mu        sync.Mutex // guards the fields below (Collectives may run beside the owner)
	used      int64
	packed    int64    // bytes of repacked weights (RepackedBytes)
	mapped    [][]byte // memory of repacked copies (packedMemory), released by Close
	arenaFree []byte   // the unused rest of the last chunk in mapped

	arenaChunk int // bytes of a chunk; 0 is packedArenaChunk (tests set less)
}

// NewDevice returns virtual device index with the exact matrix product,
// workers worker goroutines (0: DefaultThreads) and a memory budget in
// bytes (0: unlimited).
func NewDevice(index, workers int, budget int64) *Device {
	return &Device{index: index, cpu: New(workers), budget: budget}
}

// NewFastDevice is NewDevice with the fast matrix product: activations
// quantized as ggml does and integer dot products (see CPU.MatMul). Its
// attention takes the absorbed form in prefill too, so that every
// quantized product sees the activations llama.cpp's does, except for
// prompts of 128+ tokens where the decompressed form is cheaper (see
// attentionForm; never with batch-invariant products).
func NewFastDevice(index, workers int, budget int64) *Device {
	return &Device{index: index, cpu: NewFast(workers), budget: budget}
}

// buf is a CPU Buffer.
type buf []float32

func (b buf) Len() int                        { return len(b) }
func (b buf) Slice(off, n int) backend.Buffer { return b[off : off+n : off+n] }

// ids is a CPU IDs.
type ids []int32

func (b ids) Len() int                     { return len(b) }
func (b ids) Slice(off, n int) backend.IDs { return b[off : off+n : off+n] }

// weight is a CPU Weight: the Matrix itself.
type weight struct{ m backend.Matrix }

func (w *weight) Name() string      { return w.m.Name }
func (w *weight) Type() tensor.Type { return w.m.Type }
func (w *weight) Rows() int         { return w.m.Rows }
func (w *weight) Cols() int         { return w.m.Cols }
func (w *weight) Bytes() int64 {
	if w.m.Packed != nil {
		return int64(len(w.m.Packed))
	}
	return int64(len(w.m.Data))
}

// F32 returns the values of a CPU buffer (nil for nil). It panics if b
// belongs to another backend.
func F32(b backend.Buffer) []float32 {
	if b == nil {
		return nil
	}
	v, ok := b.(buf)
	if !ok {
		panic(fmt.Sprintf("cpu: buffer %T is not a CPU buffer", b))
	}
	return v
}

// Int32 returns the values of CPU IDs (nil for nil).
func Int32(b backend.IDs) []int32 {
	if b == nil {
		return nil
	}
	v, ok := b.(ids)
	if !ok {
		panic(fmt.Sprintf("cpu: ids %T are not CPU ids", b))
	}
	return v
}

// Mat returns the matrix of a CPU weight.
func Mat(w backend.Weight) backend.Matrix {
	v, ok := w.(*weight)
	if !ok {
		panic(fmt.Sprintf("cpu: weight %T is not a CPU weight", w))
	}
	return v.m
}

// Name returns "cpu:N".
func (d *Device) Name() string { return fmt.Sprintf("cpu:%d", d.index) }

// Budget returns the memory budget (0: unlimited).
func (d *Device) Budget() int64 { return d.budget }

// Used returns the bytes of weights and live buffers.
func (d *Device) Used() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.used
}

// RepackedBytes returns the bytes of the weights Upload has repacked
// (CPU.SetRepack): memory the products read instead of the file's pages.
func (d *Device) RepackedBytes() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.packed
}

// CPU returns the device's kernel runner.
func (d *Device) CPU() *CPU { return d.cpu }

// reserve accounts n bytes of what against the budget.
func (d *Device) reserve(n int64, what string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.budget > 0 && d.used+n > d.budget {
		return fmt.Errorf("%s: %s: %d bytes do not fit: %d of %d bytes in use", d.Name(), what, n, d.used, d.budget)
	}
	d.used += n
	return nil
}

func (d *Device) release(n int64) {
	d.mu.Lock()
	d.used -= n
	d.mu.Unlock()
}

// Upload keeps a reference to m (its data is not copied) and counts its
// bytes against the budget. The type must be one tensor.Dequantize
// supports.
func (d *Device) Upload(m backend.Matrix) (backend.Weight, error) {
	check := CheckType
	if d.cpu.fast {
		check = CheckFastType
	}
	if err := check(m); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", d.Name(), m.Name, err)
	}
	if d.cpu.repack && !m.LookupOnly {
		packedSize := tensor.PackedSize
		if m.Head {
			packedSize = tensor.HeadPackedSize
		}
		if size, err := packedSize(m.Type, m.Rows, m.Cols); err == nil {
			// The repacked copy is what the products read: it takes the
			// memory, and the mapped rows stay on disk unless something
			// reads them.
			if err := d.reserve(size, "weight "+m.Name+" (repacked)"); err != nil {
				return nil, err
			}
			dst, err := d.packedMemory(int(size))
			if err == nil {
				m, err = withPacked(m, dst)
			}
			if err != nil {
				d.release(size)
				return nil, fmt.Errorf("%s: %s: %w", d.Name(), m.Name, err)
			}
			d.mu.Lock()
			d.packed += size
			d.mu.Unlock()
			if m.Mapped {
				// The copy is what is read now: the file's pages leave the
				// resident set (a later read, of a neighbour's part of a
				// shared page say, faults them back in).
				_ = mmap.DontNeedWithin(m.Data)
			}
			return &weight{m}, nil
		}
	}
	if err := d.reserve(int64(len(m.Data)), "weight "+m.Name); err != nil {
		return nil, err
	}
	return &weight{m}, nil
}

// withPacked returns m with dst (tensor.PackedSize bytes, from
// packedMemory) holding its repacked copy.
func withPacked(m backend.Matrix, dst []byte) (backend.Matrix, error) {
	m.Packed = dst
	return m, tensor.Repack(m.Type, m.Packed, m.Data, m.Rows, m.Cols)
}

// Repacked copies of packedArenaMinBytes or more come from mapped memory
// the device holds in chunks of packedArenaChunk bytes (a copy larger than
// a quarter of that has a mapping of its own). A model's weights are
// mostly many matrices of a few MB (one per expert): together they fill
// huge pages where each alone would be left in small ones on the Go heap.
// A chunk's pages cost memory only once written, so its unused rest costs
// at most one huge page.
const (
	packedArenaMinBytes = 256 << 10
	packedArenaChunk    = 256 << 20
)

// packedMemory returns n bytes for a repacked copy, starting on a 64-byte
// boundary so that the packed kernels' loads of a group's blocks never
// straddle cache lines. A copy of packedArenaMinBytes or more is mapped
// memory asked for huge pages before its first write (memory from the Go
// heap may come already faulted in small pages), streamed for every token
// with a TLB miss per 2 MB instead of per 4 KB; Close releases it.
func (d *Device) packedMemory(n int) ([]byte, error) {
	if n < packedArenaMinBytes {
		b := make([]byte, n+63)
		off := (64 - int(uintptr(unsafe.Pointer(&b[0]))%64)) % 64
		return b[off : off+n : off+n], nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	chunkBytes := d.arenaChunk
	if chunkBytes == 0 {
		chunkBytes = packedArenaChunk
	}
	if n > chunkBytes/4 {
		b, err := mmap.Anonymous(n)
		if err != nil {
			return nil, err
		}
		d.mapped = append(d.mapped, b)
		return b, nil
	}
	skip := (64 - int(uintptr(unsafe.Pointer(unsafe.SliceData(d.arenaFree)))%64)) % 64
	if len(d.arenaFree) < skip+n {
		chunk, err := mmap.Anonymous(chunkBytes)
		if err != nil {
			return nil, err
		}
		d.mapped = append(d.mapped, chunk)
		d.arenaFree, skip = chunk, 0
	}
	b := d.arenaFree[skip : skip+n : skip+n]
	d.arenaFree = d.arenaFree[skip+n:]
	return b, nil
}

// UploadVector copies v to a new buffer.
func (d *Device) UploadVector(name string, v []float32) (backend.Buffer, error) {
	if err := d.reserve(4*int64(len(v)), "vector "+name); err != nil {
		return nil, err
	}
	return buf(append([]float32(nil), v...)), nil
}

// Alloc returns a new zeroed buffer of n values.
func (d *Device) Alloc(n int) (backend.Buffer, error) {
	if n < 0 {
		return nil, fmt.Errorf("%s: negative buffer size %d", d.Name(), n)
	}
	if err := d.reserveBuffer(4 * int64(n)); err != nil {
		return nil, err
	}
	return make(buf, n), nil
}

// reserveBuffer accounts a buffer of bytes against the budget and, without
// one, refuses a big buffer the system's available memory cannot hold.
func (d *Device) reserveBuffer(bytes int64) error {
	if err := d.reserve(bytes, "buffer"); err != nil {
		return err
	}
	if d.budget == 0 && bytes >= bigAlloc {
		if avail, ok := meminfo.Available(); ok && bytes > avail {
			d.release(bytes)
			return fmt.Errorf("%s: a buffer of %.1f GiB does not fit: the system has %.1f GiB of memory available",
				d.Name(), float64(bytes)/(1<<30), float64(avail)/(1<<30))
		}
	}
	return nil
}

// AllocIDs returns a new zeroed array of n ids.
func (d *Device) AllocIDs(n int) (backend.IDs, error) {
	if n < 0 {
		return nil, fmt.Errorf("%s: negative ids size %d", d.Name(), n)
	}
	if err := d.reserve(4*int64(n), "ids"); err != nil {
		return nil, err
	}
	return make(ids, n), nil
}

// Free releases b's bytes from the budget.
func (d *Device) Free(b backend.Buffer) {
	if c, ok := b.(*cacheBuf); ok {
		d.release(int64(len(c.data)))
		return
	}
	d.release(4 * int64(len(F32(b))))
}

// FreeIDs releases b's bytes from the budget.
func (d *Device) FreeIDs(b backend.IDs) { d.release(4 * int64(len(Int32(b)))) }

// Write copies src to dst, converted to dst's type.
func (d *Device) Write(dst backend.Buffer, src []float32) {
	if len(src) != dst.Len() {
		panic(fmt.Sprintf("%s: Write of %d values to a buffer of %d", d.Name(), len(src), dst.Len()))
	}
	if c, ok := dst.(*cacheBuf); ok {
		writeCache(c, src)
		return
	}
	copy(F32(dst), src)
}

// Read copies src to dst, converted to float32.
func (d *Device) Read(dst []float32, src backend.Buffer) {
	if len(dst) != src.Len() {
		panic(fmt.Sprintf("%s: Read of a buffer of %d values into %d", d.Name(), src.Len(), len(dst)))
	}
	if c, ok := src.(*cacheBuf); ok {
		convertRow(dst, c.t, c.data)
		return
	}
	d.cpu.copy(dst, F32(src))
}

// ReadIDs copies src to dst.
func (d *Device) ReadIDs(dst []int32, src backend.IDs) {
	if copy(dst, Int32(src)) != len(dst) || len(dst) != src.Len() {
		panic(fmt.Sprintf("%s: ReadIDs of %d ids into %d", d.Name(), src.Len(), len(dst)))
	}
}

// Close releases the memory of large repacked weights, forgets the memory
// accounting (the Go heap owns the rest) and stops the workers. Nothing
// the device returned may be used after.
func (d *Device) Close() error {
	d.mu.Lock()
	mapped := d.mapped
	d.used, d.packed, d.mapped, d.arenaFree = 0, 0, nil, nil
	d.mu.Unlock()
	var first error
	for _, b := range mapped {
		if err := mmap.Release(b); err != nil && first == nil {
			first = fmt.Errorf("%s: %w", d.Name(), err)
		}
	}
	d.cpu.close()
	return first
}

// getScratch returns scratch buffers for one fused operation; putScratch
// gives them back.
func (d *Device) getScratch() *scratch {
	if s, ok := d.scr.Get().(*scratch); ok {
		return s
	}
	return new(scratch)
}

func (d *Device) putScratch(s *scratch) { d.scr.Put(s) }

// Sync returns nil: CPU operations finish before they return and their
// only failures are broken invariants, which panic.
func (d *Device) Sync() error { return nil }

// GetRows dequantizes rows ids of w into dst.
func (d *Device) GetRows(dst backend.Buffer, w backend.Weight, rows []int32) {
	m, out := Mat(w), F32(dst)
	for t, r := range rows {
		DequantizeRow(out[t*m.Cols:(t+1)*m.Cols], m, int(r))
	}
}

// MatMul runs CPU.MatMul with the device's workers.
func (d *Device) MatMul(dst, x backend.Buffer, n int, w backend.Weight) {
	d.cpu.MatMul(F32(dst), F32(x), n, Mat(w))
}

// RMSNorm normalizes rows of x into dst.
func (d *Device) RMSNorm(dst, x backend.Buffer, rows, stride int, w backend.Buffer, eps float32) {
	o, in, wv := F32(dst), F32(x), F32(w)
	n := len(wv)
	for r := 0; r < rows; r++ {
		RMSNorm(o[r*stride:r*stride+n], in[r*stride:r*stride+n], wv, eps)
	}
}

// AddRMSNorm adds delta to h and normalizes the sums into dst, row by
// row (each row added, then normalized, while it is in cache).
func (d *Device) AddRMSNorm(dst, h, delta backend.Buffer, rows, stride int, w backend.Buffer, eps float32) {
	o, hv, dv, wv := F32(dst), F32(h), F32(delta), F32(w)
	n := len(wv)
	if rows > 0 && (len(hv) < (rows-1)*stride+n || len(dv) < (rows-1)*stride+n || len(o) < (rows-1)*stride+n) {
		panic(fmt.Sprintf("%s: AddRMSNorm of %d rows of %d (stride %d) over %d, %d and %d values", d.Name(), rows, n, stride, len(hv), len(dv), len(o)))
	}
	for r := 0; r < rows; r++ {
		row := hv[r*stride : r*stride+n]
		Add(row, dv[r*stride:r*stride+n])
		RMSNorm(o[r*stride:r*stride+n], row, wv, eps)
	}
}

// LayerNorm normalizes rows of x into dst.
func (d *Device) LayerNorm(dst, x backend.Buffer, rows, stride int, w, b backend.Buffer, eps float32) {
	o, in, wv, bv := F32(dst), F32(x), F32(w), F32(b)
	n := len(wv)
	for r := 0; r < rows; r++ {
		LayerNorm(o[r*stride:r*stride+n], in[r*stride:r*stride+n], wv, bv, eps)
	}
}

// Rope rotates heads of rows of x.
func (d *Device) Rope(x backend.Buffer, rows, heads, stride, off, pos0 int, r backend.Rope) {
	v := F32(x)
	sc := d.getScratch()
	defer d.putScratch(sc)
	sc.rope = grow(sc.rope, r.Dims)
	tab := sc.rope
	for t := 0; t < rows; t++ {
		RopeTable(tab, &r, pos0+t)
		for h := 0; h < heads; h++ {
			o := (t*heads+h)*stride + off
			RopeNorm(v[o:o+r.Dims], tab)
		}
	}
}

// Add adds x to y.
func (d *Device) Add(y, x backend.Buffer) { Add(F32(y), F32(x)) }

// Scale multiplies x by a.
func (d *Device) Scale(x backend.Buffer, a float32) { Scale(F32(x), a) }

// Copy copies src to dst: float32 to float32, or float32 into a cache
// buffer (converted as tensor.Quantize does).
func (d *Device) Copy(dst, src backend.Buffer) {
	if dst.Len() != src.Len() {
		panic(fmt.Sprintf("%s: Copy of %d values to %d", d.Name(), src.Len(), dst.Len()))
	}
	if c, ok := dst.(*cacheBuf); ok {
		writeCache(c, F32(src))
		return
	}
	copy(F32(dst), F32(src))
}

// SwiGLU writes silu(gate)·up to dst.
func (d *Device) SwiGLU(dst, gate, up backend.Buffer) {
	if d.cpu.fast {
		swigluFast(F32(dst), F32(gate), F32(up))
		return
	}
	SwiGLU(F32(dst), F32(gate), F32(up))
}

// Collective sums and broadcasts over virtual CPU devices, in device
// order.
type Collective struct {
	n int
}

// NewCollective returns the collective of n virtual CPU devices.
func NewCollective(n int) *Collective { return &Collective{n: n} }

// Devices returns the group size.
func (c *Collective) Devices() int { return c.n }

func (c *Collective) check(op string, bufs []backend.Buffer) error {
	if len(bufs) != c.n {
		return fmt.Errorf("cpu: %s over %d buffers, want one per device (%d)", op, len(bufs), c.n)
	}
	for i, b := range bufs {
		if b.Len() != bufs[0].Len() {
			return fmt.Errorf("cpu: %s: buffer %d has %d values, buffer 0 %d", op, i, b.Len(), bufs[0].Len())
		}
	}
	return nil
}

// AllReduce sums the buffers in device order (((b0 + b1) + b2) + …) and
// writes the sum to each.
func (c *Collective) AllReduce(bufs []backend.Buffer) error {
	if err := c.check("AllReduce", bufs); err != nil {
		return err
	}
	if c.n == 1 {
		return nil
	}
	s := append([]float32(nil), F32(bufs[0])...)
	for _, b := range bufs[1:] {
		Add(s, F32(b))
	}
	for _, b := range bufs {
		copy(F32(b), s)
	}
	return nil
}

// Broadcast copies bufs[root] to the others.
func (c *Collective) Broadcast(bufs []backend.Buffer, root int) error {
	if err := c.check("Broadcast", bufs); err != nil {
		return err
	}
	if root < 0 || root >= c.n {
		return fmt.Errorf("cpu: Broadcast root %d outside [0, %d)", root, c.n)
	}
	for i, b := range bufs {
		if i != root {
			copy(F32(b), F32(bufs[root]))
		}
	}
	return nil
}
