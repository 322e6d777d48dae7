package glmrun

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/model/grammar"
)

// TestGenerateGrammar: a grammar limits what the (untrained) test model
// writes, greedy and sampled: the text is always one of the grammar's
// sentences, or a prefix of one when the length limit cuts it, and the
// generation ends with StopGrammar once it is complete.
func TestGenerateGrammar(t *testing.T) {
	if raceEnabled {
		t.Skip("one goroutine, and minutes under the race detector")
	}
	m := testModel(t, mini)
	for _, tc := range []struct {
		name, src string
		valid     func(string) bool
	}{
		{"choice", `root ::= "yes" | "no" | "maybe so"`, func(s string) bool { return s == "yes" || s == "no" || s == "maybe so" }},
		{"json", grammar.JSONGrammar, func(s string) bool {
			var v map[string]any
			return json.Unmarshal([]byte(s), &v) == nil
		}},
		{"digits", `root ::= [1-9] [0-9]{0,5} "!"`, func(s string) bool {
			return len(s) >= 2 && len(s) <= 7 && strings.HasSuffix(s, "!") && strings.Trim(s[:len(s)-1], "0123456789") == ""
		}},
	} {
		g, err := grammar.Parse(tc.src)
		if err != nil {
			t.Fatal(err)
		}
		for seed := uint64(0); seed < 4; seed++ {
			opts := GenerateOptions{Grammar: g, MaxTokens: 400}
			if seed > 0 {
				opts.SampleOptions = DefaultSampleOptions(seed)
				opts.Temperature = 1.5
			}
			s := newSession(t, m, 512)
			if err := s.PromptTokens(p1); err != nil {
				t.Fatal(err)
			}
			var text strings.Builder
			var last Token
			for tok, err := range s.Generate(context.Background(), opts) {
				if err != nil {
					t.Fatalf("%s seed %d: %v", tc.name, seed, err)
				}
				text.WriteString(tok.Text)
				last = tok
			}
			switch last.Stop {
			case StopGrammar:
				if !tc.valid(text.String()) {
					t.Errorf("%s seed %d: complete, but %q is not a sentence", tc.name, seed, text.String())
				}
			case StopLength:
				// Cut short: the text is a prefix of a sentence, which the
				// matcher accepted token by token.
			default:
				t.Errorf("%s seed %d: ended with %q after %q", tc.name, seed, last.Stop, text.String())
			}
			if tc.name != "json" && last.Stop != StopGrammar {
				t.Errorf("%s seed %d: a short grammar did not complete: %q (%s)", tc.name, seed, text.String(), last.Stop)
			}
		}
	}
}
