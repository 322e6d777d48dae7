package server

// These tests drive /v1/messages with Anthropic's official Go client
// (github.com/anthropics/anthropic-sdk-go/v2, a test-only dependency: no
// package outside the tests imports it), so that what they check is what
// real Anthropic clients parse: the response schema, the stream's events
// and the client's stream accumulator, its errors.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
)

// anthropicClient is an Anthropic client of ts that sends key (none when
// empty). It reads nothing from the environment (ANTHROPIC_API_KEY,
// ANTHROPIC_BASE_URL), so the tests do not depend on the machine.
func anthropicClient(ts *testServer, key string) anthropic.Client {
	opts := []option.RequestOption{option.WithoutEnvironmentDefaults(), option.WithBaseURL(ts.url + "/"), option.WithMaxRetries(0)}
	if key != "" {
		opts = append(opts, option.WithAPIKey(key))
	}
	return anthropic.NewClient(opts...)
}

// block is a content block as a client sees it.
type block struct {
	typ, text, id, name, input string
}

// msgReply is a Messages reply as a client sees it.
type msgReply struct {
	id           string
	blocks       []block
	stopReason   string
	stopSequence string
	usage        anthropic.Usage
}

func replyOf(t testing.TB, m *anthropic.Message) msgReply {
	t.Helper()
	if m.Type != "message" || m.Role != "assistant" || string(m.Model) != testModelID || !strings.HasPrefix(m.ID, "msg_") {
		t.Fatalf("message header: %s", m.RawJSON())
	}
	r := msgReply{id: m.ID, stopReason: string(m.StopReason), stopSequence: m.StopSequence, usage: m.Usage}
	for _, c := range m.Content {
		b := block{typ: c.Type}
		switch c.Type {
		case "text":
			b.text = c.Text
		case "thinking":
			b.text = c.Thinking
		case "tool_use":
			b.id, b.name, b.input = c.ID, c.Name, string(c.Input)
			if !strings.HasPrefix(c.ID, "toolu_") {
				t.Fatalf("tool_use id %q does not start with toolu_", c.ID)
			}
		default:
			t.Fatalf("unexpected block type %q: %s", c.Type, m.RawJSON())
		}
		r.blocks = append(r.blocks, b)
	}
	return r
}

// usageString shows the counts of u (its JSON field holds the raw
// message_start usage after a stream's accumulation).
func usageString(u anthropic.Usage) string {
	return fmt.Sprintf("{input %d, cache read %d, cache creation %d, output %d}",
		u.InputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens, u.OutputTokens)
}

func messageOnce(t testing.TB, c anthropic.Client, p anthropic.MessageNewParams) msgReply {
	t.Helper()
	m, err := c.Messages.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return replyOf(t, m)
}

// messageStream streams p and reassembles the message with the client's
// accumulator.
func messageStream(t testing.TB, c anthropic.Client, p anthropic.MessageNewParams) msgReply {
	t.Helper()
	s := c.Messages.NewStreaming(context.Background(), p)
	defer s.Close()
	var m anthropic.Message
	for s.Next() {
		if err := m.Accumulate(s.Current()); err != nil {
			t.Fatalf("accumulating the stream: %v", err)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return replyOf(t, &m)
}

// sseEvent is one event of a raw Anthropic stream.
type sseEvent struct {
	name string
	data map[string]any
}

// readEvents reads a raw stream's events ("event: NAME\ndata: JSON").
func readEvents(t testing.TB, body io.Reader, each func(sseEvent) bool) []sseEvent {
	t.Helper()
	var out []sseEvent
	sc := bufio.NewScanner(body)
	sc.Buffer(nil, 1<<20)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.name == "" {
				t.Fatalf("an event without a name after %d events", len(out))
			}
			out = append(out, ev)
			if each != nil && !each(ev) {
				return out
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.data); err != nil {
				t.Fatalf("event %s: data is not JSON: %q", ev.name, line)
			}
		default:
			t.Fatalf("unexpected stream line %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// rawStream posts p with stream: true and returns the raw events.
func rawStream(t testing.TB, ts *testServer, p anthropic.MessageNewParams) []sseEvent {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatal(err)
	}
	body["stream"] = true
	b, _ = json.Marshal(body)
	resp, err := http.Post(ts.url+"/v1/messages", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("status %d, Content-Type %q", resp.StatusCode, ct)
	}
	return readEvents(t, resp.Body, nil)
}

// checkEventOrder checks a stream's events against Anthropic's sequence:
// message_start, then a ping, then each block's content_block_start,
// content_block_delta events of its kind and content_block_stop, indexed
// 0, 1, ... in order, then message_delta and message_stop; pings may come
// anywhere after message_start. It returns the blocks' types.
func checkEventOrder(t testing.TB, evs []sseEvent) []string {
	t.Helper()
	var names []string
	for _, e := range evs {
		names = append(names, e.name)
		if typ, _ := e.data["type"].(string); typ != e.name {
			t.Fatalf("event %s has data type %q", e.name, typ)
		}
	}
	if len(evs) < 4 || names[0] != "message_start" || names[1] != "ping" ||
		names[len(names)-2] != "message_delta" || names[len(names)-1] != "message_stop" {
		t.Fatalf("event sequence %v", names)
	}
	deltaFor := map[string]string{"text": "text_delta", "thinking": "thinking_delta", "tool_use": "input_json_delta"}
	var kinds []string
	open := -1
	for _, e := range evs[2 : len(evs)-2] {
		idx, _ := e.data["index"].(float64)
		switch e.name {
		case "ping":
		case "content_block_start":
			if open >= 0 || int(idx) != len(kinds) {
				t.Fatalf("content_block_start %v with block %d open, %d started: %v", idx, open, len(kinds), names)
			}
			cb, _ := e.data["content_block"].(map[string]any)
			typ, _ := cb["type"].(string)
			if deltaFor[typ] == "" {
				t.Fatalf("content block type %q", typ)
			}
			kinds = append(kinds, typ)
			open = int(idx)
		case "content_block_delta":
			d, _ := e.data["delta"].(map[string]any)
			if open < 0 || int(idx) != open || d["type"] != deltaFor[kinds[open]] {
				t.Fatalf("%v for block %v with block %d open (blocks %v)", d["type"], idx, open, kinds)
			}
		case "content_block_stop":
			if int(idx) != open {
				t.Fatalf("content_block_stop %v with block %d open", idx, open)
			}
			open = -1
		default:
			t.Fatalf("event %s inside the message: %v", e.name, names)
		}
	}
	if open >= 0 {
		t.Fatalf("block %d never stopped: %v", open, names)
	}
	return kinds
}

// bothMessages runs p whole, streamed through the client's accumulator and
// streamed raw, and checks that they agree.
func bothMessages(t *testing.T, ts *testServer, p anthropic.MessageNewParams) msgReply {
	t.Helper()
	c := anthropicClient(ts, "")
	whole := messageOnce(t, c, p)
	streamed := messageStream(t, c, p)
	strip := func(bs []block) []block {
		out := slices.Clone(bs)
		for i := range out {
			out[i].id = "" // each reply names its calls anew
		}
		return out
	}
	if !reflect.DeepEqual(strip(whole.blocks), strip(streamed.blocks)) || whole.stopReason != streamed.stopReason ||
		whole.stopSequence != streamed.stopSequence {
		t.Fatalf("whole and streamed replies differ:\nwhole    %+v %s %q\nstreamed %+v %s %q",
			whole.blocks, whole.stopReason, whole.stopSequence, streamed.blocks, streamed.stopReason, streamed.stopSequence)
	}
	// The second run may find the first's prompt in a slot's cache: the
	// split differs, the prompt's tokens do not.
	wu, su := whole.usage, streamed.usage
	if wu.InputTokens+wu.CacheReadInputTokens != su.InputTokens+su.CacheReadInputTokens || wu.OutputTokens != su.OutputTokens ||
		wu.CacheCreationInputTokens != 0 || su.CacheCreationInputTokens != 0 {
		t.Fatalf("usage: whole %s, streamed %s", usageString(wu), usageString(su))
	}
	var types []string
	for _, b := range whole.blocks {
		types = append(types, b.typ)
	}
	if kinds := checkEventOrder(t, rawStream(t, ts, p)); !slices.Equal(kinds, types) {
		t.Fatalf("raw stream blocks %v, whole reply %v", kinds, types)
	}
	return whole
}

func userParams(text string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model: anthropic.Model(testModelID), MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))},
	}
}

func anthropicWeatherTool() anthropic.ToolUnionParam {
	return anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
		Name: "get_weather", Description: anthropic.String("Weather forecast for a city"),
		InputSchema: anthropic.ToolInputSchemaParam{
			Properties: map[string]any{
				"city": map[string]any{"type": "string"},
				"days": map[string]any{"type": "integer"},
			},
			Required: []string{"city"},
		},
	}}
}

var (
	thinkingOn       = anthropic.ThinkingConfigParamOfEnabled(1024)
	thinkingOff      = anthropic.ThinkingConfigParamUnion{OfDisabled: &anthropic.ThinkingConfigDisabledParam{}}
	thinkingAdaptive = anthropic.ThinkingConfigParamUnion{OfAdaptive: &anthropic.ThinkingConfigAdaptiveParam{}}
)

// recorder is a script hook that records the prompts of the requests.
type recorder struct {
	mu      sync.Mutex
	prompts [][]int32
	emit    func([]int32) []int32
}

// script records p and returns what emit gives for it; emit runs under
// the lock, so it may keep state across requests.
func (r *recorder) script(p []int32) []int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prompts = append(r.prompts, p)
	return r.emit(p)
}

func (r *recorder) last(t testing.TB) []int32 {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.prompts) == 0 {
		t.Fatal("no request reached the model")
	}
	return r.prompts[len(r.prompts)-1]
}

// TestMessagesReply: what the model writes (scripted) comes back as
// thinking, text and tool_use blocks with the right stop reason, alike
// whole and streamed; the thinking switch shapes the prompt as
// enable_thinking does on the OpenAI side.
func TestMessagesReply(t *testing.T) {
	const call = "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>" +
		"<arg_key>days</arg_key><arg_value>3</arg_value></tool_call>"
	for _, tc := range []struct {
		name      string
		script    string
		end       string
		thinking  *anthropic.ThinkingConfigParamUnion
		tools     bool
		promptEnd string
		blocks    []block
		stop      string
	}{
		{"thinking on", "Let me add: 2+2.</think>The answer is 4.", "<|user|>", &thinkingOn, false, "<think>",
			[]block{{typ: "thinking", text: "Let me add: 2+2."}, {typ: "text", text: "The answer is 4."}}, "end_turn"},
		{"thinking by default", "Hmm.</think>Four.", "<|user|>", nil, false, "<think>",
			[]block{{typ: "thinking", text: "Hmm."}, {typ: "text", text: "Four."}}, "end_turn"},
		{"adaptive thinking", "Hmm.</think>Four.", "<|user|>", &thinkingAdaptive, false, "<think>",
			[]block{{typ: "thinking", text: "Hmm."}, {typ: "text", text: "Four."}}, "end_turn"},
		{"thinking off", "The answer is 4.", "<|user|>", &thinkingOff, false, "</think>",
			[]block{{typ: "text", text: "The answer is 4."}}, "end_turn"},
		{"unclosed thinking", "Still thinking", "<|user|>", &thinkingOn, false, "<think>",
			[]block{{typ: "thinking", text: "Still thinking"}}, "end_turn"},
		{"newline before the answer", "Hmm.</think>\nFour.", "<|user|>", nil, false, "<think>",
			[]block{{typ: "thinking", text: "Hmm."}, {typ: "text", text: "\nFour."}}, "end_turn"},
		{"tool use", "I need the weather.</think>\n" + call, "<|observation|>", nil, true, "<think>",
			[]block{{typ: "thinking", text: "I need the weather."},
				{typ: "tool_use", name: "get_weather", input: `{"city":"Paris","days":3}`}}, "tool_use"},
		{"text and two calls", "</think>Checking.\n" + call + "\n" + strings.Replace(call, "Paris", "Rome", 1), "<|observation|>",
			nil, true, "<think>",
			[]block{{typ: "text", text: "Checking.\n"},
				{typ: "tool_use", name: "get_weather", input: `{"city":"Paris","days":3}`},
				{typ: "tool_use", name: "get_weather", input: `{"city":"Rome","days":3}`}}, "tool_use"},
		// Without tools the markup is not parsed, and its control tokens
		// are not text, as on the OpenAI side.
		{"no tools", "</think>" + call, "<|observation|>", nil, false, "<think>",
			[]block{{typ: "text", text: "get_weathercityParisdays3"}}, "end_turn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := testModel(t).tok
			rec := &recorder{emit: scriptFor(tok, tc.script, tc.end)}
			ts := newTestServer(t, nil, rec.script)
			p := userParams("What is 2+2?")
			if tc.thinking != nil {
				p.Thinking = *tc.thinking
			}
			if tc.tools {
				p.Tools = []anthropic.ToolUnionParam{anthropicWeatherTool()}
			}
			r := bothMessages(t, ts, p)
			got := make([]block, len(r.blocks))
			for i, b := range r.blocks {
				got[i] = b
				got[i].id = ""
			}
			if !reflect.DeepEqual(got, tc.blocks) || r.stopReason != tc.stop || r.stopSequence != "" {
				t.Fatalf("blocks %+v, stop %q %q\nwant   %+v, stop %q", got, r.stopReason, r.stopSequence, tc.blocks, tc.stop)
			}
			if n := int64(len(rec.emit(nil))); r.usage.OutputTokens != n {
				t.Fatalf("output_tokens %d, want %d (the script and its end token)", r.usage.OutputTokens, n)
			}
			text, _ := tok.Decode(rec.last(t), true)
			if !strings.HasSuffix(text, "<|assistant|>"+tc.promptEnd) {
				t.Fatalf("prompt ends %q, want ...<|assistant|>%s", text[max(0, len(text)-30):], tc.promptEnd)
			}
			var input map[string]any
			for _, b := range r.blocks {
				if b.typ == "tool_use" && json.Unmarshal([]byte(b.input), &input) != nil {
					t.Fatalf("tool_use input %q is not a JSON object", b.input)
				}
			}
		})
	}
}

// TestMessagesSamePromptAsOpenAI: a conversation with a system prompt,
// reasoning, a tool call and its result renders to the same prompt
// tokens through /v1/messages as the equivalent OpenAI messages through
// /v1/chat/completions.
func TestMessagesSamePromptAsOpenAI(t *testing.T) {
	rec := &recorder{emit: scriptFor(testModel(t).tok, "</think>It is sunny.", "<|user|>")}
	ts := newTestServer(t, nil, rec.script)
	for _, tc := range []struct {
		name          string
		isError       bool
		result        string // the tool result as the OpenAI side sends it
		systemMessage bool   // the system prompt as a system message, not the top-level system
	}{
		{"result", false, `{"sky":"sunny"}`, false},
		{"error result", true, `Error: {"sky":"sunny"}`, false},
		{"system message", false, `{"sky":"sunny"}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			system := []anthropic.TextBlockParam{{Text: "You are terse. "}, {Text: "Answer in English."}}
			p := anthropic.MessageNewParams{
				Model: anthropic.Model(testModelID), MaxTokens: 16,
				Tools: []anthropic.ToolUnionParam{anthropicWeatherTool()},
				Messages: []anthropic.MessageParam{
					anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris?")),
					anthropic.NewAssistantMessage(anthropic.NewThinkingBlock("sig", "I need the weather."),
						anthropic.NewTextBlock("Checking."),
						anthropic.NewToolUseBlock("toolu_1", map[string]any{"city": "Paris"}, "get_weather")),
					anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_1", `{"sky":"sunny"}`, tc.isError),
						anthropic.NewTextBlock("And tomorrow?")),
				},
			}
			if tc.systemMessage {
				p.Messages = append([]anthropic.MessageParam{{OfSystem: &anthropic.SystemMessageParam{Content: system}}}, p.Messages...)
			} else {
				p.System = system
			}
			if r := messageOnce(t, anthropicClient(ts, ""), p); r.stopReason != "end_turn" || len(r.blocks) != 1 || r.blocks[0].text != "It is sunny." {
				t.Fatalf("reply %+v", r)
			}
			got := rec.last(t)

			asst := openai.ChatCompletionAssistantMessageParam{
				Content: openai.ChatCompletionAssistantMessageParamContentUnion{OfString: openai.String("Checking.")},
				ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: "toolu_1",
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: `{"city":"Paris"}`}},
				}},
			}
			asst.SetExtraFields(map[string]any{"reasoning_content": "I need the weather."})
			op := openai.ChatCompletionNewParams{Model: testModelID, MaxTokens: openai.Int(16),
				Messages: []openai.ChatCompletionMessageParamUnion{
					openai.SystemMessage("You are terse. Answer in English."),
					openai.UserMessage("Weather in Paris?"),
					{OfAssistant: &asst},
					openai.ToolMessage(tc.result, "toolu_1"),
					openai.UserMessage("And tomorrow?"),
				}}
			// The tool of anthropicWeatherTool in OpenAI's shape, keys in the
			// order the Anthropic client writes them (the template keeps it).
			op.SetExtraFields(map[string]any{"tools": json.RawMessage(`[{"type": "function", "function": {"name": "get_weather", ` +
				`"description": "Weather forecast for a city", "parameters": {"properties": {"city": {"type": "string"}, ` +
				`"days": {"type": "integer"}}, "required": ["city"], "type": "object"}}}]`)})
			chatOnce(t, ts, op)
			want := rec.last(t)
			if !slices.Equal(got, want) {
				g, _ := ts.tok.Decode(got, true)
				w, _ := ts.tok.Decode(want, true)
				t.Fatalf("prompts differ:\n/v1/messages         %q\n/v1/chat/completions %q", g, w)
			}
			text, _ := ts.tok.Decode(got, true)
			for _, part := range []string{"<tool_response>" + tc.result + "</tool_response>", "<arg_value>Paris</arg_value>", "I need the weather."} {
				if !strings.Contains(text, part) {
					t.Fatalf("the prompt has no %q: %q", part, text)
				}
			}
		})
	}
}

// TestMessagesToolRoundTrip: the client sends tools, gets a tool_use block
// with its input parsed, sends the call back with a tool_result, and the
// next prompt renders both.
func TestMessagesToolRoundTrip(t *testing.T) {
	tok := testModel(t).tok
	first := scriptFor(tok, "</think><tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>", "<|observation|>")
	second := scriptFor(tok, "</think>It is sunny.", "<|user|>")
	var calls int
	rec := &recorder{emit: func(p []int32) []int32 {
		calls++
		if calls == 1 {
			return first(p)
		}
		return second(p)
	}}
	ts := newTestServer(t, nil, rec.script)
	c := anthropicClient(ts, "")
	p := userParams("Weather in Paris?")
	p.Tools = []anthropic.ToolUnionParam{anthropicWeatherTool()}
	m, err := c.Messages.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if m.StopReason != anthropic.StopReasonToolUse || len(m.Content) != 1 {
		t.Fatalf("first reply: %s", m.RawJSON())
	}
	use := m.Content[0].AsToolUse()
	var input struct{ City string }
	if err := json.Unmarshal(use.Input, &input); err != nil || use.Name != "get_weather" || input.City != "Paris" {
		t.Fatalf("tool_use %s: input %+v (%v)", m.Content[0].RawJSON(), input, err)
	}
	p.Messages = append(p.Messages, m.ToParam(),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, "sunny, 24°C", false)))
	r := messageOnce(t, c, p)
	if r.stopReason != "end_turn" || len(r.blocks) != 1 || r.blocks[0].text != "It is sunny." {
		t.Fatalf("second reply: %+v", r)
	}
	text, _ := tok.Decode(rec.last(t), true)
	want := "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>" +
		"<|observation|><tool_response>sunny, 24°C</tool_response><|assistant|><think>"
	if !strings.HasSuffix(text, want) {
		t.Fatalf("second prompt ends %q, want ...%q", text[max(0, len(text)-len(want)-20):], want)
	}
}

// TestMessagesToolChoice: "any" and a named tool make the reply a tool
// call, as "required" and a named function do on the OpenAI side.
func TestMessagesToolChoice(t *testing.T) {
	tok := testModel(t).tok
	const args = "<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>"
	for _, tc := range []struct {
		name   string
		choice anthropic.ToolChoiceUnionParam
		prefix string // what the prompt must end with
		script string // what the model writes after it
	}{
		{"any", anthropic.ToolChoiceUnionParam{OfAny: &anthropic.ToolChoiceAnyParam{}}, "</think><tool_call>", "get_weather" + args},
		{"tool", anthropic.ToolChoiceParamOfTool("get_weather"), "</think><tool_call>get_weather", args},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{emit: scriptFor(tok, tc.script, "<|observation|>")}
			ts := newTestServer(t, nil, rec.script)
			p := userParams("Weather in Paris?")
			p.Tools = []anthropic.ToolUnionParam{anthropicWeatherTool()}
			p.ToolChoice = tc.choice
			r := bothMessages(t, ts, p)
			if r.stopReason != "tool_use" || len(r.blocks) != 1 || r.blocks[0].name != "get_weather" || r.blocks[0].input != `{"city":"Paris"}` {
				t.Fatalf("stop %q, blocks %+v: want one get_weather call", r.stopReason, r.blocks)
			}
			want := tok.Encode(tc.prefix, false, true)
			for _, pr := range rec.prompts {
				if len(pr) < len(want) || !slices.Equal(pr[len(pr)-len(want):], want) {
					t.Errorf("the prompt does not end with %q", tc.prefix)
				}
			}
		})
	}
}

// TestMessagesStop: stop_sequences end the reply with stop_reason
// stop_sequence and name the one that matched; max_tokens ends it with
// max_tokens.
func TestMessagesStop(t *testing.T) {
	for _, tc := range []struct {
		name      string
		stop      []string
		maxTokens int64
		text      string
		reason    string
		sequence  string
	}{
		{"one word", []string{"world"}, 64, "Hello ", "stop_sequence", "world"},
		{"earliest of several", []string{"Bye", "lo"}, 64, "Hel", "stop_sequence", "lo"},
		{"never", []string{"zebra"}, 64, "Hello world. Bye", "end_turn", ""},
		{"max_tokens", nil, 2, "", "max_tokens", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := testModel(t).tok
			ts := newTestServer(t, nil, scriptFor(tok, "Hello world. Bye", "<|user|>"))
			p := userParams("Hi")
			p.Thinking = thinkingOff
			p.StopSequences, p.MaxTokens = tc.stop, tc.maxTokens
			r := bothMessages(t, ts, p)
			want := tc.text
			if tc.reason == "max_tokens" {
				// The first max_tokens tokens of the script.
				want, _ = tok.Decode(tok.Encode("Hello world. Bye", false, true)[:tc.maxTokens], false)
				if r.usage.OutputTokens != tc.maxTokens {
					t.Fatalf("output_tokens %d, want %d", r.usage.OutputTokens, tc.maxTokens)
				}
			}
			var text string
			for _, b := range r.blocks {
				text += b.text
			}
			if text != want || r.stopReason != tc.reason || r.stopSequence != tc.sequence {
				t.Fatalf("text %q, stop %q %q; want %q, %q %q", text, r.stopReason, r.stopSequence, want, tc.reason, tc.sequence)
			}
		})
	}
}

// TestMessagesUsage: count_tokens counts the prompt a request runs
// (input_tokens + cache_read_input_tokens of its reply), and a request
// that repeats the previous one's conversation reads from the cache all
// it shares with what the slot holds (the previous prompt and reply).
func TestMessagesUsage(t *testing.T) {
	tok := testModel(t).tok
	reply := replyScript(tok, "Four.", "<|user|>")
	rec := &recorder{emit: reply}
	// One slot: the second request finds the first's tokens in it.
	ts := newTestServer(t, func(c *Config) { c.Parallel = 1 }, rec.script)
	c := anthropicClient(ts, "")
	count := func(p anthropic.MessageNewParams) int64 {
		t.Helper()
		n, err := c.Messages.CountTokens(context.Background(), anthropic.MessageCountTokensParams{
			Model: p.Model, Messages: p.Messages, System: anthropic.MessageCountTokensParamsSystemUnion{OfTextBlockArray: p.System},
			Tools: countTools(p.Tools), ToolChoice: p.ToolChoice, Thinking: p.Thinking,
		})
		if err != nil {
			t.Fatal(err)
		}
		return n.InputTokens
	}
	for _, tc := range []struct {
		name string
		edit func(*anthropic.MessageNewParams)
	}{
		{"plain", func(*anthropic.MessageNewParams) {}},
		{"system and tools", func(p *anthropic.MessageNewParams) {
			p.System = []anthropic.TextBlockParam{{Text: "Be brief."}}
			p.Tools = []anthropic.ToolUnionParam{anthropicWeatherTool()}
		}},
		{"thinking off", func(p *anthropic.MessageNewParams) { p.Thinking = thinkingOff }},
		{"forced tool", func(p *anthropic.MessageNewParams) {
			p.Tools = []anthropic.ToolUnionParam{anthropicWeatherTool()}
			p.ToolChoice = anthropic.ToolChoiceParamOfTool("get_weather")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := userParams("What is 2+2? Say it " + tc.name)
			tc.edit(&p)
			first := messageOnce(t, c, p)
			if n, u := count(p), first.usage; n == 0 || u.InputTokens+u.CacheReadInputTokens != n || u.CacheCreationInputTokens != 0 {
				t.Fatalf("count_tokens %d, usage %s", n, usageString(u))
			}
			// The slot keeps the prompt and the reply's tokens fed back
			// (all but the end token).
			script := reply(rec.last(t))
			held := append(slices.Clone(rec.last(t)), script[:len(script)-1]...)

			p.Messages = append(p.Messages, anthropic.NewAssistantMessage(anthropic.NewTextBlock("Four.")),
				anthropic.NewUserMessage(anthropic.NewTextBlock("And 3+3?")))
			p.ToolChoice = anthropic.ToolChoiceUnionParam{}
			next := messageStream(t, c, p)
			want := int64(commonPrefix(held, rec.last(t)))
			if u := next.usage; want == 0 || u.CacheReadInputTokens != want || u.InputTokens+u.CacheReadInputTokens != count(p) {
				t.Fatalf("next turn: usage %s, want %d tokens read from the cache of %d", usageString(u), want, count(p))
			}
		})
	}
}

func countTools(tools []anthropic.ToolUnionParam) []anthropic.MessageCountTokensToolUnionParam {
	var out []anthropic.MessageCountTokensToolUnionParam
	for _, t := range tools {
		out = append(out, anthropic.MessageCountTokensToolUnionParam{OfTool: t.OfTool})
	}
	return out
}

// anthropicErrorOf checks Anthropic's error shape, {"type": "error",
// "error": {"type", "message"}}, and returns the error's type and message.
func anthropicErrorOf(t testing.TB, body map[string]any) (typ, msg string) {
	t.Helper()
	e, ok := body["error"].(map[string]any)
	if body["type"] != "error" || !ok {
		t.Fatalf("not an Anthropic error: %v", body)
	}
	typ, _ = e["type"].(string)
	msg, _ = e["message"].(string)
	if typ == "" || msg == "" {
		t.Fatalf("error without type or message: %v", body)
	}
	return typ, msg
}

func TestMessagesAPIKey(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.APIKey = "sekret" }, scriptFor(testModel(t).tok, "Hi.", "<|user|>"))
	body := `{"model": "` + testModelID + `", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}`
	for _, tc := range []struct {
		name   string
		path   string
		header map[string]string
		status int
	}{
		{"none", "/v1/messages", nil, 401},
		{"x-api-key", "/v1/messages", map[string]string{"X-Api-Key": "sekret"}, 200},
		{"wrong x-api-key", "/v1/messages", map[string]string{"X-Api-Key": "nope"}, 401},
		{"bearer", "/v1/messages", map[string]string{"Authorization": "Bearer sekret"}, 200},
		{"wrong bearer", "/v1/messages", map[string]string{"Authorization": "Bearer nope"}, 401},
		{"wrong x-api-key, right bearer", "/v1/messages", map[string]string{"X-Api-Key": "nope", "Authorization": "Bearer sekret"}, 200},
		{"count_tokens", "/v1/messages/count_tokens", map[string]string{"X-Api-Key": "sekret"}, 200},
		{"count_tokens without", "/v1/messages/count_tokens", nil, 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, b := post(t, ts.url, tc.path, body, tc.header)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %v", status, tc.status, b)
			}
			if status == 401 {
				if typ, _ := anthropicErrorOf(t, b); typ != "authentication_error" {
					t.Fatalf("error type %q, want authentication_error", typ)
				}
			}
		})
	}
	// The client sends its key as x-api-key.
	if r := messageOnce(t, anthropicClient(ts, "sekret"), userParams("hi")); r.stopReason != "end_turn" {
		t.Fatalf("client with the key: %+v", r)
	}
	wrong := anthropicClient(ts, "nope")
	_, err := wrong.Messages.New(context.Background(), userParams("hi"))
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 401 || ae.Type() != "authentication_error" {
		t.Fatalf("client with a wrong key: %v", err)
	}
}

func TestMessagesErrors(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.ContextSize = 64; c.MaxBodyBytes = 4096 }, nil)
	msgs := `"messages": [{"role": "user", "content": "hi"}]`
	long := strings.Repeat("word ", 200)
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		typ, want                string // the error type, a part of its message
	}{
		{"malformed JSON", "POST", "/v1/messages", `{"messages": [`, 400, "invalid_request_error", "not valid JSON"},
		{"wrong type", "POST", "/v1/messages", `{"max_tokens": "many", ` + msgs + `}`, 400, "invalid_request_error", "max_tokens"},
		{"no max_tokens", "POST", "/v1/messages", `{` + msgs + `}`, 400, "invalid_request_error", "max_tokens is required"},
		{"max_tokens 0", "POST", "/v1/messages", `{"max_tokens": 0, ` + msgs + `}`, 400, "invalid_request_error", "max_tokens must be at least 1"},
		{"no messages", "POST", "/v1/messages", `{"max_tokens": 4, "messages": []}`, 400, "invalid_request_error", "messages must not be empty"},
		{"bad role", "POST", "/v1/messages", `{"max_tokens": 4, "messages": [{"role": "tool", "content": "hi"}]}`, 400, "invalid_request_error", `messages.0.role: unknown role "tool"`},
		{"no content", "POST", "/v1/messages", `{"max_tokens": 4, "messages": [{"role": "user"}]}`, 400, "invalid_request_error", "content is required"},
		{"image", "POST", "/v1/messages", `{"max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}`,
			400, "invalid_request_error", `messages.0.content.0.type: content block type "image"`},
		{"prefill", "POST", "/v1/messages", `{"max_tokens": 4, "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Sure"}]}`,
			400, "invalid_request_error", "prefill"},
		{"tool_use input", "POST", "/v1/messages", `{"max_tokens": 4, "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": [1]}]}, {"role": "user", "content": "go"}]}`,
			400, "invalid_request_error", "input must be a JSON object"},
		{"server tool", "POST", "/v1/messages", `{"max_tokens": 4, "tools": [{"type": "web_search_20250305", "name": "web_search"}], ` + msgs + `}`,
			400, "invalid_request_error", `tool type "web_search_20250305" is not supported`},
		{"tool choice unknown tool", "POST", "/v1/messages", `{"max_tokens": 4, "tools": [{"name": "f", "input_schema": {"type": "object"}}], "tool_choice": {"type": "tool", "name": "g"}, ` + msgs + `}`,
			400, "invalid_request_error", `"g", which is not in tools`},
		{"tool choice any without tools", "POST", "/v1/messages", `{"max_tokens": 4, "tool_choice": {"type": "any"}, ` + msgs + `}`,
			400, "invalid_request_error", "needs tools"},
		{"tool choice type", "POST", "/v1/messages", `{"max_tokens": 4, "tool_choice": {"type": "always"}, ` + msgs + `}`,
			400, "invalid_request_error", "tool_choice.type must be"},
		{"thinking type", "POST", "/v1/messages", `{"max_tokens": 4, "thinking": {"type": "maybe"}, ` + msgs + `}`,
			400, "invalid_request_error", "thinking.type must be"},
		{"temperature", "POST", "/v1/messages", `{"max_tokens": 4, "temperature": 3, ` + msgs + `}`, 400, "invalid_request_error", "temperature must be"},
		{"empty stop sequence", "POST", "/v1/messages", `{"max_tokens": 4, "stop_sequences": [""], ` + msgs + `}`,
			400, "invalid_request_error", "stop_sequences: stop strings must not be empty"},
		{"prompt too long", "POST", "/v1/messages", `{"max_tokens": 4, "messages": [{"role": "user", "content": "` + long + `"}]}`,
			400, "invalid_request_error", "prompt is too long"},
		{"unknown model", "POST", "/v1/messages", `{"model": "claude-sonnet-4-5", "max_tokens": 4, ` + msgs + `}`, 404, "not_found_error", `"claude-sonnet-4-5" does not exist`},
		{"unknown model count_tokens", "POST", "/v1/messages/count_tokens", `{"model": "claude-sonnet-4-5", ` + msgs + `}`, 404, "not_found_error", "does not exist"},
		{"unknown path", "POST", "/v1/messages/batches", `{}`, 404, "not_found_error", "no endpoint"},
		{"wrong method", "GET", "/v1/messages", ``, 405, "invalid_request_error", "use POST"},
		{"body too large", "POST", "/v1/messages", `{"max_tokens": 4, "messages": [{"role": "user", "content": "` + strings.Repeat("x", 5000) + `"}]}`,
			413, "request_too_large", "larger than 4096 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, ts.url+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatalf("status %d, body is not JSON: %v", resp.StatusCode, err)
			}
			typ, msg := anthropicErrorOf(t, body)
			if resp.StatusCode != tc.status || typ != tc.typ || !strings.Contains(msg, tc.want) {
				t.Fatalf("status %d, %s %q; want %d, %s saying %q", resp.StatusCode, typ, msg, tc.status, tc.typ, tc.want)
			}
		})
	}
	// The client raises a bad request as its error, with the type.
	p := userParams("hi")
	p.MaxTokens = 0
	c := anthropicClient(ts, "")
	_, err := c.Messages.New(context.Background(), p)
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Type() != "invalid_request_error" {
		t.Fatalf("max_tokens 0 through the client: %v", err)
	}
}

// TestMessagesOverloaded: a full queue answers 529 overloaded_error, as
// Anthropic's API does.
func TestMessagesOverloaded(t *testing.T) {
	gate := &gateStepper{gate: make(chan struct{})}
	ts := newTestServer(t, func(c *Config) { c.Parallel = 1; c.QueueSize = 1; c.Stepper = gate }, nil)
	body := `{"max_tokens": 2, "temperature": 0, "messages": [{"role": "user", "content": "hi"}]}`
	results := make(chan int, 2)
	send := func() {
		status, _ := post(t, ts.url, "/v1/messages", body, nil)
		results <- status
	}
	go send() // takes the slot, then waits at the gate
	waitFor(t, "the first request in its slot", func() bool { return ts.s.metrics.active.Load() == 1 })
	go send() // waits in the queue
	waitFor(t, "the second request in the queue", func() bool { return ts.s.sched.queue.len() == 1 })
	status, b := post(t, ts.url, "/v1/messages", body, nil)
	if typ, _ := anthropicErrorOf(t, b); status != 529 || typ != "overloaded_error" {
		t.Fatalf("status %d, %s; want 529 overloaded_error", status, typ)
	}
	close(gate.gate)
	for range 2 {
		if s := <-results; s != 200 {
			t.Fatalf("a request that got a slot: %d", s)
		}
	}
}

// TestMessagesPing: a stream that waits (here for a decode step) sends
// pings every pingEvery.
func TestMessagesPing(t *testing.T) {
	old := pingEvery
	pingEvery = 10 * time.Millisecond
	t.Cleanup(func() { pingEvery = old }) // runs after the server's cleanup, which waits for its handlers
	gate := &gateStepper{gate: make(chan struct{})}
	ts := newTestServer(t, func(c *Config) { c.Stepper = gate }, scriptFor(testModel(t).tok, "Hello there.", "<|user|>"))
	released := false
	defer func() {
		if !released {
			close(gate.gate)
		}
	}()
	// A stream without periodic pings would wait at the gate for ever:
	// the timeout fails the test instead.
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Post(ts.url+"/v1/messages", "application/json",
		strings.NewReader(`{"max_tokens": 8, "stream": true, "thinking": {"type": "disabled"}, "messages": [{"role": "user", "content": "hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	pings := 0
	evs := readEvents(t, resp.Body, func(e sseEvent) bool {
		if e.name == "ping" {
			pings++
			if pings == 3 && !released {
				// Two pings came while no token could: the periodic ones.
				close(gate.gate)
				released = true
			}
		}
		return true
	})
	if !released {
		t.Fatalf("%d pings before the stream ended", pings)
	}
	checkEventOrder(t, evs)
}

// TestBlockBuilder: parsed pieces become blocks in order, whitespace that
// would open a block waits for more than whitespace, and the events a
// stream gets rebuild the same blocks.
func TestBlockBuilder(t *testing.T) {
	call := func(city string) toolCall {
		return toolCall{ID: "toolu_" + city, Type: "function", Function: functionCall{Name: "get_weather", Arguments: `{"city":"` + city + `"}`}}
	}
	for _, tc := range []struct {
		name   string
		pieces []replyDelta
		want   []block
	}{
		{"nothing", nil, nil},
		{"thinking then text", []replyDelta{{reasoning: "Hm"}, {reasoning: "m.", content: "Four"}, {content: "."}},
			[]block{{typ: "thinking", text: "Hmm."}, {typ: "text", text: "Four."}}},
		{"whitespace before a call is dropped", []replyDelta{{reasoning: "x"}, {content: "\n"}, {calls: []toolCall{call("Oslo")}}},
			[]block{{typ: "thinking", text: "x"}, {typ: "tool_use", id: "toolu_Oslo", name: "get_weather", input: `{"city":"Oslo"}`}}},
		{"whitespace before text is kept", []replyDelta{{content: "\n"}, {content: " "}, {content: "Hi"}},
			[]block{{typ: "text", text: "\n Hi"}}},
		{"whitespace-only thinking", []replyDelta{{reasoning: "\n"}, {content: "Hi"}}, []block{{typ: "text", text: "Hi"}}},
		{"text between calls", []replyDelta{{calls: []toolCall{call("Oslo")}}, {content: "and"}, {calls: []toolCall{call("Rome")}}},
			[]block{{typ: "tool_use", id: "toolu_Oslo", name: "get_weather", input: `{"city":"Oslo"}`}, {typ: "text", text: "and"},
				{typ: "tool_use", id: "toolu_Rome", name: "get_weather", input: `{"city":"Rome"}`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var whole blockBuilder
			var evs []sseEvent
			streamed := blockBuilder{send: func(name string, v any) bool {
				b, err := marshal(v)
				if err != nil {
					t.Fatal(err)
				}
				var data map[string]any
				if err := json.Unmarshal(b, &data); err != nil {
					t.Fatal(err)
				}
				evs = append(evs, sseEvent{name, data})
				return true
			}}
			for _, d := range tc.pieces {
				whole.add(d)
				streamed.add(d)
			}
			whole.close()
			streamed.close()
			var got []block
			for _, b := range whole.out() {
				bl := block{typ: b.Type, id: b.ID, name: b.Name, input: string(b.Input)}
				if b.Text != nil {
					bl.text = *b.Text
				}
				if b.Thinking != nil {
					bl.text = *b.Thinking
				}
				got = append(got, bl)
			}
			if !reflect.DeepEqual(got, tc.want) || !reflect.DeepEqual(whole.out(), streamed.out()) {
				t.Fatalf("blocks %+v, want %+v", got, tc.want)
			}
			// Rebuild the blocks from the events, as a client does.
			var rebuilt []block
			for _, e := range evs {
				switch e.name {
				case "content_block_start":
					cb := e.data["content_block"].(map[string]any)
					b := block{typ: cb["type"].(string)}
					if b.typ == "tool_use" {
						b.id, b.name = cb["id"].(string), cb["name"].(string)
					}
					rebuilt = append(rebuilt, b)
				case "content_block_delta":
					d := e.data["delta"].(map[string]any)
					b := &rebuilt[int(e.data["index"].(float64))]
					for _, k := range []string{"text", "thinking"} {
						if s, ok := d[k].(string); ok {
							b.text += s
						}
					}
					if s, ok := d["partial_json"].(string); ok {
						b.input += s
					}
				}
			}
			if !reflect.DeepEqual(rebuilt, tc.want) {
				t.Fatalf("events rebuild %+v, want %+v", rebuilt, tc.want)
			}
		})
	}
}

// TestMessagesOneToolUse: disable_parallel_tool_use ends the reply with its
// first tool_use block.
func TestMessagesOneToolUse(t *testing.T) {
	script := "</think><tool_call>get_weather<arg_key>city</arg_key><arg_value>Oslo</arg_value></tool_call>\n" +
		"<tool_call>get_weather<arg_key>city</arg_key><arg_value>Rome</arg_value></tool_call>"
	ts := newTestServer(t, nil, scriptFor(testModel(t).tok, script, "<|observation|>"))
	for _, disable := range []bool{false, true} {
		p := userParams("Weather in Oslo and Rome?")
		p.Tools = []anthropic.ToolUnionParam{anthropicWeatherTool()}
		p.ToolChoice = anthropic.ToolChoiceUnionParam{OfAuto: &anthropic.ToolChoiceAutoParam{DisableParallelToolUse: anthropic.Bool(disable)}}
		r := bothMessages(t, ts, p)
		want := 2
		if disable {
			want = 1
		}
		if r.stopReason != "tool_use" || len(r.blocks) != want || r.blocks[0].input != `{"city":"Oslo"}` {
			t.Fatalf("disable_parallel_tool_use %v: stop %q, blocks %+v", disable, r.stopReason, r.blocks)
		}
	}
}
