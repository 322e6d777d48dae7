package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestForcedToolCallGrammar samples replies of the untrained test model
// with tool_choice forcing a call: whatever the weights, the forced call's
// grammar lets through only calls of the declared functions with their
// declared arguments, values of the declared types, and nothing else.
func TestForcedToolCallGrammar(t *testing.T) {
	ts := newTestServer(t, nil, nil)
	const tools = `[{"type": "function", "function": {"name": "set_alarm", "parameters": {"type": "object", "properties": {"hour": {"type": "integer"}, "loud": {"type": "boolean"}, "label": {"type": "string"}}}}},
		{"type": "function", "function": {"name": "ping", "parameters": {"type": "object", "properties": {}}}}]`
	for _, tc := range []struct{ name, choice string }{
		{"required", `"required"`},
		{"named", `{"type": "function", "function": {"name": "set_alarm"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			finished := 0
			for seed := 1; seed <= 12; seed++ {
				body := fmt.Sprintf(`{"messages": [{"role": "user", "content": "Wake me at 7"}], "tools": %s, "tool_choice": %s, "max_tokens": 160, "temperature": 1, "seed": %d}`, tools, tc.choice, seed)
				var r chatCompletion
				postInto(t, ts, "/v1/chat/completions", body, &r)
				ch := r.Choices[0]
				m := ch.Message
				if *ch.FinishReason == "length" {
					continue // a call cut short comes back as text
				}
				finished++
				if *ch.FinishReason != "tool_calls" || len(m.ToolCalls) == 0 {
					t.Fatalf("seed %d: finish %q with %d tool calls, want tool_calls", seed, *ch.FinishReason, len(m.ToolCalls))
				}
				if m.Content != nil && strings.TrimSpace(*m.Content) != "" {
					t.Errorf("seed %d: content %q beside the calls", seed, *m.Content)
				}
				for i, c := range m.ToolCalls {
					if tc.name == "named" && i == 0 && c.Function.Name != "set_alarm" {
						t.Errorf("seed %d: first call of %q, want set_alarm", seed, c.Function.Name)
					}
					var args map[string]any
					if err := json.Unmarshal([]byte(c.Function.Arguments), &args); err != nil {
						t.Fatalf("seed %d: arguments %s: %v", seed, c.Function.Arguments, err)
					}
					switch c.Function.Name {
					case "ping":
						if len(args) != 0 {
							t.Errorf("seed %d: ping with arguments %s", seed, c.Function.Arguments)
						}
					case "set_alarm":
						for k, v := range args {
							ok := false
							switch k {
							case "hour":
								f, isNum := v.(float64)
								ok = isNum && f == float64(int64(f))
							case "loud":
								_, ok = v.(bool)
							case "label":
								_, ok = v.(string)
							}
							if !ok {
								t.Errorf("seed %d: set_alarm argument %s = %#v", seed, k, v)
							}
						}
					default:
						t.Errorf("seed %d: call of an undeclared function %q", seed, c.Function.Name)
					}
				}
			}
			t.Logf("%d of 12 replies ended within max_tokens", finished)
			if finished == 0 {
				t.Error("no reply ended within max_tokens: the test checked no complete call")
			}
		})
	}
}

// TestForcedCallGrammarText pins the grammar's shape for one tool set.
func TestForcedCallGrammarText(t *testing.T) {
	ts := newTestServer(t, nil, nil)
	tools := []json.RawMessage{json.RawMessage(`{"type": "function", "function": {"name": "f", "parameters": {"properties": {"n": {"type": "integer"}, "s": {}}}}}`)}
	g, err := ts.s.forcedCallGrammar(tools, "f")
	if err != nil || g == nil {
		t.Fatalf("forcedCallGrammar = %v, %v", g, err)
	}
	if _, err := ts.s.forcedCallGrammar(tools, "g"); err == nil || !strings.Contains(err.Error(), `"g"`) {
		t.Errorf("an undeclared forced name: %v", err)
	}
}
