package glmrun_test

import (
	"context"
	"fmt"
	"log"
	"sync"

	"github.com/glmrun/glmrun"
	"github.com/glmrun/glmrun/model/sample"
)

// The bundled test model has random weights: its text is gibberish, so the
// examples print token ids and stop reasons.
const bundled = "testdata/models/glm5-mini.Q8_0.gguf"

// Example_chat is the README's library example (TestReadmeExample keeps
// the two equal): load a model, start a session and stream a chat reply.
// The path is the bundled model's, from the repository's root.
func Example_chat() {
	ctx := context.Background()
	m, err := glmrun.Load("testdata/models/glm5-mini.Q8_0.gguf", glmrun.Options{ContextSize: 4096})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	s, err := m.NewSession(glmrun.SessionOptions{}) // one per conversation; sessions may run concurrently
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	msgs := []glmrun.Message{{Role: "user", Content: "Hi!"}}
	opts := glmrun.ChatOptions{
		GenerateOptions: glmrun.GenerateOptions{SampleOptions: glmrun.DefaultSampleOptions(42), MaxTokens: 64},
		NoThinking:      true,
	}
	for tok, err := range s.Chat(ctx, msgs, opts) { // or s.Prompt(text), then s.Generate(ctx, opts.GenerateOptions)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Print(tok.Text)
	}
	st := s.Stats()
	fmt.Printf("\n%d tokens, stopped by %s\n", st.Generated, st.Stop)
}

// Example loads a model, gives a prompt and streams a greedy continuation.
func Example() {
	m, err := glmrun.Load(bundled, glmrun.Options{ContextSize: 256})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	s, err := m.NewSession(glmrun.SessionOptions{})
	if err != nil {
		log.Fatal(err)
	}
	if err := s.Prompt("1 2 3 4 5 6 7 8 9 10"); err != nil {
		log.Fatal(err)
	}
	var ids []int32
	for tok, err := range s.Generate(context.Background(), glmrun.GenerateOptions{MaxTokens: 8}) {
		if err != nil {
			log.Fatal(err)
		}
		ids = append(ids, tok.ID) // tok.Text is the text to show
	}
	st := s.Stats()
	fmt.Println(ids, st.PromptTokens, st.Generated, st.Stop)
	// Output: [113 854 926 808 705 306 223 887] 20 8 length
}

// ExampleSession_Chat holds a two-turn conversation; the second turn runs
// only its new tokens through the model.
func ExampleSession_Chat() {
	m, err := glmrun.Load(bundled, glmrun.Options{ContextSize: 256})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	s, err := m.NewSession(glmrun.SessionOptions{})
	if err != nil {
		log.Fatal(err)
	}
	opts := glmrun.ChatOptions{
		GenerateOptions: glmrun.GenerateOptions{SampleOptions: sample.DefaultOptions(42), MaxTokens: 6},
		NoThinking:      true,
	}
	msgs := []glmrun.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi"}}
	for range 2 {
		reply := ""
		for tok, err := range s.Chat(context.Background(), msgs, opts) {
			if err != nil {
				log.Fatal(err)
			}
			reply += tok.Text
		}
		msgs = append(msgs, glmrun.Message{Role: "assistant", Content: reply}, glmrun.Message{Role: "user", Content: "More"})
		fmt.Println(s.Stats().Generated, s.Stats().Stop)
	}
	prompt, err := m.RenderChat(msgs[:2], opts)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q\n", prompt)
	// Output:
	// 6 length
	// 6 length
	// "[gMASK]<sop><|system|>Be brief.<|user|>Hi<|assistant|></think>"
}

// ExampleModel_NewSession generates from several sessions of one model at
// the same time.
func ExampleModel_NewSession() {
	m, err := glmrun.Load(bundled, glmrun.Options{ContextSize: 64})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	prompts := []string{"1 2 3", "<|user|>Hi<|assistant|>", "a b c"}
	counts := make([]int, len(prompts))
	var wg sync.WaitGroup
	for i, p := range prompts {
		wg.Go(func() {
			s, err := m.NewSession(glmrun.SessionOptions{})
			if err != nil {
				log.Fatal(err)
			}
			if err := s.Prompt(p); err != nil {
				log.Fatal(err)
			}
			for _, err := range s.Generate(context.Background(), glmrun.GenerateOptions{MaxTokens: 4, IgnoreEOS: true}) {
				if err != nil {
					log.Fatal(err)
				}
				counts[i]++
			}
		})
	}
	wg.Wait()
	fmt.Println(counts)
	// Output: [4 4 4]
}
