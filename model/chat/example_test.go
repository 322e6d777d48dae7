package chat_test

import (
	"fmt"

	"github.com/glmrun/glmrun/model/chat"
)

func ExampleTemplate_Render() {
	// A GGUF's tokenizer.chat_template would go through chat.Parse; GLM5 is
	// the built-in format for files without one.
	tmpl := chat.GLM5()
	prompt, err := tmpl.Render([]chat.Message{
		{Role: chat.RoleSystem, Content: "Be brief."},
		{Role: chat.RoleUser, Content: "What is 2+2?"},
	}, chat.Options{AddGenerationPrompt: true, NoThinking: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(prompt)
	// Output: [gMASK]<sop><|system|>Be brief.<|user|>What is 2+2?<|assistant|></think>
}
