package server

import (
	"encoding/binary"
	"fmt"

	"github.com/glmrun/glmrun/internal/meminfo"
	"github.com/glmrun/glmrun/model"
)

// prefixCache keeps the KV cache rows of prompts that ran, in host memory,
// so that a later request starting with the same tokens (an agent resending
// its conversation, many requests sharing a system prompt) restores them
// into any slot instead of running them again. Rows are kept in blocks of
// block tokens, in a trie keyed by each block's tokens: a block is reused
// only after the same tokens before it, which is what makes its rows valid.
// The rows are the latents and the DSA indexer keys of every layer, so a
// restored prefix longer than top_k selects the keys a cold run would.
// The least recently used blocks without children go when the budget is
// reached. Only the scheduler's goroutine touches it, so a block being
// restored cannot be evicted under it and needs no reference count.
type prefixCache struct {
	block  int
	values int   // float32 values per position
	budget int64 // bytes
	used   int64
	root   *pcNode
	nodes  []*pcNode // every node but the root, for eviction
	clock  uint64
	m      *metrics
}

// pcNode is one block: the rows of its positions, computed after the
// blocks on the path from the root.
type pcNode struct {
	parent *pcNode
	key    string // the block's tokens, the parent's map key
	rows   []float32
	kids   map[string]*pcNode
	used   uint64 // clock of the last lookup or insert that passed it
}

func newPrefixCache(block, values int, budget int64, m *metrics) *prefixCache {
	return &prefixCache{block: block, values: values, budget: budget, root: &pcNode{kids: map[string]*pcNode{}}, m: m}
}

func blockKey(tokens []int32) string {
	b := make([]byte, 4*len(tokens))
	for i, t := range tokens {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(t))
	}
	return string(b)
}

// lookup returns the blocks that hold the longest cached prefix of prompt
// of at most limit tokens, in order.
func (c *prefixCache) lookup(prompt []int32, limit int) []*pcNode {
	c.clock++
	var path []*pcNode
	n := c.root
	for i := 0; (i+1)*c.block <= min(limit, len(prompt)); i++ {
		kid := n.kids[blockKey(prompt[i*c.block:(i+1)*c.block])]
		if kid == nil {
			break
		}
		kid.used = c.clock
		path = append(path, kid)
		n = kid
	}
	return path
}

// insert stores the blocks of tokens (the sequence sess holds: its cache
// rows for these positions are valid) that are not cached yet, as far as
// the budget allows.
func (c *prefixCache) insert(tokens []int32, sess *model.Session) error {
	c.clock++
	blockBytes := int64(4 * c.block * c.values)
	if blockBytes > c.budget {
		return nil
	}
	n := c.root
	for i := 0; (i+1)*c.block <= len(tokens); i++ {
		key := blockKey(tokens[i*c.block : (i+1)*c.block])
		kid := n.kids[key]
		if kid == nil {
			for c.used+blockBytes > c.budget {
				if !c.evict(n) {
					return nil
				}
			}
			kid = &pcNode{parent: n, key: key, rows: make([]float32, c.block*c.values), kids: map[string]*pcNode{}}
			if err := sess.ExportRows(kid.rows, i*c.block, c.block); err != nil {
				return fmt.Errorf("server: prefix cache: %w", err)
			}
			n.kids[key] = kid
			c.nodes = append(c.nodes, kid)
			c.used += blockBytes
			c.m.prefixBytes.Store(c.used)
		}
		kid.used = c.clock
		n = kid
	}
	return nil
}

// evict drops the least recently used block without children, other than
// keep and its ancestors (the path an insert is extending); it reports
// whether there was one.
func (c *prefixCache) evict(keep *pcNode) bool {
	protected := map[*pcNode]bool{}
	for p := keep; p != nil; p = p.parent {
		protected[p] = true
	}
	best := -1
	for i, n := range c.nodes {
		if len(n.kids) == 0 && !protected[n] && (best < 0 || n.used < c.nodes[best].used) {
			best = i
		}
	}
	if best < 0 {
		return false
	}
	n := c.nodes[best]
	delete(n.parent.kids, n.key)
	c.nodes[best] = c.nodes[len(c.nodes)-1]
	c.nodes = c.nodes[:len(c.nodes)-1]
	c.used -= int64(4 * len(n.rows))
	c.m.prefixBytes.Store(c.used)
	c.m.prefixEvictions.Add(1)
	return true
}

// restore makes sess hold the first len(path)*block tokens of prompt: it
// keeps the first own tokens sess already holds of it and imports the
// blocks from there on.
func (c *prefixCache) restore(sess *model.Session, path []*pcNode, own int) error {
	start := min(own, len(path)*c.block) / c.block
	if err := sess.Truncate(start * c.block); err != nil {
		return err
	}
	for i := start; i < len(path); i++ {
		if err := sess.ImportRows(path[i].rows, i*c.block, c.block); err != nil {
			return fmt.Errorf("server: prefix cache: %w", err)
		}
	}
	return nil
}

// DefaultPrefixCacheBlock is the tokens per prefix-cache block.
const DefaultPrefixCacheBlock = 64

// defaultPrefixCacheBytes is a quarter of the memory the system has
// available, at most 8 GiB, or 1 GiB when that is not known.
func defaultPrefixCacheBytes() int64 {
	const most = 8 << 30
	if avail, ok := meminfo.Available(); ok {
		return min(most, avail/4)
	}
	return 1 << 30
}
