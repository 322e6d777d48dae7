package attention

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/glmrun/glmrun/backend"
	"github.com/glmrun/glmrun/tensor"
)

// ErrContextFull is wrapped by the errors for tokens at positions beyond a
// LatentCache's size.
var ErrContextFull = errors.New("context is full")

// LatentCache holds on one device, per layer and position, the normalized
// KV latent c (KVRank values) followed by the roped shared key k_pe (DRope
// values), and for layers with a DSA indexer the indexer key (IndexDim
// values), all stored in the cache's Type: float32, or llama.cpp's F16,
// BF16 or Q8_0 cache types (the rows are computed in float32 and
// converted as they are written). Position p of a single sequence lives
// in row p. Every layer's rows for all Size positions are allocated, and zeroed,
// when the cache is made, so that its memory is counted from the start
// and never grows or moves; a position at or beyond Size is an error
// wrapping ErrContextFull. Under tensor parallelism every device holds the
// whole cache: the latent is shared by all heads.
type LatentCache struct {
	KVRank, DRope int
	Size          int         // number of positions
	Type          tensor.Type // element type of the rows
	Dev           backend.Device

	latent   []backend.Buffer // [layer] Size rows of Width()
	index    []backend.Buffer // [layer] Size rows of indexDim[layer]; nil without indexer
	indexDim []int

	// Views of the rows, made when a layer's positions are first reached
	// (in doubling steps) and kept, so that a decode step takes its views
	// without making new ones (Slice may allocate): [layer][p] are
	// positions [0, p+1) and position p alone.
	latPrefix, latRow [][]backend.Buffer
	idxPrefix, idxRow [][]backend.Buffer
}

// zeroChunk is the most values NewLatentCache zeroes with one Write.
const zeroChunk = 1 << 16

// ParseCacheType returns the cache type named name (llama.cpp's
// --cache-type-k names: f32, f16, bf16, q8_0).
func ParseCacheType(name string) (tensor.Type, error) {
	for _, t := range backend.CacheTypes() {
		if strings.EqualFold(name, CacheTypeName(t)) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("unknown KV cache type %q (f32, f16, bf16 or q8_0)", name)
}

// CacheTypeName returns llama.cpp's name of a cache type ("f16").
func CacheTypeName(t tensor.Type) string { return strings.ToLower(t.String()) }

// NewLatentCache returns an empty cache on dev for layers layers of size
// positions, its rows stored as typ (one of backend.CacheTypes()), allocating all
// of its device memory. indexDims[l] is the indexer key width of layer l
// (0 for a layer without indexer); indexDims may be nil. A row width that
// is not whole blocks of typ is an error naming both; an allocation error
// (such as a device budget exceeded) names the layer.
func NewLatentCache(dev backend.Device, layers, size, kvRank, dRope int, indexDims []int, typ tensor.Type) (*LatentCache, error) {
	if layers <= 0 || size <= 0 || kvRank <= 0 || dRope < 0 {
		return nil, fmt.Errorf("attention: bad cache shape: %d layers, %d positions, rank %d, rope %d",
			layers, size, kvRank, dRope)
	}
	if indexDims != nil && len(indexDims) != layers {
		return nil, fmt.Errorf("attention: %d indexer widths for %d layers", len(indexDims), layers)
	}
	if !backend.IsCacheType(typ) {
		return nil, fmt.Errorf("attention: %s is not a KV cache type (f32, f16, bf16 or q8_0)", typ)
	}
	widest := kvRank + dRope
	if bs := typ.BlockSize(); widest%bs != 0 {
		return nil, fmt.Errorf("attention: a %s KV cache needs rows of whole %d-value blocks; the latent rows (kv_lora_rank %d + rope %d) have %d values",
			CacheTypeName(typ), bs, kvRank, dRope, widest)
	}
	for l, d := range indexDims {
		if d < 0 {
			return nil, fmt.Errorf("attention: layer %d: negative indexer width %d", l, d)
		}
		if bs := typ.BlockSize(); d%bs != 0 {
			return nil, fmt.Errorf("attention: a %s KV cache needs rows of whole %d-value blocks; layer %d's indexer keys have %d values",
				CacheTypeName(typ), bs, l, d)
		}
		widest = max(widest, d)
	}
	if size > math.MaxInt32/widest {
		return nil, fmt.Errorf("attention: a cache of %d positions of %d values is too large", size, widest)
	}
	c := &LatentCache{
		KVRank:    kvRank,
		DRope:     dRope,
		Size:      size,
		Type:      typ,
		Dev:       dev,
		latent:    make([]backend.Buffer, layers),
		index:     make([]backend.Buffer, layers),
		indexDim:  make([]int, layers),
		latPrefix: make([][]backend.Buffer, layers),
		latRow:    make([][]backend.Buffer, layers),
		idxPrefix: make([][]backend.Buffer, layers),
		idxRow:    make([][]backend.Buffer, layers),
	}
	copy(c.indexDim, indexDims)
	zeros := make([]float32, min(size*widest, zeroChunk))
	for l := range layers {
		var err error
		if c.latent[l], err = alloc(dev, size*c.Width(), typ, zeros); err != nil {
			c.Free()
			return nil, fmt.Errorf("attention: latent cache of layer %d (%d positions): %w", l, size, err)
		}
		if d := c.indexDim[l]; d > 0 {
			if c.index[l], err = alloc(dev, size*d, typ, zeros); err != nil {
				c.Free()
				return nil, fmt.Errorf("attention: indexer cache of layer %d (%d positions): %w", l, size, err)
			}
		}
	}
	return c, nil
}

// alloc returns a buffer of n values of type typ on dev, zeroed from
// zeros (a whole number of blocks).
func alloc(dev backend.Device, n int, typ tensor.Type, zeros []float32) (backend.Buffer, error) {
	b, err := dev.AllocType(n, typ)
	if err != nil {
		return nil, err
	}
	for off := 0; off < n; off += len(zeros) {
		k := min(len(zeros), n-off)
		dev.Write(b.Slice(off, k), zeros[:k])
	}
	return b, nil
}

// Width returns the latent row width KVRank + DRope.
func (c *LatentCache) Width() int { return c.KVRank + c.DRope }

// BytesPerToken returns the cache bytes one position takes on the device.
func (c *LatentCache) BytesPerToken() int64 {
	return CacheBytesPerToken(c.Type, c.KVRank, c.DRope, c.indexDim)
}

// CacheBytesPerToken returns the bytes one position of a LatentCache of
// type typ takes: every layer's latent row and, where indexDims[l] > 0,
// its indexer key (len(indexDims) layers). Row widths are whole blocks of
// typ (NewLatentCache checks).
func CacheBytesPerToken(typ tensor.Type, kvRank, dRope int, indexDims []int) int64 {
	row := func(n int) int64 {
		b, _ := typ.RowSize(int64(n))
		return b
	}
	n := int64(0)
	for _, d := range indexDims {
		n += row(kvRank + dRope)
		if d > 0 {
			n += row(d)
		}
	}
	return n
}

// Bytes returns the device bytes the cache holds: Size positions.
func (c *LatentCache) Bytes() int64 { return int64(c.Size) * c.BytesPerToken() }

// room checks that positions [0, n) of layer l are within the cache and
// makes the views of those not reached before. Its error wraps
// ErrContextFull.
func (c *LatentCache) room(l, n int) error {
	if n > c.Size {
		return fmt.Errorf("attention: %w: %d positions, position %d does not fit", ErrContextFull, c.Size, n-1)
	}
	if n <= len(c.latRow[l]) {
		return nil
	}
	if c.latent[l] == nil {
		return fmt.Errorf("attention: layer %d: the cache was freed", l)
	}
	rows := min(max(n, 2*len(c.latRow[l])), c.Size)
	c.latPrefix[l], c.latRow[l] = views(c.latent[l], rows, c.Width(), c.latPrefix[l], c.latRow[l])
	if d := c.indexDim[l]; d > 0 {
		c.idxPrefix[l], c.idxRow[l] = views(c.index[l], rows, d, c.idxPrefix[l], c.idxRow[l])
	}
	return nil
}

// views extends the prefix and single-row views of rows of width w of b,
// prefix and row, to rows rows.
func views(b backend.Buffer, rows, w int, prefix, row []backend.Buffer) ([]backend.Buffer, []backend.Buffer) {
	for p := len(row); p < rows; p++ {
		prefix = append(prefix, b.Slice(0, (p+1)*w))
		row = append(row, b.Slice(p*w, w))
	}
	return prefix, row
}

// Latent returns the cached rows [c | k_pe] of layer l for positions
// [0, n), n·Width() values (n ≥ 1, within what Forward has reached).
func (c *LatentCache) Latent(l, n int) backend.Buffer {
	if n == 0 {
		return c.latent[l].Slice(0, 0)
	}
	return c.latPrefix[l][n-1]
}

// latentRows returns the rows of layer l for positions [p, p+T).
func (c *LatentCache) latentRows(l, p, T int) backend.Buffer {
	if T == 1 {
		return c.latRow[l][p]
	}
	return c.latent[l].Slice(p*c.Width(), T*c.Width())
}

// IndexKeys returns the cached indexer keys of layer l for positions
// [0, n), or nil if the layer has no indexer.
func (c *LatentCache) IndexKeys(l, n int) backend.Buffer {
	if c.indexDim[l] == 0 {
		return nil
	}
	if n == 0 {
		return c.index[l].Slice(0, 0)
	}
	return c.idxPrefix[l][n-1]
}

// indexRows returns the indexer keys of layer l for positions [p, p+T).
func (c *LatentCache) indexRows(l, p, T int) backend.Buffer {
	if T == 1 {
		return c.idxRow[l][p]
	}
	return c.index[l].Slice(p*c.indexDim[l], T*c.indexDim[l])
}

// Free returns the cache's memory to the device; the cache must not be
// used after.
func (c *LatentCache) Free() {
	for l := range c.latent {
		if c.latent[l] != nil {
			c.Dev.Free(c.latent[l])
			c.latent[l] = nil
		}
		if c.index[l] != nil {
			c.Dev.Free(c.index[l])
			c.index[l] = nil
		}
		c.latPrefix[l], c.latRow[l], c.idxPrefix[l], c.idxRow[l] = nil, nil, nil, nil
	}
}

// PositionValues returns the values one position holds over all layers:
// each layer's latent row and, where it has an indexer, its key.
func (c *LatentCache) PositionValues() int {
	n := 0
	for _, d := range c.indexDim {
		n += c.Width() + d
	}
	return n
}

// Export copies positions [from, from+n) of every layer to dst (n ×
// PositionValues() values, in float32 whatever the cache's type: Import
// stores them back unchanged), layer by layer: the n latent rows, then
// the n indexer keys. It reads the device, so it belongs between steps,
// not in one.
func (c *LatentCache) Export(dst []float32, from, n int) error {
	return c.copyRows(dst, from, n, false)
}

// Import writes rows made by Export (of a cache of the same shape) to
// positions [from, from+n).
func (c *LatentCache) Import(src []float32, from, n int) error { return c.copyRows(src, from, n, true) }

// copyRows moves positions [from, from+n) between host (Export's layout)
// and device: to the device when write is set.
func (c *LatentCache) copyRows(host []float32, from, n int, write bool) error {
	if err := c.span(len(host), from, n); err != nil {
		return err
	}
	move := func(dev backend.Buffer, h []float32) {
		if write {
			c.Dev.Write(dev, h)
		} else {
			c.Dev.Read(h, dev)
		}
	}
	off := 0
	for l := range c.latent {
		if err := c.room(l, from+n); err != nil {
			return err
		}
		w := n * c.Width()
		move(c.latentRows(l, from, n), host[off:off+w])
		off += w
		if d := c.indexDim[l]; d > 0 {
			move(c.indexRows(l, from, n), host[off:off+n*d])
			off += n * d
		}
	}
	return nil
}

func (c *LatentCache) span(values, from, n int) error {
	switch {
	case from < 0 || n < 0:
		return fmt.Errorf("attention: bad cache span [%d, %d+%d)", from, from, n)
	case from+n > c.Size:
		return fmt.Errorf("attention: %w: positions [%d, %d) of a cache of %d", ErrContextFull, from, from+n, c.Size)
	case values != n*c.PositionValues():
		return fmt.Errorf("attention: %d values for %d positions of %d", values, n, c.PositionValues())
	}
	return nil
}
