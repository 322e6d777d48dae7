package tokenizer_test

import (
	"fmt"
	"log"

	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/model/tokenizer"
)

// Tokenize a chat turn with the bundled glm5-mini model's vocabulary and
// stream the ids back to text.
func Example() {
	f, err := gguf.Open("../../testdata/models/glm5-mini.Q8_0.gguf")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	tok, err := tokenizer.New(f)
	if err != nil {
		log.Fatal(err)
	}

	ids := tok.Encode("<|user|>Hi! 🚀", true, true)
	fmt.Println(ids)
	fmt.Println(tok.IsEOG(tok.EOT()), tok.Text(ids[0]))

	d := tok.NewDecoder(false) // control tokens are not shown
	for _, id := range ids {
		s, err := d.Add(id)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%q ", s)
	}
	fmt.Printf("%q\n", d.Flush())
	// Output:
	// [963 39 72 0 220 172 253 248 222]
	// true <|user|>
	// "" "H" "i" "!" " " "" "" "" "🚀" ""
}
