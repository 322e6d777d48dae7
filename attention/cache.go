package attention

import (
	"fmt"

	"github.com/glmrun/glmrun/backend"
)

// LatentCache holds on one device, per layer and position, the normalized
// KV latent c (KVRank values) followed by the roped shared key k_pe (DRope
// values), and for layers with a DSA indexer the indexer key (IndexDim
// values), all in float32. Position p of a single sequence lives in row
// p. Rows are allocated as positions are first written (capacity doubling
// up to Size). Under tensor parallelism every device holds the whole
// cache: the latent is shared by all heads.
type LatentCache struct {
	KVRank, DRope int
	Size          int // maximum number of positions
	Dev           backend.Device

	latent   []backend.Buffer // [layer] capacity rows of Width()
	index    []backend.Buffer // [layer] capacity rows of indexDim[layer]; nil without indexer
	rows     []int            // [layer] capacity in positions
	indexDim []int

	// Views made when a layer's rows are allocated, so that a decode
	// step takes its views without making new ones (Slice may allocate):
	// [layer][p] are positions [0, p+1) and position p alone.
	latPrefix, latRow [][]backend.Buffer
	idxPrefix, idxRow [][]backend.Buffer
}

// NewLatentCache returns an empty cache on dev for layers layers of up to
// size positions. indexDims[l] is the indexer key width of layer l (0 for
// a layer without indexer); indexDims may be nil.
func NewLatentCache(dev backend.Device, layers, size, kvRank, dRope int, indexDims []int) (*LatentCache, error) {
	if layers <= 0 || size <= 0 || kvRank <= 0 || dRope < 0 {
		return nil, fmt.Errorf("attention: bad cache shape: %d layers, %d positions, rank %d, rope %d",
			layers, size, kvRank, dRope)
	}
	if indexDims != nil && len(indexDims) != layers {
		return nil, fmt.Errorf("attention: %d indexer widths for %d layers", len(indexDims), layers)
	}
	c := &LatentCache{
		KVRank:    kvRank,
		DRope:     dRope,
		Size:      size,
		Dev:       dev,
		latent:    make([]backend.Buffer, layers),
		index:     make([]backend.Buffer, layers),
		rows:      make([]int, layers),
		indexDim:  make([]int, layers),
		latPrefix: make([][]backend.Buffer, layers),
		latRow:    make([][]backend.Buffer, layers),
		idxPrefix: make([][]backend.Buffer, layers),
		idxRow:    make([][]backend.Buffer, layers),
	}
	copy(c.indexDim, indexDims)
	return c, nil
}

// Width returns the latent row width KVRank + DRope.
func (c *LatentCache) Width() int { return c.KVRank + c.DRope }

// BytesPerToken returns the cache bytes one position takes on the device.
func (c *LatentCache) BytesPerToken() int64 {
	n := int64(0)
	for _, d := range c.indexDim {
		n += int64(4 * (c.Width() + d))
	}
	return n
}

// grow makes room for positions [0, n) in layer l, keeping the rows
// written so far.
func (c *LatentCache) grow(l, n int) error {
	if n > c.Size {
		return fmt.Errorf("attention: cache position %d beyond size %d", n-1, c.Size)
	}
	if n <= c.rows[l] {
		return nil
	}
	rows := min(max(n, 2*c.rows[l]), c.Size)
	lat, err := regrow(c.Dev, c.latent[l], c.rows[l]*c.Width(), rows*c.Width())
	if err != nil {
		return fmt.Errorf("attention: latent cache of layer %d: %w", l, err)
	}
	c.latent[l] = lat
	if d := c.indexDim[l]; d > 0 {
		idx, err := regrow(c.Dev, c.index[l], c.rows[l]*d, rows*d)
		if err != nil {
			return fmt.Errorf("attention: indexer cache of layer %d: %w", l, err)
		}
		c.index[l] = idx
	}
	c.rows[l] = rows
	c.latPrefix[l], c.latRow[l] = views(c.latent[l], rows, c.Width(), c.latPrefix[l], c.latRow[l])
	if d := c.indexDim[l]; d > 0 {
		c.idxPrefix[l], c.idxRow[l] = views(c.index[l], rows, d, c.idxPrefix[l], c.idxRow[l])
	}
	return nil
}

// views returns the prefix and single-row views of rows rows of width w
// of b, reusing the slices prefix and row.
func views(b backend.Buffer, rows, w int, prefix, row []backend.Buffer) ([]backend.Buffer, []backend.Buffer) {
	prefix, row = prefix[:0], row[:0]
	for p := range rows {
		prefix = append(prefix, b.Slice(0, (p+1)*w))
		row = append(row, b.Slice(p*w, w))
	}
	return prefix, row
}

// regrow returns a buffer of n values holding the first old values of b,
// freeing b.
func regrow(dev backend.Device, b backend.Buffer, old, n int) (backend.Buffer, error) {
	nb, err := dev.Alloc(n)
	if err != nil {
		return nil, err
	}
	if b != nil {
		if old > 0 {
			dev.Copy(nb.Slice(0, old), b.Slice(0, old))
		}
		dev.Free(b)
	}
	return nb, nil
}

// Latent returns the cached rows [c | k_pe] of layer l for positions
// [0, n), n·Width() values (n ≥ 1, within what grow made room for).
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

// Free returns the cache's memory to the device; the cache is empty after.
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
		c.rows[l] = 0
		c.latPrefix[l], c.latRow[l], c.idxPrefix[l], c.idxRow[l] = nil, nil, nil, nil
	}
}
