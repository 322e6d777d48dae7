package backend

import (
	"fmt"
	"math"
	"sort"
	"sync"

	"github.com/glmrun/glmrun/tensor"
)

// Buffer is a float32 array resident on one device: an activation, a norm
// weight vector or a KV cache. Slice returns a view of n values from off
// (no copy); views may be handed to any operation of the same device.
type Buffer interface {
	Len() int
	Slice(off, n int) Buffer
}

// IDs is an int32 array resident on one device: routed expert ids or DSA
// key selections.
type IDs interface {
	Len() int
	Slice(off, n int) IDs
}

// Weight is a matrix uploaded to a device in its GGUF type (see Matrix).
type Weight interface {
	Name() string
	Type() tensor.Type
	Rows() int // output dimension
	Cols() int // input dimension
	Bytes() int64
}

// Rope holds the parameters of ggml's rotary position embedding in NORM
// mode (adjacent pairs), with YaRN (docs/MATH.md sections 3.5 and 5). The
// zero ExtFactor and a FreqScale of 1 give plain RoPE.
type Rope struct {
	Dims       int        // rotated leading elements (n_rot), even
	Base       float32    // rope.freq_base
	FreqScale  float32    // 1/scaling factor (1 without scaling)
	ExtFactor  float32    // YaRN extrapolation mix: 1 with YaRN, else 0
	AttnFactor float32    // magnitude handed to rope (1 without YaRN)
	CorrDims   [2]float32 // YaRN ramp ends (see YaRNCorrDims)
}

// Gating is the function that turns router logits into expert
// probabilities (GGUF expert_gating_func).
type Gating int

// Gating functions; the values are GGUF's.
const (
	GatingSoftmax      Gating = 1
	GatingSigmoid      Gating = 2
	GatingSqrtSoftplus Gating = 4
)

// Router describes MoE routing (docs/MATH.md section 7): gating, the
// selection-only bias, group-limited selection, top-k, weight
// normalization and scale.
type Router struct {
	Experts     int    // X
	Used        int    // K, experts per token
	Gating      Gating // probability function
	Bias        Buffer // [X] exp_probs_b added for selection only, or nil
	Groups      int    // expert groups (1: no group limit)
	GroupsUse   int    // groups kept
	NormWeights bool   // divide the K weights by their sum
	Scale       float32
}

// Experts are the routed experts one device holds: global ids [First,
// First+len(Gate)). Gate[i], Up[i] and Down[i] belong to expert First+i.
type Experts struct {
	First          int
	Gate, Up, Down []Weight
}

// MLAParams are the sizes of one MLA attention call on one device
// (docs/MATH.md section 3): Heads is the number of heads this device holds.
type MLAParams struct {
	Heads  int // local heads
	DNope  int // dn
	DRope  int // dr
	DV     int // dv
	KVRank int // kr
	// Tau is the softmax scale.
	Tau float32
	// TopK is the width of a DSA selection row (see AttentionPrefill).
	TopK int
}

// IndexerParams are the sizes of the DSA lightning indexer.
type IndexerParams struct {
	Heads, Dim, TopK int
}

// Device is one compute device: memory with a budget and one stream on
// which operations run in the order they are issued. Operations may run
// asynchronously: a Buffer's contents are only visible to the host through
// Read, and a fault inside an operation is sticky and reported by the next
// Sync (later operations may then be skipped). Allocation and upload
// errors, such as exceeding the budget, are returned at once.
//
// A Device may be used from several goroutines at once (sessions sharing
// a model); each call is one operation of its stream.
//
// Shapes are written outermost first and every activation is a row-major
// float32 matrix. Operations panic on arguments that break their stated
// shape contracts: callers size everything from the model's config.
type Device interface {
	// Name identifies the device ("cpu:0", "cuda:3").
	Name() string
	// Budget is the memory limit in bytes (0: none); Used is what weights
	// and live buffers take.
	Budget() int64
	Used() int64

	// Upload makes m resident, kept in its GGUF type. The CPU keeps a
	// reference to m.Data; others copy it.
	Upload(m Matrix) (Weight, error)
	// UploadVector makes a copy of v resident (norm weights, biases).
	UploadVector(name string, v []float32) (Buffer, error)
	// Alloc returns a buffer of n float32 values (contents undefined);
	// AllocIDs one of n int32 values.
	Alloc(n int) (Buffer, error)
	// AllocType returns a zeroed buffer of n values stored as t: a KV
	// cache in one of llama.cpp's cache types (F32, F16, BF16, Q8_0; n,
	// and every view's offset and length, whole blocks of t). Write and
	// Read convert from and to float32; Copy from a float32 buffer into it
	// converts as tensor.Quantize does; AttentionPrefill, AttentionDecode
	// and IndexerTopK read it as their latent or keys. Every other
	// operation takes float32 buffers only. A type the device does not
	// implement is an error naming it.
	AllocType(n int, t tensor.Type) (Buffer, error)
	AllocIDs(n int) (IDs, error)
	// Free returns a buffer from Alloc, AllocIDs or UploadVector to the
	// device; the buffer and its views must not be used after.
	Free(b Buffer)
	FreeIDs(ids IDs)

	// Write copies host values to dst (len(src) == dst.Len()); Read
	// copies src to the host, waiting for the operations before it.
	Write(dst Buffer, src []float32)
	Read(dst []float32, src Buffer)
	ReadIDs(dst []int32, src IDs)
	// Sync waits for every issued operation and returns the first fault
	// since the device was created (faults are sticky).
	Sync() error
	// Close releases everything the device holds; nothing of it may be
	// used after.
	Close() error

	// GetRows writes row ids[t] of w, dequantized, to dst[t] ([T, w.Cols]).
	GetRows(dst Buffer, w Weight, ids []int32)
	// MatMul computes dst[t, r] = Σ_i w[r, i]·x[t, i] for n rows:
	// x [n, w.Cols], dst [n, w.Rows].
	MatMul(dst, x Buffer, n int, w Weight)
	// RMSNorm normalizes rows rows of w.Len() values, row r starting at
	// r·stride in x and in dst (dst may be x): w ⊙ x/sqrt(mean(x²)+eps).
	RMSNorm(dst, x Buffer, rows, stride int, w Buffer, eps float32)
	// AddRMSNorm adds delta to h and writes RMSNorm of the sum to dst,
	// for rows rows of w.Len() values, row r starting at r·stride in all
	// three: a residual add and the norm after it in one pass over h
	// (one kernel on a GPU). The same values as Add, then RMSNorm.
	AddRMSNorm(dst, h, delta Buffer, rows, stride int, w Buffer, eps float32)
	// LayerNorm is RMSNorm's sibling: w ⊙ (x − mean)/sqrt(var + eps) + b.
	LayerNorm(dst, x Buffer, rows, stride int, w, b Buffer, eps float32)
	// Rope rotates, for each row t < rows and head h < heads, the r.Dims
	// values at (t·heads + h)·stride + off by position pos0 + t.
	Rope(x Buffer, rows, heads, stride, off, pos0 int, r Rope)
	// Add adds x to y; Scale multiplies x by a; Copy copies src to dst
	// (equal lengths).
	Add(y, x Buffer)
	Scale(x Buffer, a float32)
	Copy(dst, src Buffer)
	// SwiGLU writes silu(gate) ⊙ up to dst (dst may be gate).
	SwiGLU(dst, gate, up Buffer)

	// IndexerTopK runs the DSA lightning indexer's selection
	// (docs/MATH.md section 6) for T queries at positions pos0 …:
	// q [T, Heads, Dim] roped queries, w [T, Heads] head weights (already
	// scaled), keys [pos0+T, Dim]. Row t of sel [T, TopK] receives the
	// TopK best keys of [0, pos0+t] ascending, or all of them followed by
	// −1 when there are no more than TopK.
	IndexerTopK(sel IDs, q, w, keys Buffer, T, pos0 int, p IndexerParams)
	// AttentionPrefill is MLA in the decompressed form (docs/MATH.md 3.2)
	// for T queries at positions pos0 …: q [T, Heads, dn+dr] (roped),
	// latent [pos0+T, kr+dr] the cache rows [c ‖ k_pe], kb [Heads·kr, dn]
	// and vb [Heads·dv, kr] this device's heads of attn_k_b and attn_v_b.
	// sel is nil (every causal key) or [T, p.TopK] as IndexerTopK writes
	// it. kqv receives [T, Heads·dv].
	AttentionPrefill(kqv, q, latent Buffer, kb, vb Weight, sel IDs, T, pos0 int, p MLAParams)
	// AttentionDecode computes the same in the absorbed form
	// (docs/MATH.md 3.3): W_UK folded into the query, attention over the
	// latent rows.
	AttentionDecode(kqv, q, latent Buffer, kb, vb Weight, sel IDs, T, pos0 int, p MLAParams)
	// RouterTopK turns router logits [T, X] into ids [T, K] (routing
	// order) and weights [T, K].
	RouterTopK(ids IDs, weights, logits Buffer, T int, r *Router)
	// MoE writes to dst [T, E] the sum over token t's routed slots whose
	// expert this device holds, in routing order, of weight ·
	// Down(silu(Gate x) ⊙ Up x); zero where it holds none. x is [T, E],
	// ids and weights [T, K] from RouterTopK.
	MoE(dst, x Buffer, T int, ids IDs, weights Buffer, e *Experts)
}

// Collective runs operations across the devices of one group, each
// buffer on its own device (bufs[d] on device d). Results are identical
// on every device and do not depend on timing: the reduction order is
// fixed. Argument errors are returned; faults surface from Device.Sync.
type Collective interface {
	// Devices returns the group size.
	Devices() int
	// AllReduce replaces every buffer by the element-wise sum of all.
	AllReduce(bufs []Buffer) error
	// Broadcast copies bufs[root] to every other buffer.
	Broadcast(bufs []Buffer, root int) error
}

// Config configures Open.
type Config struct {
	Devices int   // number of devices (tensor-parallel degree), ≥ 1
	Threads int   // CPU worker goroutines per device; 0: the backend's default
	Memory  int64 // per-device memory budget in bytes; 0: the device's own
	// Fast selects the backend's fast matrix products where it has a
	// choice: on the CPU, activations quantized to the weight type's
	// VecDotType as ggml does, and integer dot products (the numbers of
	// llama.cpp's quantized path). false keeps float32 activations, the
	// exact path that the deq-F32 references check.
	Fast bool
	// BatchInvariant makes every fast product give each row (token) the
	// result it gets alone, bit for bit, whatever the number of rows: a
	// prompt's prefill then computes what decoding it token by token does,
	// and a batched decode step what decoding the sequences one by one
	// does. By default a backend may choose faster kernels whose results
	// depend on the number of rows within float rounding (the CPU's
	// sixteen-token tiles of Q4_K and Q6_K weights), as llama.cpp's and
	// vLLM's do. Backends whose products never depend on it ignore it.
	BatchInvariant bool
	// NoRepack keeps weights in their file's layout. By default the CPU
	// backend's fast path rewrites the matrices of the types it has packed
	// kernels for into interleaved groups of rows when they are uploaded
	// (tensor.Repack): prompts run faster (1.3-1.7 times on AVX2 in the
	// README's measurements), and the copy takes memory the size of those
	// weights, while the file's pages of them are dropped. Batch-invariant
	// products never repack.
	NoRepack bool
	// Collectives chooses how a GPU backend's all-reduce and broadcast
	// move data between devices: "p2p" (device to device on the devices'
	// streams, ordered by events; the default where the driver has it) or
	// "host" (through host memory). Backends with one way ignore it.
	Collectives string
}

// OpenFunc opens a backend's devices and their collective.
type OpenFunc func(c Config) ([]Device, Collective, error)

var (
	regMu    sync.Mutex
	registry = map[string]OpenFunc{}
)

// Register makes a backend available to Open under name. Backends call it
// from init; a second registration of a name panics.
func Register(name string, open OpenFunc) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[name]; dup {
		panic("backend: Register called twice for " + name)
	}
	registry[name] = open
}

// Open opens c.Devices devices of the named backend. The program must
// import the backend's package (for example
// _ "github.com/glmrun/glmrun/backend/cpu") to register it.
func Open(name string, c Config) ([]Device, Collective, error) {
	regMu.Lock()
	open, ok := registry[name]
	var names []string
	for n := range registry {
		names = append(names, n)
	}
	regMu.Unlock()
	if !ok {
		sort.Strings(names)
		return nil, nil, fmt.Errorf("backend: %q is not available (registered: %v); import its package, e.g. _ \"github.com/glmrun/glmrun/backend/%s\"", name, names, name)
	}
	if c.Devices < 1 {
		return nil, nil, fmt.Errorf("backend: %s: %d devices, want at least 1", name, c.Devices)
	}
	return open(c)
}

// YaRNCorrDims returns the first and last rotated pair index of the YaRN
// ramp for nDims rotated dims, original context nCtxOrig and the two
// betas, computed in float32 as ggml does.
func YaRNCorrDims(nDims, nCtxOrig int, base, betaFast, betaSlow float32) [2]float32 {
	corr := func(nRot float32) float32 {
		return float32(nDims) * float32(math.Log(float64(float32(nCtxOrig)/(nRot*2*float32(math.Pi))))) /
			(2 * float32(math.Log(float64(base))))
	}
	start := float32(math.Floor(float64(corr(betaFast))))
	end := float32(math.Ceil(float64(corr(betaSlow))))
	return [2]float32{max(0, start), min(float32(nDims-1), end)}
}
