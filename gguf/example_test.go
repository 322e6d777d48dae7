package gguf_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/glmrun/glmrun/gguf"
)

func ExampleOpen() {
	f, err := gguf.Open("../testdata/models/glm5-mini.Q8_0.gguf")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	layers, err := f.Uint(f.Architecture() + ".block_count")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(f.Architecture(), len(f.Tensors), "tensors,", layers, "layers")
	t, _ := f.Tensor("blk.0.attn_q_a.weight")
	fmt.Println(t.Name, t.Type, t.Dims, len(t.Data), "bytes")
	// Output:
	// glm-dsa 67 tensors, 3 layers
	// blk.0.attn_q_a.weight Q8_0 [256 256] 69632 bytes
}

func ExampleNewWriterFrom() {
	f, err := gguf.Open("../testdata/models/glm5-mini.Q8_0.gguf")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	// A copy with one key changed and one tensor dropped.
	w := gguf.NewWriterFrom(f)
	w.SetKV("general.name", gguf.String("glm5-mini-edited"))
	w.RemoveTensor("output.weight")
	dir, err := os.MkdirTemp("", "gguf-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "edited.gguf")
	if err := w.WriteFile(path); err != nil {
		log.Fatal(err)
	}
	g, err := gguf.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()
	name, _ := g.String("general.name")
	fmt.Println(name, len(g.Tensors))
	// Output: glm5-mini-edited 66
}
