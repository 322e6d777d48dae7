package server

import (
	"encoding/json"
	"fmt"
	"testing"
)

// parseAll feeds text to a parser in pieces of n bytes (0: whole) and
// returns the joined result.
func parseAll(thinking bool, tools []json.RawMessage, text string, n int) replyDelta {
	ids := 0
	p := newReplyParser(thinking, tools, func() string { ids++; return fmt.Sprintf("call_%d", ids) })
	var out replyDelta
	add := func(d replyDelta) {
		out.reasoning += d.reasoning
		out.content += d.content
		out.calls = append(out.calls, d.calls...)
	}
	if n == 0 {
		n = len(text)
	}
	for i := 0; i < len(text); i += n {
		add(p.add(text[i:min(i+n, len(text))]))
	}
	add(p.flush())
	return out
}

func TestReplyParser(t *testing.T) {
	tools := []json.RawMessage{json.RawMessage(`{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
		"properties": {"s": {"type": "string"}, "n": {"type": "number"}, "o": {"type": "object"}}}}}`)}
	type c = toolCall
	fn := func(id, name, args string) toolCall {
		return c{ID: id, Type: "function", Function: functionCall{Name: name, Arguments: args}}
	}
	// mk is the scheduler's marker of a markup control token.
	mk := func(tag string) string { return string([]byte{markerOf(tag)}) }
	think, thinkEnd, call, callEnd := mk(tagThink), mk(tagThinkEnd), mk(tagToolCall), mk(tagToolCallEnd)
	key, keyEnd, val, valEnd := mk(tagArgKey), mk(tagArgKeyEnd), mk(tagArgValue), mk(tagArgValueEnd)
	for _, tc := range []struct {
		name      string
		thinking  bool
		tools     bool
		text      string
		reasoning string
		content   string
		calls     []toolCall
	}{
		{"plain", false, false, "Hello <b>there</b>", "", "Hello <b>there</b>", nil},
		{"reasoning", true, false, "a < b</think>so b", "a < b", "so b", nil},
		{"reopened think", true, false, "\n<think>x</think>y", "x", "y", nil},
		{"think tag later is text", true, false, "x<think>y</think>z", "x<think>y", "z", nil},
		{"unclosed reasoning", true, false, "still </thi", "still </thi", "", nil},
		{"partial tag at end", false, true, "see <tool_c", "", "see <tool_c", nil},
		{"no tools: markup is text", false, false, "<tool_call>f</tool_call>", "", "<tool_call>f</tool_call>", nil},
		{"call without args", false, true, "<tool_call>f</tool_call>", "", "", []toolCall{fn("call_1", "f", "{}")}},
		{"typed args", false, true,
			"<tool_call>f\n<arg_key>s</arg_key>\n<arg_value>12</arg_value>\n<arg_key>n</arg_key><arg_value> 1.5 </arg_value>" +
				"<arg_key>o</arg_key><arg_value>{\"a\": [1, \"<x>\"]}</arg_value><arg_key>u</arg_key><arg_value>plain text</arg_value></tool_call>",
			"", "", []toolCall{fn("call_1", "f", `{"s":"12","n":1.5,"o":{"a":[1,"<x>"]},"u":"plain text"}`)}},
		{"unknown function", false, true, "<tool_call>g<arg_key>k</arg_key><arg_value>true</arg_value></tool_call>",
			"", "", []toolCall{fn("call_1", "g", `{"k":true}`)}},
		{"text around calls", true, true, "hm</think>Let me look.\n<tool_call>f</tool_call>\n<tool_call>f<arg_key>n</arg_key><arg_value>2</arg_value></tool_call>\n",
			"hm", "Let me look.\n", []toolCall{fn("call_1", "f", "{}"), fn("call_2", "f", `{"n":2}`)}},
		{"unclosed call", false, true, "x<tool_call>f<arg_key>a", "", "x<tool_call>f<arg_key>a", nil},
		{"malformed call", false, true, "<tool_call>f<arg_value>1</arg_value></tool_call>", "", "<tool_call>f<arg_value>1</arg_value></tool_call>", nil},
		{"no name", false, true, "<tool_call><arg_key>a</arg_key><arg_value>1</arg_value></tool_call>", "",
			"<tool_call><arg_key>a</arg_key><arg_value>1</arg_value></tool_call>", nil},
		{"leading think without thinking", false, false, "\n<think>x</think>y", "x", "y", nil},
		{"leading text is not think", false, false, "<thin", "", "<thin", nil},

		// Control tokens arrive as markers: consumed as markup, dropped
		// where they are not.
		{"marker reasoning", true, false, "a < b" + thinkEnd + "so b", "a < b", "so b", nil},
		{"marker reopened think", true, false, "\n" + think + "x" + thinkEnd + "y", "x", "y", nil},
		{"marker think without thinking", false, false, think + "x" + thinkEnd + "y", "x", "y", nil},
		{"stray markers", true, false, "a" + think + "b" + call + thinkEnd + "c" + thinkEnd + valEnd + "d", "ab", "cd", nil},
		{"unclosed marker reasoning", true, false, "still" + key, "still", "", nil},
		{"markers without tools", false, false, call + "f" + key + "k" + keyEnd + callEnd, "", "fk", nil},
		{"marker call", true, true, "hm" + thinkEnd + "Look.\n" + call + "f\n" + key + "n" + keyEnd + val + "2" + valEnd + callEnd + "\n",
			"hm", "Look.\n", []toolCall{fn("call_1", "f", `{"n":2}`)}},
		{"marker and text tags mixed", false, true, call + "f<arg_key>s</arg_key>" + val + "<b>" + valEnd + "</tool_call>",
			"", "", []toolCall{fn("call_1", "f", `{"s":"<b>"}`)}},
		{"malformed marker call", false, true, "x" + call + "f" + val + "1" + valEnd + callEnd + "y", "", "xf1y", nil},
		{"unclosed marker call", false, true, "x" + call + "f" + key + "a", "", "xfa", nil},
		{"markers around calls", false, true, call + "f" + callEnd + "\n" + thinkEnd + "\n" + call + "f" + callEnd, "", "",
			[]toolCall{fn("call_1", "f", "{}"), fn("call_2", "f", "{}")}},
		{"replacement characters stay", true, false, "\uFFFD" + thinkEnd + "\uFFFD", "\uFFFD", "\uFFFD", nil},
	} {
		for _, n := range []int{0, 1, 2, 3, 5, 7} {
			t.Run(fmt.Sprintf("%s/%d", tc.name, n), func(t *testing.T) {
				var tl []json.RawMessage
				if tc.tools {
					tl = tools
				}
				got := parseAll(tc.thinking, tl, tc.text, n)
				if got.reasoning != tc.reasoning || got.content != tc.content || fmt.Sprint(got.calls) != fmt.Sprint(tc.calls) {
					t.Fatalf("got reasoning %q content %q calls %v\nwant reasoning %q content %q calls %v",
						got.reasoning, got.content, got.calls, tc.reasoning, tc.content, tc.calls)
				}
			})
		}
	}
}
