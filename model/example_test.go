package model_test

import (
	"fmt"
	"log"

	_ "github.com/glmrun/glmrun/backend/cpu" // registers the "cpu" backend
	"github.com/glmrun/glmrun/model"
)

func argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

// Example prefills a prompt and then decodes a few greedy tokens.
func Example() {
	m, err := model.Load("../testdata/models/glm5-mini.Q8_0.gguf", model.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	s, err := m.NewSession(model.SessionOptions{ContextSize: 64})
	if err != nil {
		log.Fatal(err)
	}
	rows, err := s.Prefill([]int32{16, 220, 17, 220, 18})
	if err != nil {
		log.Fatal(err)
	}
	next := argmax(rows[len(rows)-1])
	var out []int32
	for range 4 {
		out = append(out, next)
		logits, err := s.Decode(next)
		if err != nil {
			log.Fatal(err)
		}
		next = argmax(logits)
	}
	fmt.Println(m.Config().Arch, len(rows), len(rows[0]), out, s.Pos())
	// Output: glm-dsa 5 1024 [656 232 173 297] 9
}

// ExampleSessionOptions_hook collects the residual stream after each layer.
func ExampleSessionOptions_hook() {
	m, err := model.Load("../testdata/models/ds2-mini.Q8_0.gguf", model.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	hook := func(name string, layer int, shape []int, data []float32) {
		if layer >= 0 && name == fmt.Sprintf("blk.%d.out", layer) {
			fmt.Println(name, shape)
		}
	}
	s, err := m.NewSession(model.SessionOptions{Hook: hook})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := s.Prefill([]int32{16, 220, 17}); err != nil {
		log.Fatal(err)
	}
	// Output:
	// blk.0.out [3 256]
	// blk.1.out [3 256]
	// blk.2.out [3 256]
}
