package backend

import (
	"fmt"
	"slices"

	"github.com/glmrun/glmrun/tensor"
)

// cacheTypes are the element types Device.AllocType takes: llama.cpp's KV
// cache types.
var cacheTypes = [...]tensor.Type{tensor.F32, tensor.F16, tensor.BF16, tensor.Q8_0}

// CacheTypes returns the element types every Device's AllocType takes: f32,
// f16, bf16 and q8_0.
func CacheTypes() []tensor.Type { return slices.Clone(cacheTypes[:]) }

// IsCacheType reports whether t is one of CacheTypes().
func IsCacheType(t tensor.Type) bool { return slices.Contains(cacheTypes[:], t) }

// CacheBytes returns the size in bytes of n values stored as t, for
// AllocType: an error for a type that is not a cache type, a negative n,
// or an n that is not whole blocks of t.
func CacheBytes(n int, t tensor.Type) (int64, error) {
	if !IsCacheType(t) {
		return 0, fmt.Errorf("buffers of type %s are not supported (%v)", t, cacheTypes)
	}
	if n < 0 {
		return 0, fmt.Errorf("negative buffer size %d", n)
	}
	return t.RowSize(int64(n))
}
