package sample_test

import (
	"fmt"

	"github.com/glmrun/glmrun/model/sample"
)

func ExampleSampler() {
	logits := []float32{0.5, 2.5, 1.0, -1.0}             // one row of model output
	s, err := sample.New(sample.Options{Temperature: 0}) // greedy
	if err != nil {
		fmt.Println(err)
		return
	}
	id, err := s.Sample(logits)
	if err != nil {
		fmt.Println(err)
		return
	}
	s.Accept(id) // record it for the repetition penalties
	lp, err := s.Logprobs(logits, id, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("token %d logprob %.3f; best: %d %.3f, %d %.3f\n",
		id, lp.Chosen.Logprob, lp.Top[0].ID, lp.Top[0].Logprob, lp.Top[1].ID, lp.Top[1].Logprob)
	// Output: token 1 logprob -0.328; best: 1 -0.328, 2 -1.828
}
