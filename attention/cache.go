package attention

import "fmt"

// LatentCache holds, per layer and position, the normalized KV latent c
// (KVRank values) followed by the roped shared key k_pe (DRope values),
// and for layers with a DSA indexer the indexer key (IndexDim values), all
// in float32. Position p of a single sequence lives in row p. Rows are
// allocated as positions are first written, up to Size.
type LatentCache struct {
	KVRank, DRope int
	Size          int // maximum number of positions

	latent   [][]float32 // [layer][pos*(KVRank+DRope) …]
	index    [][]float32 // [layer][pos*indexDim[layer] …]; nil without indexer
	indexDim []int
}

// NewLatentCache returns an empty cache for layers layers of up to size
// positions. indexDims[l] is the indexer key width of layer l (0 for a
// layer without indexer); indexDims may be nil.
func NewLatentCache(layers, size, kvRank, dRope int, indexDims []int) (*LatentCache, error) {
	if layers <= 0 || size <= 0 || kvRank <= 0 || dRope < 0 {
		return nil, fmt.Errorf("attention: bad cache shape: %d layers, %d positions, rank %d, rope %d",
			layers, size, kvRank, dRope)
	}
	if indexDims != nil && len(indexDims) != layers {
		return nil, fmt.Errorf("attention: %d indexer widths for %d layers", len(indexDims), layers)
	}
	c := &LatentCache{
		KVRank:   kvRank,
		DRope:    dRope,
		Size:     size,
		latent:   make([][]float32, layers),
		index:    make([][]float32, layers),
		indexDim: make([]int, layers),
	}
	copy(c.indexDim, indexDims)
	return c, nil
}

// Width returns the latent row width KVRank + DRope.
func (c *LatentCache) Width() int { return c.KVRank + c.DRope }

// grow makes room for positions [0, n) in layer l.
func (c *LatentCache) grow(l, n int) {
	if n > c.Size {
		panic(fmt.Sprintf("attention: cache position %d beyond size %d", n-1, c.Size))
	}
	c.latent[l] = growRows(c.latent[l], n*c.Width(), c.Size*c.Width())
	if d := c.indexDim[l]; d > 0 {
		c.index[l] = growRows(c.index[l], n*d, c.Size*d)
	}
}

// growRows extends s to length n, doubling capacity up to limit.
func growRows(s []float32, n, limit int) []float32 {
	if n <= len(s) {
		return s
	}
	if n <= cap(s) {
		return s[:n]
	}
	c := min(max(n, 2*cap(s)), limit)
	t := make([]float32, n, c)
	copy(t, s)
	return t
}

// Latent returns the cached rows [c | k_pe] of layer l for positions
// [0, n), n·Width() values.
func (c *LatentCache) Latent(l, n int) []float32 { return c.latent[l][:n*c.Width()] }

// IndexKeys returns the cached indexer keys of layer l for positions
// [0, n), or nil if the layer has no indexer.
func (c *LatentCache) IndexKeys(l, n int) []float32 {
	if c.indexDim[l] == 0 {
		return nil
	}
	return c.index[l][:n*c.indexDim[l]]
}

// Reset forgets every position but keeps the memory.
func (c *LatentCache) Reset() {
	for l := range c.latent {
		c.latent[l] = c.latent[l][:0]
		c.index[l] = c.index[l][:0]
	}
}
