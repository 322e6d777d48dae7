package cpu

import (
	"fmt"
	"sync"

	"github.com/glmrun/glmrun/backend"
	"github.com/glmrun/glmrun/tensor"
)

// CPU runs the parallel kernels on a persistent pool of worker goroutines
// (the caller and workers−1 helpers). It has two matrix products: the
// exact one (float32 activations, each weight row dequantized and dotted
// with every activation row) and, when made with NewFast, the fast one
// (activations quantized like ggml's, integer dot products on the
// quantized weight blocks; see MatMul). A CPU may be shared by several
// goroutines: its operations run one at a time.
type CPU struct {
	workers int
	fast    bool
	pool    *pool
	mu      sync.Mutex // serializes MatMul (act and the task below)
	act     []byte     // the quantized activations of one MatMul
	mt      matTask
	at      attnTask
	bat     batchAttnTask
	it      indexTask
	moe     moeScratch
	qt      quantTask
	ct      copyTask
	ws      []workerScratch // per worker; used only inside pool tasks
	hook    ActivationHook
	// invariant makes the fast products batch-invariant (SetBatchInvariant).
	invariant bool
	// form, when set, is the form every causal prefill's attention takes
	// where both can (prefillForm).
	form attentionForm
	// repack makes uploads repack their weights (SetRepack).
	repack bool
}

// ActivationHook is called by the fast products after each activation row
// is quantized, with the row's float32 values x and its quantized blocks q
// (of type t, the weight type's VecDotType); it may change q. It exists for
// numerical debugging, e.g. to study roundings that fall within float
// noise of a tie. Workers call it concurrently, and rows arrive in no
// particular order.
type ActivationHook func(t tensor.Type, x []float32, q []byte)

// SetActivationHook installs h on the CPU's fast products (nil removes
// it). Call it while no product runs.
func (c *CPU) SetActivationHook(h ActivationHook) { c.hook = h }

// SetBatchInvariant chooses the fast products' tiles. By default they take
// the fastest (tensor.BatchGemmKernel): each output is the single-token
// product's within float rounding, and a row's result can depend on how
// many rows a product has, as a prompt's tokens or a batched decode step's
// sequences. Batch-invariant (on), every row gets the single-token
// product's result bit for bit (tensor.GemmKernel), so prefill computes
// what decoding token by token does and a batched step what decoding the
// sequences one by one does; products of sixteen or more rows of AVX-512
// Q4_K and Q6_K weights then give up the faster tiles that add in another
// order. Call it while no product runs.
func (c *CPU) SetBatchInvariant(on bool) { c.invariant = on }

// SetRepack chooses whether the devices of c rewrite the weights they are
// given into tensor.Repack's layout when they are uploaded
// (backend.Config.NoRepack), for the fast products that read it. It
// applies to later uploads; a batch-invariant CPU uses the rows' own
// layout whatever it holds.
func (c *CPU) SetRepack(on bool) { c.repack = on }

// BatchInvariant reports whether the fast products are batch-invariant.
func (c *CPU) BatchInvariant() bool { return c.invariant }

// workerScratch holds one worker's buffers, grown on demand.
type workerScratch struct {
	row                                 []float32 // a dequantized weight row (exact path)
	act                                 []byte    // quantized activations (serial products)
	qh, qabs, oabs, vals, scores, probs []float32 // attention
	qblk                                []float32
	scores4                             *[keyTile][4]float32
	order                               []int32   // topK's keys (indexer)
	ml                                  []float32 // attendHeads' running maxima and sums
	tile                                []float32 // converted cache rows (rows.tile)
	wt, keys                            []float32 // a decompressed prefill's W_UK_h and key rows
}

// tileRows returns the worker's buffer for a tile of keyTile rows of r
// converted to float32 (nil for float32 rows, which need none).
func (ws *workerScratch) tileRows(r rows) []float32 {
	if !r.typed {
		return nil
	}
	ws.tile = grow(ws.tile, keyTile*r.w)
	return ws.tile
}

// New returns a CPU with the exact matrix product and workers workers;
// workers <= 0 means DefaultThreads().
func New(workers int) *CPU { return newCPU(workers, false) }

// NewFast returns a CPU with the fast matrix product (see MatMul) and
// workers workers; workers <= 0 means DefaultThreads().
func NewFast(workers int) *CPU { return newCPU(workers, true) }

func newCPU(workers int, fast bool) *CPU {
	if workers <= 0 {
		workers = DefaultThreads()
	}
	c := &CPU{workers: workers, fast: fast, pool: newPool(workers), ws: make([]workerScratch, workers)}
	stopWith(c, c.pool)
	return c
}

// Workers returns the number of workers.
func (c *CPU) Workers() int { return c.workers }

// Fast reports whether MatMul quantizes activations.
func (c *CPU) Fast() bool { return c.fast }

// close stops the helper goroutines; the CPU must not be used after.
func (c *CPU) close() { c.pool.stop() }

// serialWork is the number of multiply-adds below which the exact MatMul
// stays on one worker.
const serialWork = 1 << 16

// MatMul computes dst[t, r] = Σ_i w[r, i] · x[t, i] (times w.Scale when
// that is non-zero) for n activation rows:
// x is [n, w.Cols] and dst is [n, w.Rows], both row-major.
//
// The exact product dequantizes each weight row once and dots it with all
// n activation rows in float32. The fast product quantizes each activation
// row once to the weight type's VecDotType (tensor.Type.VecDotType, ggml's
// pairing: Q8_0, Q8_1 or Q8_K blocks, float32 for F32/F16/BF16 weights)
// and multiplies it with the weight rows in place with tensor's integer
// kernels (tensor.BatchGemmKernel, or tensor.GemmKernel when the CPU is
// batch-invariant), never converting weights. Both split the output rows
// into blocks that the workers take in turn; no result depends on the
// split, and with SetBatchInvariant none depends on n either (every output
// is then what tensor.DotKernel gives for its row and token; otherwise it
// is within float rounding of that).
//
// The weight's type must be one the product supports (CheckType); models
// check that when they load, so a failure here is a broken invariant and
// panics.
func (c *CPU) MatMul(dst, x []float32, n int, w backend.Matrix) {
	if len(x) < n*w.Cols || len(dst) < n*w.Rows {
		panic(fmt.Sprintf("cpu: MatMul %s: x has %d values, dst %d; want %d x %d and %d x %d",
			w.Name, len(x), len(dst), n, w.Cols, n, w.Rows))
	}
	if n <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &c.mt
	*t = matTask{c: c, w: w, dst: dst, x: x, n: n}
	if !c.fast {
		t.rowsPer = w.Rows
		if work := w.Rows * w.Cols * n; work >= serialWork && c.workers > 1 {
			t.rowsPer = (w.Rows + c.workers - 1) / c.workers
		}
		c.pool.do(t, (w.Rows+t.rowsPer-1)/t.rowsPer)
		*t = matTask{}
		return
	}
	k := kernelOf(w.Type, c.invariant)
	if k == nil {
		panic(fmt.Sprintf("cpu: MatMul %s: no fast kernel for %s", w.Name, w.Type))
	}
	t.k = k
	t.act, t.lda = c.quantize(x, n, w.Cols, k.act)
	t.rowsPer = fastRowsPer(w.Rows, w.RowBytes, n, c.workers)
	c.pool.do(t, (w.Rows+t.rowsPer-1)/t.rowsPer)
	*t = matTask{}
}

// fastRowsPer returns the rows of one chunk of a fast product of rows
// rows of rb bytes: small enough that every worker gets several chunks
// (the workers balance themselves), large enough that a chunk amortizes
// taking it. A single token streams the weights from memory at a rate
// that varies between the workers (the other's share of the memory
// bandwidth, other processes), so its chunks are cut by bytes, about
// decodeChunkBytes each: a worker that is done waits at most that long
// for the other.
func fastRowsPer(rows, rb, n, workers int) int {
	if workers == 1 {
		return rows
	}
	per := (rows + 4*workers - 1) / (4 * workers)
	switch {
	case n == 1:
		per = min(per, max(1, decodeChunkBytes/max(rb, 1)))
	case n <= batchTokens:
		per = min(per, max(1, batchChunkBytes/max(rb, 1)))
	}
	per = max(per, 16)
	return (per + 15) &^ 15
}

// decodeChunkBytes is the size of the weight rows of one chunk of a
// single-token product: 2 MB, a huge page of a repacked copy. A product
// that reads from memory is only as fast as the hardware prefetchers'
// streams, and every chunk a worker takes from the counter starts a new
// stream somewhere else; large matrices still split into many more chunks
// than workers, so a worker slowed by something else holds up the others
// by one chunk at most.
const decodeChunkBytes = 2 << 20

// A product of a few tokens (a batched decode step: up to batchTokens
// sequences) is compute-bound on large matrices, where four chunks per
// worker would be long enough for a worker slowed by anything else to
// leave the others waiting at the end; its chunks hold about
// batchChunkBytes of weight rows.
const (
	batchTokens     = 32
	batchChunkBytes = 1 << 20
)

// quantize converts n rows of cols values of x to type t (the activation
// type of a fast product) in c.act, using the workers for many rows, and
// returns the rows and their stride in bytes. Float32 activations are
// returned in place.
func (c *CPU) quantize(x []float32, n, cols int, t tensor.Type) ([]byte, int) {
	if t == tensor.F32 {
		return tensor.F32Bytes(x[:n*cols]), 4 * cols
	}
	rb := rowSize(t, cols)
	if cap(c.act) < n*rb {
		c.act = make([]byte, n*rb)
	}
	c.act = c.act[:n*rb]
	c.quantizeTo(c.act, x, n, cols, rb, t)
	return c.act, rb
}

// quantizeTo converts n rows of cols values of x to t in dst, rb bytes a
// row, on the workers when there are many rows (a few, as in decode, take
// less than waking the workers).
func (c *CPU) quantizeTo(dst []byte, x []float32, n, cols, rb int, t tensor.Type) {
	q := &c.qt
	*q = quantTask{hook: c.hook, t: t, x: x, dst: dst, cols: cols, rb: rb, per: n}
	if n >= 8 && c.workers > 1 {
		q.per = (n + c.workers - 1) / c.workers
	}
	c.pool.do(q, (n+q.per-1)/q.per)
	*q = quantTask{}
}

// copy copies src to dst (of equal lengths), on all the workers when it
// is large: the logits of a batched decode step (16 rows of a 151k
// vocabulary: 9.7 MB) are read into memory the caller has just allocated,
// whose first touch of every page is a page fault (dear on a virtual
// machine), too much for the caller to take alone while the helpers
// wait.
func (c *CPU) copy(dst, src []float32) {
	if len(dst) < parallelCopy || c.workers == 1 {
		copy(dst, src)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &c.ct
	*t = copyTask{dst: dst, src: src}
	c.pool.do(t, (len(dst)+copyChunk-1)/copyChunk)
	*t = copyTask{}
}

// parallelCopy is the number of values from which copy splits the work
// (4 MB: the logits of one token, 0.6 MB on the bench shape, stay on the
// caller), copyChunk the values of one chunk (256 KB).
const (
	parallelCopy = 1 << 20
	copyChunk    = 1 << 16
)

// copyTask is copy on the workers: chunk i is values [i·copyChunk, …).
type copyTask struct{ dst, src []float32 }

func (t *copyTask) run(_, i int) {
	lo := i * copyChunk
	hi := min(lo+copyChunk, len(t.dst))
	copy(t.dst[lo:hi], t.src[lo:hi])
}

// rowSize returns the bytes of cols values of t (a checked shape).
func rowSize(t tensor.Type, cols int) int {
	rb, err := t.RowSize(int64(cols))
	if err != nil {
		panic(fmt.Sprintf("cpu: %v", err))
	}
	return int(rb)
}

// quantizeRows writes rows [lo, hi) of x to dst as t, rb bytes a row,
// with ggml's reference quantizers (tensor.QuantizeActivations: the bytes
// of tensor.Quantize, with vector kernels for Q8_0 and Q8_K). (ggml's AVX2 Q8_0
// quantizer multiplies by 127/amax and rounds ties to even; the
// glm5-dense references match the reference quantizer, not that one.)
func quantizeRows(t tensor.Type, dst []byte, x []float32, cols, rb, lo, hi int, hook ActivationHook) {
	for r := lo; r < hi; r++ {
		if err := tensor.QuantizeActivations(t, x[r*cols:(r+1)*cols], dst[r*rb:(r+1)*rb]); err != nil {
			panic(fmt.Sprintf("cpu: quantize activations: %v", err))
		}
		if hook != nil {
			hook(t, x[r*cols:(r+1)*cols], dst[r*rb:(r+1)*rb])
		}
	}
}

// quantTask quantizes activation rows, per rows a chunk.
type quantTask struct {
	hook          ActivationHook
	t             tensor.Type
	x             []float32
	dst           []byte
	cols, rb, per int
}

func (q *quantTask) run(_, i int) {
	lo := i * q.per
	hi := min(lo+q.per, len(q.dst)/q.rb)
	quantizeRows(q.t, q.dst, q.x, q.cols, q.rb, lo, hi, q.hook)
}

// matTask is one MatMul: chunk i is output rows [i·rowsPer, …).
type matTask struct {
	c       *CPU
	w       backend.Matrix
	dst, x  []float32
	n       int
	rowsPer int
	// fast product
	k   *kernel
	act []byte
	lda int
}

func (t *matTask) run(wk, i int) {
	lo := i * t.rowsPer
	hi := min(lo+t.rowsPer, t.w.Rows)
	if t.k == nil {
		ws := &t.c.ws[wk]
		ws.row = grow(ws.row, t.w.Cols)
		matMulRows(t.dst, t.x, t.n, t.w, lo, hi, ws.row)
		return
	}
	gemmRows(t.k, t.dst, t.act, t.lda, t.n, t.w, lo, hi)
}

// gemmRows computes output rows [lo, hi) of a fast product of the
// quantized activations act (n rows lda bytes apart).
func gemmRows(k *kernel, dst []float32, act []byte, lda, n int, w backend.Matrix, lo, hi int) {
	rb := w.RowBytes
	if p := w.PackedRows(lo, hi); p != nil && k.packed != nil {
		k.packed(p, act, lda, dst[lo:], w.Rows, hi-lo, n, w.Cols)
	} else if n == 1 && !k.streams {
		// One token reads each weight byte once, from memory: fetch the
		// next rows while this block computes, so that the kernel's work
		// and the memory transfer overlap. (Kernels that prefetch as they
		// go do better alone: these bursts stall on the line fill buffers
		// and leave them idle while the block computes.)
		step := max(1, prefetchBytes/rb)
		for r := lo; r < hi; r += step {
			e := min(r+step, hi)
			prefetch(w.Data[e*rb : min(e+step, hi)*rb])
			k.gemm(w.Data[r*rb:], rb, act, lda, dst[r:], w.Rows, e-r, 1, w.Cols)
		}
	} else {
		k.gemm(w.Data[lo*rb:], rb, act, lda, dst[lo:], w.Rows, hi-lo, n, w.Cols)
	}
	if w.Scale != 0 {
		for j := 0; j < n; j++ {
			Scale(dst[j*w.Rows+lo:j*w.Rows+hi], w.Scale)
		}
	}
}

// prefetchBytes is how far ahead of a single-token product whose kernel
// does not prefetch (float weights, the pure-Go twins) weights are
// prefetched, a block at a time. The quantized assembly kernels prefetch
// every line as they go (tensor.DotPrefetches), which streams from DRAM
// better than these bursts do.
const prefetchBytes = 8 << 10

// matMulSerial is MatMul on the calling worker alone, with ws's buffers:
// the products inside a parallel task (attention heads).
func (c *CPU) matMulSerial(ws *workerScratch, dst, x []float32, n int, w backend.Matrix) {
	if !c.fast {
		ws.row = grow(ws.row, w.Cols)
		matMulRows(dst, x, n, w, 0, w.Rows, ws.row)
		return
	}
	k := kernelOf(w.Type, c.invariant)
	if k == nil {
		panic(fmt.Sprintf("cpu: MatMul %s: no fast kernel for %s", w.Name, w.Type))
	}
	act, lda := tensor.F32Bytes(x[:n*w.Cols]), 4*w.Cols
	if k.act != tensor.F32 {
		lda = rowSize(k.act, w.Cols)
		if cap(ws.act) < n*lda {
			ws.act = make([]byte, n*lda)
		}
		act = ws.act[:n*lda]
		quantizeRows(k.act, act, x, w.Cols, lda, 0, n, c.hook)
	}
	gemmRows(k, dst, act, lda, n, w, 0, w.Rows)
}

// matMulRows computes output rows [lo, hi) of MatMul using row as scratch.
func matMulRows(dst, x []float32, n int, w backend.Matrix, lo, hi int, row []float32) {
	for r := lo; r < hi; r++ {
		DequantizeRow(row, w, r)
		for t := 0; t < n; t++ {
			v := Dot(row, x[t*w.Cols:(t+1)*w.Cols])
			if w.Scale != 0 {
				v *= w.Scale
			}
			dst[t*w.Rows+r] = v
		}
	}
}

// kernel is the fast product for one weight type.
type kernel struct {
	gemm    tensor.GemmFunc
	packed  tensor.PackedGemmFunc // the product of repacked weights (default products only: not DotKernel's bits), or nil
	tile    int
	act     tensor.Type // the activations' type
	streams bool        // its single-row kernel prefetches the rows ahead (tensor.DotPrefetches)
}

// kernels holds the fast products of every type that has one, indexed by
// type id: [0] tensor.BatchGemmKernel's, with the product of repacked
// weights where the type has one (tensor.HeadPackedGemm), [1]
// tensor.GemmKernel's (the batch-invariant ones, which read the rows' own
// layout). It is filled once and only read after.
var kernels = sync.OnceValue(func() [2][]*kernel {
	var ks [2][]*kernel
	for i, get := range []func(tensor.Type) (tensor.GemmFunc, int, error){tensor.BatchGemmKernel, tensor.GemmKernel} {
		for id := tensor.Type(0); id < 64; id++ {
			var k *kernel
			if id.Known() {
				if f, tile, err := get(id); err == nil {
					k = &kernel{gemm: f, tile: tile, act: id.VecDotType(), streams: tensor.DotPrefetches(id)}
					// The layout's product wherever this CPU has one: Upload
					// decides which matrices are repacked (tensor.PackedSize,
					// or HeadPackedSize for an output head).
					if p, ok := tensor.HeadPackedGemm(id); ok && i == 0 {
						k.packed = p
					}
				}
			}
			ks[i] = append(ks[i], k)
		}
	}
	return ks
})

// kernelOf returns the fast product for t, or nil: the batch-invariant one
// if invariant is set.
func kernelOf(t tensor.Type, invariant bool) *kernel {
	ks := kernels()[0]
	if invariant {
		ks = kernels()[1]
	}
	if int(t) >= len(ks) {
		return nil
	}
	return ks[t]
}

// DequantizeRow writes row r of w, converted to float32, to dst[:w.Cols].
// It panics if the type is not supported (see MatMul).
func DequantizeRow(dst []float32, w backend.Matrix, r int) {
	if err := tensor.Dequantize(w.Type, w.Row(r), dst[:w.Cols]); err != nil {
		panic(fmt.Sprintf("cpu: %s row %d: %v", w.Name, r, err))
	}
}

// Dequantize writes all of w, converted to float32, to dst[:w.Rows*w.Cols].
func Dequantize(dst []float32, w backend.Matrix) {
	for r := 0; r < w.Rows; r++ {
		DequantizeRow(dst[r*w.Cols:(r+1)*w.Cols], w, r)
	}
}

// CheckType reports whether w's type can be dequantized, by converting its
// first row. Models call it when they load so that MatMul cannot fail.
func CheckType(w backend.Matrix) error {
	return tensor.Dequantize(w.Type, w.Row(0), make([]float32, w.Cols))
}

// CheckFastType reports whether the fast product supports w: a dot kernel
// for its type and activation rows its VecDotType can hold.
func CheckFastType(w backend.Matrix) error {
	if err := CheckType(w); err != nil {
		return err
	}
	k := kernelOf(w.Type, true)
	if k == nil {
		_, err := tensor.DotKernel(w.Type)
		if err == nil {
			err = fmt.Errorf("no matrix product for %s", w.Type)
		}
		return err
	}
	if _, err := k.act.RowSize(int64(w.Cols)); err != nil {
		return fmt.Errorf("activations of %d values as %s: %w", w.Cols, k.act, err)
	}
	return nil
}
