package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// IndexFile is the name of the weight map of a sharded checkpoint.
const IndexFile = "model.safetensors.index.json"

// Checkpoint is the set of safetensors files of one Hugging Face model
// directory, opened together.
type Checkpoint struct {
	Dir string
	// Files are the shards, in file-name order.
	Files []*File
	// Tensors lists every tensor in the order llama.cpp's converter visits
	// them: shard by shard in file-name order, by name within a shard.
	Tensors []*Tensor

	byName map[string]*Tensor
}

// Tensor returns the tensor called name, from whichever shard holds it.
func (c *Checkpoint) Tensor(name string) (*Tensor, bool) {
	t, ok := c.byName[name]
	return t, ok
}

// EvictRange releases the bytes [from, to) of t's data from the resident
// set (File.EvictRange).
func (c *Checkpoint) EvictRange(t *Tensor, from, to int64) error {
	for _, f := range c.Files {
		if f.Path == t.Path {
			return f.EvictRange(t, from, to)
		}
	}
	return nil
}

// Close closes every shard.
func (c *Checkpoint) Close() error {
	var errs []error
	for _, f := range c.Files {
		errs = append(errs, f.Close())
	}
	c.Files = nil
	return errors.Join(errs...)
}

// OpenDir opens the safetensors checkpoint in dir. With a
// model.safetensors.index.json, the shards are the files its weight_map
// names, and every tensor must be in the shard the map says, with nothing
// missing or extra. Without one, the shards are the files called
// model*.safetensors.
func OpenDir(dir string) (*Checkpoint, error) {
	names, weightMap, err := shardNames(dir)
	if err != nil {
		return nil, err
	}
	c := &Checkpoint{Dir: dir, byName: map[string]*Tensor{}}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	for _, name := range names {
		f, err := Open(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		c.Files = append(c.Files, f)
		for _, t := range f.Tensors {
			if prev, dup := c.byName[t.Name]; dup {
				return nil, &FormatError{Path: t.Path, Tensor: t.Name, Msg: "also in " + prev.Path}
			}
			c.byName[t.Name] = t
			c.Tensors = append(c.Tensors, t)
		}
	}
	if weightMap != nil {
		index := filepath.Join(dir, IndexFile)
		for _, t := range c.Tensors {
			want, listed := weightMap[t.Name]
			if !listed {
				return nil, &FormatError{Path: t.Path, Tensor: t.Name, Msg: "not in the weight_map of " + index}
			}
			if filepath.Join(dir, want) != t.Path {
				return nil, &FormatError{Path: t.Path, Tensor: t.Name, Msg: fmt.Sprintf("%s puts it in %s", index, want)}
			}
		}
		missing := make([]string, 0)
		for name := range weightMap {
			if _, ok := c.byName[name]; !ok {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			slices.Sort(missing)
			return nil, &FormatError{Path: filepath.Join(dir, weightMap[missing[0]]), Tensor: missing[0],
				Msg: fmt.Sprintf("listed in %s but not in the file (%d tensors missing)", index, len(missing))}
		}
	}
	ok = true
	return c, nil
}

// shardNames returns the shard file names of dir, sorted, and the weight
// map when there is an index.
func shardNames(dir string) ([]string, map[string]string, error) {
	index := filepath.Join(dir, IndexFile)
	b, err := os.ReadFile(index)
	if err == nil {
		var idx struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(b, &idx); err != nil {
			return nil, nil, &FormatError{Path: index, Msg: fmt.Sprintf("bad JSON: %v", err)}
		}
		if idx.WeightMap == nil {
			return nil, nil, &FormatError{Path: index, Msg: "no weight_map"}
		}
		set := map[string]bool{}
		for tensor, file := range idx.WeightMap {
			if file == "" || filepath.Base(file) != file {
				return nil, nil, &FormatError{Path: index, Tensor: tensor, Msg: fmt.Sprintf("shard %q is not a file name in the directory", file)}
			}
			set[file] = true
		}
		names := make([]string, 0, len(set))
		for n := range set {
			names = append(names, n)
		}
		slices.Sort(names)
		return names, idx.WeightMap, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("safetensors: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("safetensors: %w", err)
	}
	var names []string
	for _, e := range entries {
		if n := e.Name(); strings.HasPrefix(n, "model") && strings.HasSuffix(n, ".safetensors") {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return nil, nil, &FormatError{Path: dir, Msg: "no model*.safetensors file and no " + IndexFile}
	}
	slices.Sort(names)
	return names, nil, nil
}
