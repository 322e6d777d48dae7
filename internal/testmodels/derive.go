package testmodels

import (
	"crypto/sha256"
	"fmt"
	"slices"

	"github.com/glmrun/glmrun/gguf"
)

// Keys that an extra file (see Diff) appends to the full file's metadata.
const (
	keyBase  = "testmodels.base"  // string: name of the base model
	keyOrder = "testmodels.order" // string array: every tensor of the full file, in order
	keyFrom  = "testmodels.from"  // string array: per tensor in order, the base tensor with its bytes, or ""
)

// Diff returns an extra file that holds what full has beyond base: all of
// full's metadata, its tensor order, and the tensors whose bytes are not
// the bytes of some base tensor of the same type and shape. Patch(base,
// extra) rebuilds full; baseName is recorded to catch a wrong base.
func Diff(full, base *gguf.File, baseName string) (*gguf.Writer, error) {
	type key struct{ sum, shape string }
	shapeOf := func(t *gguf.TensorInfo) string { return fmt.Sprint(t.Type, t.Dims) }
	byKey := map[key]string{}
	for _, t := range base.Tensors {
		sum := sha256.Sum256(t.Data)
		k := key{string(sum[:]), shapeOf(t)}
		if _, ok := byKey[k]; !ok {
			byKey[k] = t.Name
		}
	}
	w := gguf.NewWriter()
	w.Version = full.Version
	for _, kv := range full.KVs {
		if kv.Key == keyBase || kv.Key == keyOrder || kv.Key == keyFrom {
			return nil, fmt.Errorf("testmodels: %s already has key %q", full.Path, kv.Key)
		}
		w.SetKV(kv.Key, kv.Value)
	}
	order := make([]string, len(full.Tensors))
	from := make([]string, len(full.Tensors))
	for i, t := range full.Tensors {
		order[i] = t.Name
		sum := sha256.Sum256(t.Data)
		if name, ok := byKey[key{string(sum[:]), shapeOf(t)}]; ok {
			from[i] = name
			continue
		}
		if err := w.AddTensor(t.Name, t.Type, t.Dims, t.Data); err != nil {
			return nil, err
		}
	}
	w.SetKV(keyBase, gguf.String(baseName))
	w.SetKV(keyOrder, gguf.Array(order))
	w.SetKV(keyFrom, gguf.Array(from))
	return w, nil
}

// Patch rebuilds the full file from base and an extra file made by Diff.
// The writer references the data of both files: keep them open until it
// is written.
func Patch(base, extra *gguf.File, baseName string) (*gguf.Writer, error) {
	n := len(extra.KVs)
	if n < 3 || extra.KVs[n-3].Key != keyBase || extra.KVs[n-2].Key != keyOrder || extra.KVs[n-1].Key != keyFrom {
		return nil, fmt.Errorf("testmodels: %s: not an extra file (its last keys are not %s, %s, %s)", extra.Path, keyBase, keyOrder, keyFrom)
	}
	if got, err := extra.String(keyBase); err != nil || got != baseName {
		return nil, fmt.Errorf("testmodels: %s: made from base %q, not %q (%v)", extra.Path, got, baseName, err)
	}
	order, err := extra.Strings(keyOrder)
	if err != nil {
		return nil, err
	}
	from, err := extra.Strings(keyFrom)
	if err != nil {
		return nil, err
	}
	if len(from) != len(order) {
		return nil, fmt.Errorf("testmodels: %s: %d tensor names but %d sources", extra.Path, len(order), len(from))
	}
	w := gguf.NewWriter()
	w.Version = extra.Version
	for _, kv := range extra.KVs[:n-3] {
		w.SetKV(kv.Key, kv.Value)
	}
	for i, name := range order {
		src, file := name, extra
		if from[i] != "" {
			src, file = from[i], base
		}
		t, ok := file.Tensor(src)
		if !ok {
			return nil, fmt.Errorf("testmodels: tensor %q: %s has no tensor %q", name, file.Path, src)
		}
		if err := w.AddTensor(name, t.Type, t.Dims, t.Data); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// Subset returns f with only the named tensors (in f's order) and all its
// metadata.
func Subset(f *gguf.File, names []string) (*gguf.Writer, error) {
	w := gguf.NewWriterFrom(f)
	for _, name := range names {
		if _, ok := f.Tensor(name); !ok {
			return nil, fmt.Errorf("testmodels: %s has no tensor %q", f.Path, name)
		}
	}
	for _, t := range f.Tensors {
		if !slices.Contains(names, t.Name) {
			w.RemoveTensor(t.Name)
		}
	}
	return w, nil
}

// sparse turns glm5-mini.Q8_0 into glm5-mini-sparse.Q8_0: a new name and
// an indexer top-k of 8, every key keeping its place and type.
func sparse(base *gguf.File) (*gguf.Writer, error) {
	w := gguf.NewWriterFrom(base)
	const topK = "glm-dsa.attention.indexer.top_k"
	v, ok := w.Lookup(topK)
	if !ok || v.Type() != gguf.TypeUint32 {
		return nil, fmt.Errorf("testmodels: %s: %s is %v, want a u32", base.Path, topK, v)
	}
	if _, ok := w.Lookup("general.name"); !ok {
		return nil, fmt.Errorf("testmodels: %s: no general.name", base.Path)
	}
	w.SetKV("general.name", gguf.String("glm5-mini-sparse"))
	w.SetKV(topK, gguf.Uint32(8))
	return w, nil
}
