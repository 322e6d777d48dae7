package convert

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/safetensors"
)

// hfDir is the folder of the test checkpoints and their references.
const hfDir = "../testdata/hf"

// copyCheckpoint copies the checkpoint hfDir/base into a new directory
// called name (the name shows in general.name) and returns its path.
func copyCheckpoint(t *testing.T, base, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(hfDir, base))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(hfDir, base, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// loadTensors returns the tensors of dir/model.safetensors with their data
// copied out of the mapping.
func loadTensors(t *testing.T, dir string) map[string]*safetensors.Tensor {
	t.Helper()
	f, err := safetensors.Open(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := map[string]*safetensors.Tensor{}
	for _, tt := range f.Tensors {
		c := *tt
		c.Data = bytes.Clone(tt.Data)
		c.Shape = slices.Clone(tt.Shape)
		m[tt.Name] = &c
	}
	return m
}

// writeTensors writes tensors (in name order) to path.
func writeTensors(t *testing.T, path string, tensors map[string]*safetensors.Tensor) {
	t.Helper()
	var list []*safetensors.Tensor
	for _, k := range slices.Sorted(maps.Keys(tensors)) {
		list = append(list, tensors[k])
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := safetensors.Write(f, map[string]string{"format": "pt"}, list); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// editConfig sets keys of dir/config.json (values as JSON text).
func editConfig(t *testing.T, dir string, kv map[string]string) {
	t.Helper()
	path := filepath.Join(dir, "config.json")
	m, err := readJSON(path, false)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range kv {
		if v == "" {
			delete(m, k)
			continue
		}
		var x any
		dec := json.NewDecoder(strings.NewReader(v))
		dec.UseNumber()
		if err := dec.Decode(&x); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		m[k] = x
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// addMTPLayer appends NextN block `trunk` to tensors: a copy of the last
// trunk layer's tensors plus eh_proj, enorm, hnorm and shared_head.norm
// taken from tensors of the same shapes (tools/hf_refs.py does the same).
func addMTPLayer(tensors map[string]*safetensors.Tensor, trunk int) {
	last := "model.layers." + strconv.Itoa(trunk-1) + "."
	mtp := "model.layers." + strconv.Itoa(trunk) + "."
	for _, k := range slices.Sorted(maps.Keys(tensors)) {
		if rest, ok := strings.CutPrefix(k, last); ok {
			c := *tensors[k]
			c.Name = mtp + rest
			tensors[c.Name] = &c
		}
	}
	for dst, src := range map[string]string{
		"eh_proj.weight":          "model.layers.0.mlp.down_proj.weight",
		"enorm.weight":            "model.layers.0.input_layernorm.weight",
		"hnorm.weight":            "model.layers.0.post_attention_layernorm.weight",
		"shared_head.norm.weight": "model.norm.weight",
	} {
		c := *tensors[src]
		c.Name = mtp + dst
		tensors[c.Name] = &c
	}
}

// derivedCheckpoint builds one of the checkpoints tools/hf_refs.py derives
// from testdata/hf (see there) and returns its directory.
func derivedCheckpoint(t *testing.T, name string) string {
	t.Helper()
	switch name {
	case "glm5-mtps":
		dir := copyCheckpoint(t, "glm5-hfs", name)
		ts := loadTensors(t, dir)
		addMTPLayer(ts, 4)
		writeTensors(t, filepath.Join(dir, "model.safetensors"), ts)
		editConfig(t, dir, map[string]string{"num_nextn_predict_layers": "1"})
		return dir
	case "glm5-shards":
		dir := copyCheckpoint(t, "glm5-hfs", name)
		ts := loadTensors(t, dir)
		os.Remove(filepath.Join(dir, "model.safetensors"))
		names := slices.Sorted(maps.Keys(ts))
		weightMap := map[string]string{}
		for i := range 3 {
			file := "model-0000" + strconv.Itoa(i+1) + "-of-00003.safetensors"
			part := map[string]*safetensors.Tensor{}
			for j, n := range names {
				if j%3 == i {
					part[n] = ts[n]
					weightMap[n] = file
				}
			}
			writeTensors(t, filepath.Join(dir, file), part)
		}
		b, _ := json.Marshal(map[string]any{"metadata": map[string]any{}, "weight_map": weightMap})
		if err := os.WriteFile(filepath.Join(dir, safetensors.IndexFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	case "ds3s":
		dir := copyCheckpoint(t, "flash-hfs", name)
		ts := loadTensors(t, dir)
		addMTPLayer(ts, 4)
		writeTensors(t, filepath.Join(dir, "model.safetensors"), ts)
		editConfig(t, dir, map[string]string{"architectures": `["DeepseekV3ForCausalLM"]`, "model_type": `"deepseek_v3"`,
			"num_nextn_predict_layers": "1"})
		return dir
	}
	return filepath.Join(hfDir, name)
}
