package server

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/respjson"
	"github.com/openai/openai-go/v3/shared"

	"github.com/glmrun/glmrun"
	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/model/chat"
	"github.com/glmrun/glmrun/model/tokenizer"
)

// reply is a chat answer as a client sees it, from a whole response or
// gathered from a stream.
type reply struct {
	content, reasoning string
	finish             string
	usage              openai.CompletionUsage
	calls              []call
	logprobs           []openai.ChatCompletionTokenLogprob
	deltas             []string // streamed content and reasoning pieces
}

type call struct{ id, name, args string }

// extraString reads an extra string field (reasoning_content) of a
// response object.
func extraString(t testing.TB, f respjson.Field) string {
	t.Helper()
	// Extra fields are not "valid" (unknown to the client's schema) but
	// keep their raw JSON.
	if f.Raw() == "" || f.Raw() == "null" {
		return ""
	}
	var s string
	if err := json.Unmarshal([]byte(f.Raw()), &s); err != nil {
		t.Fatalf("extra field %s: %v", f.Raw(), err)
	}
	return s
}

func chatOnce(t testing.TB, ts *testServer, p openai.ChatCompletionNewParams) reply {
	t.Helper()
	c, err := ts.client.Chat.Completions.New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Object != "chat.completion" || c.Model != testModelID || !strings.HasPrefix(c.ID, "chatcmpl-") || len(c.Choices) != 1 {
		t.Fatalf("response header: %s", c.RawJSON())
	}
	ch := c.Choices[0]
	r := reply{content: ch.Message.Content, reasoning: extraString(t, ch.Message.JSON.ExtraFields["reasoning_content"]),
		finish: ch.FinishReason, usage: c.Usage, logprobs: ch.Logprobs.Content}
	for _, tc := range ch.Message.ToolCalls {
		r.calls = append(r.calls, call{tc.ID, tc.Function.Name, tc.Function.Arguments})
	}
	return r
}

func chatStream(t testing.TB, ts *testServer, p openai.ChatCompletionNewParams) reply {
	t.Helper()
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	s := ts.client.Chat.Completions.NewStreaming(context.Background(), p)
	defer s.Close()
	var r reply
	var usageChunks int
	byIndex := map[int64]*call{}
	var order []int64
	for s.Next() {
		c := s.Current()
		if c.Object != "chat.completion.chunk" {
			t.Fatalf("chunk object %q", c.Object)
		}
		if c.JSON.Usage.Valid() && c.Usage.TotalTokens > 0 {
			usageChunks++
			r.usage = c.Usage
			if len(c.Choices) != 0 {
				t.Fatalf("usage chunk has choices: %s", c.RawJSON())
			}
			continue
		}
		if len(c.Choices) != 1 {
			t.Fatalf("chunk with %d choices: %s", len(c.Choices), c.RawJSON())
		}
		ch := c.Choices[0]
		if ch.FinishReason != "" {
			r.finish = ch.FinishReason
		}
		d := ch.Delta
		rc := extraString(t, d.JSON.ExtraFields["reasoning_content"])
		r.content += d.Content
		r.reasoning += rc
		for _, piece := range []string{d.Content, rc} {
			if piece != "" {
				r.deltas = append(r.deltas, piece)
			}
		}
		r.logprobs = append(r.logprobs, ch.Logprobs.Content...)
		for _, tc := range d.ToolCalls {
			cl, ok := byIndex[tc.Index]
			if !ok {
				cl = &call{}
				byIndex[tc.Index] = cl
				order = append(order, tc.Index)
			}
			cl.id += tc.ID
			cl.name += tc.Function.Name
			cl.args += tc.Function.Arguments
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if usageChunks != 1 {
		t.Fatalf("%d usage chunks, want 1 (include_usage)", usageChunks)
	}
	for _, i := range order {
		r.calls = append(r.calls, *byIndex[i])
	}
	return r
}

func userMsg(text string) []openai.ChatCompletionMessageParamUnion {
	return []openai.ChatCompletionMessageParamUnion{openai.UserMessage(text)}
}

// promptLen is the number of tokens of msgs rendered as the server does.
func promptLen(t testing.TB, ts *testServer, msgs []chat.Message, opts chat.Options) int64 {
	t.Helper()
	opts.AddGenerationPrompt = true
	text, err := testModel(t).tmpl.Render(msgs, opts)
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(ts.tok.Encode(text, true, true)))
}

// bothWays runs p whole and streamed and checks that they agree.
func bothWays(t *testing.T, ts *testServer, p openai.ChatCompletionNewParams) reply {
	t.Helper()
	whole := chatOnce(t, ts, p)
	streamed := chatStream(t, ts, p)
	if whole.content != streamed.content || whole.reasoning != streamed.reasoning || whole.finish != streamed.finish {
		t.Fatalf("whole and streamed replies differ:\nwhole    %+v\nstreamed %+v", whole, streamed)
	}
	if whole.usage.PromptTokens != streamed.usage.PromptTokens || whole.usage.CompletionTokens != streamed.usage.CompletionTokens {
		t.Fatalf("usage: whole %+v, streamed %+v", whole.usage, streamed.usage)
	}
	if len(whole.calls) != len(streamed.calls) {
		t.Fatalf("tool calls: whole %+v, streamed %+v", whole.calls, streamed.calls)
	}
	for i := range whole.calls {
		w, s := whole.calls[i], streamed.calls[i]
		if w.name != s.name || w.args != s.args || w.id == "" || s.id == "" {
			t.Fatalf("tool call %d: whole %+v, streamed %+v", i, w, s)
		}
	}
	for _, d := range streamed.deltas {
		if !utf8.ValidString(d) {
			t.Fatalf("streamed delta %q is not valid UTF-8", d)
		}
	}
	return whole
}

func TestChatGreedy(t *testing.T) {
	ts := newTestServer(t, nil, nil)
	for _, tc := range []struct {
		name     string
		max      int64
		thinking bool
	}{
		{"thinking", 8, true},
		{"no thinking", 6, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := openai.ChatCompletionNewParams{
				Model: testModelID, Messages: userMsg("What is 2+2?"),
				MaxTokens: openai.Int(tc.max), Temperature: openai.Float(0), LogitBias: eogBias(ts.tok),
			}
			if !tc.thinking {
				p.SetExtraFields(map[string]any{"chat_template_kwargs": map[string]any{"enable_thinking": false}})
			}
			r := bothWays(t, ts, p)
			want := promptLen(t, ts, []chat.Message{{Role: "user", Content: "What is 2+2?"}}, chat.Options{NoThinking: !tc.thinking})
			if r.finish != "length" || r.usage.CompletionTokens != tc.max || r.usage.PromptTokens != want ||
				r.usage.TotalTokens != want+tc.max {
				t.Fatalf("finish %q, usage %+v; want length, %d prompt + %d completion tokens", r.finish, r.usage, want, tc.max)
			}
			if !tc.thinking && r.reasoning != "" {
				t.Fatalf("reasoning %q with thinking off", r.reasoning)
			}
			if r.content == "" && r.reasoning == "" {
				t.Fatal("empty reply")
			}
		})
	}
}

func TestChatReasoningSplit(t *testing.T) {
	for _, tc := range []struct {
		name          string
		script        string
		thinking      bool
		reasoning     string
		content       string
		wantPromptEnd string
	}{
		{"thinking", "Let me add: 2+2.</think>The answer is 4.", true, "Let me add: 2+2.", "The answer is 4.", "<think>"},
		{"thinking reopened", "<think>Hmm.</think>Four.", true, "Hmm.", "Four.", "<think>"},
		{"unclosed thinking", "Still thinking", true, "Still thinking", "", "<think>"},
		{"no thinking", "The answer is 4.", false, "", "The answer is 4.", "</think>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var prompt []int32
			l := testModel(t)
			script := scriptFor(l.tok, tc.script, "<|user|>")
			ts := newTestServer(t, nil, func(p []int32) []int32 { prompt = p; return script(p) })
			p := openai.ChatCompletionNewParams{Model: testModelID, Messages: userMsg("What is 2+2?")}
			if !tc.thinking {
				p.SetExtraFields(map[string]any{"chat_template_kwargs": map[string]any{"enable_thinking": false}})
			}
			r := bothWays(t, ts, p)
			if r.reasoning != tc.reasoning || r.content != tc.content || r.finish != "stop" {
				t.Fatalf("reasoning %q, content %q, finish %q; want %q, %q, stop", r.reasoning, r.content, r.finish, tc.reasoning, tc.content)
			}
			if n := int64(len(script(nil))); r.usage.CompletionTokens != n {
				t.Fatalf("completion tokens %d, want %d (the script and its end token)", r.usage.CompletionTokens, n)
			}
			text, _ := l.tok.Decode(prompt, true)
			if !strings.HasSuffix(text, "<|assistant|>"+tc.wantPromptEnd) {
				t.Fatalf("prompt ends %q, want ...<|assistant|>%s", text[max(0, len(text)-30):], tc.wantPromptEnd)
			}
		})
	}
}

func weatherTool() openai.ChatCompletionToolUnionParam {
	return openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name:        "get_weather",
		Description: openai.String("Weather forecast for a city"),
		Parameters: shared.FunctionParameters{
			"type": "object",
			"properties": map[string]any{
				"city": map[string]any{"type": "string"},
				"days": map[string]any{"type": "integer"},
				"code": map[string]any{"type": "string"},
			},
			"required": []string{"city"},
		},
	})
}

func TestChatToolCalls(t *testing.T) {
	const oneCall = "I need the weather.</think><tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>" +
		"<arg_key>days</arg_key><arg_value>3</arg_value><arg_key>code</arg_key><arg_value>42</arg_value></tool_call>"
	for _, tc := range []struct {
		name      string
		script    string
		tools     bool
		special   bool // Config.Special
		content   string
		reasoning string
		calls     []call
		finish    string
	}{
		{"one call", oneCall, true, false, "", "I need the weather.",
			[]call{{name: "get_weather", args: `{"city":"Paris","days":3,"code":"42"}`}}, "tool_calls"},
		{"one call, special", oneCall, true, true, "", "I need the weather.",
			[]call{{name: "get_weather", args: `{"city":"Paris","days":3,"code":"42"}`}}, "tool_calls"},
		{"two calls", "</think>Checking.\n<tool_call>get_weather<arg_key>city</arg_key><arg_value>Oslo</arg_value></tool_call>\n" +
			"<tool_call>get_weather<arg_key>city</arg_key><arg_value>Rome</arg_value><arg_key>days</arg_key><arg_value>[1, 2]</arg_value></tool_call>",
			true, false, "Checking.\n", "",
			[]call{{name: "get_weather", args: `{"city":"Oslo"}`}, {name: "get_weather", args: `{"city":"Rome","days":[1,2]}`}}, "tool_calls"},
		// Without tools the markup is not parsed, and its control tokens
		// are not text (vLLM skips special tokens the same way); --special
		// shows them, as llama-server does.
		{"no tools", oneCall, false, false, "get_weathercityParisdays3code42", "I need the weather.", nil, "stop"},
		{"no tools, special", oneCall, false, true,
			"<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days</arg_key><arg_value>3</arg_value><arg_key>code</arg_key><arg_value>42</arg_value></tool_call>",
			"I need the weather.", nil, "stop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTestServer(t, func(c *Config) { c.Special = tc.special }, scriptFor(testModel(t).tok, tc.script, "<|observation|>"))
			p := openai.ChatCompletionNewParams{Model: testModelID, Messages: userMsg("Weather in Paris?")}
			if tc.tools {
				p.Tools = []openai.ChatCompletionToolUnionParam{weatherTool()}
			}
			r := bothWays(t, ts, p)
			if r.content != tc.content || r.reasoning != tc.reasoning || r.finish != tc.finish || len(r.calls) != len(tc.calls) {
				t.Fatalf("got content %q, reasoning %q, finish %q, calls %+v\nwant %q, %q, %q, %+v",
					r.content, r.reasoning, r.finish, r.calls, tc.content, tc.reasoning, tc.finish, tc.calls)
			}
			for i, c := range tc.calls {
				if r.calls[i].name != c.name || r.calls[i].args != c.args || !strings.HasPrefix(r.calls[i].id, "call_") {
					t.Fatalf("call %d: %+v, want %+v", i, r.calls[i], c)
				}
			}
		})
	}

	// The next turn sends the call and its result back.
	ts := newTestServer(t, nil, scriptFor(testModel(t).tok, "</think>It is sunny.", "<|user|>"))
	asst := openai.ChatCompletionAssistantMessageParam{ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{
		OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: "call_1",
			Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: `{"city":"Paris"}`}},
	}}}
	msgs := []openai.ChatCompletionMessageParamUnion{
		openai.UserMessage("Weather in Paris?"),
		{OfAssistant: &asst},
		openai.ToolMessage(`{"sky":"sunny"}`, "call_1"),
	}
	r := chatOnce(t, ts, openai.ChatCompletionNewParams{Model: testModelID, Messages: msgs, Tools: []openai.ChatCompletionToolUnionParam{weatherTool()}})
	if r.content != "It is sunny." || r.finish != "stop" {
		t.Fatalf("follow-up turn: %+v", r)
	}
}

func TestChatLogprobs(t *testing.T) {
	ts := newTestServer(t, nil, nil)
	p := openai.ChatCompletionNewParams{
		Model: testModelID, Messages: userMsg("Count: 1, 2, 3"), MaxTokens: openai.Int(6), Temperature: openai.Float(0),
		LogitBias: eogBias(ts.tok), Logprobs: openai.Bool(true), TopLogprobs: openai.Int(3),
	}
	p.SetExtraFields(map[string]any{"chat_template_kwargs": map[string]any{"enable_thinking": false}})
	whole, streamed := chatOnce(t, ts, p), chatStream(t, ts, p)
	if len(whole.logprobs) != 6 || len(streamed.logprobs) != 6 {
		t.Fatalf("%d and %d logprobs (whole, streamed), want 6", len(whole.logprobs), len(streamed.logprobs))
	}
	var text []byte
	for i, lp := range whole.logprobs {
		s := streamed.logprobs[i]
		if lp.Token != s.Token || lp.Logprob != s.Logprob {
			t.Fatalf("logprob %d: whole %+v, streamed %+v", i, lp, s)
		}
		if len(lp.TopLogprobs) != 3 {
			t.Fatalf("logprob %d: %d top logprobs, want 3", i, len(lp.TopLogprobs))
		}
		// Greedy: the chosen token is the most likely one.
		if top := lp.TopLogprobs[0]; top.Token != lp.Token || top.Logprob != lp.Logprob {
			t.Fatalf("logprob %d: chose %q (%g) but the best is %q (%g)", i, lp.Token, lp.Logprob, top.Token, top.Logprob)
		}
		for j := 1; j < 3; j++ {
			if lp.TopLogprobs[j].Logprob > lp.TopLogprobs[j-1].Logprob {
				t.Fatalf("logprob %d: top logprobs not sorted: %+v", i, lp.TopLogprobs)
			}
		}
		if lp.Logprob > 0 {
			t.Fatalf("logprob %d: %g > 0", i, lp.Logprob)
		}
		for _, b := range lp.Bytes {
			text = append(text, byte(b))
		}
	}
	if utf8.Valid(text) && string(text) != whole.content {
		t.Fatalf("token bytes spell %q, content is %q", text, whole.content)
	}
	// Without logprobs there are none.
	p.Logprobs, p.TopLogprobs = openai.Bool(false), openai.Int(0)
	if r := chatOnce(t, ts, p); r.logprobs != nil {
		t.Fatalf("logprobs without asking: %+v", r.logprobs)
	}
}

func TestChatStop(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stop    []string
		content string
		finish  string
	}{
		{"one word", []string{"world"}, "Hello ", "stop"},
		{"across tokens", []string{"o w"}, "Hell", "stop"},
		{"earliest of several", []string{"Bye", "lo"}, "Hel", "stop"},
		{"never", []string{"zebra"}, "Hello world. Bye", "stop"},
		{"prefix at the end", []string{"Bye now"}, "Hello world. Bye", "stop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTestServer(t, nil, scriptFor(testModel(t).tok, "Hello world. Bye", "<|user|>"))
			p := openai.ChatCompletionNewParams{Model: testModelID, Messages: userMsg("Hi")}
			p.SetExtraFields(map[string]any{"chat_template_kwargs": map[string]any{"enable_thinking": false}})
			if len(tc.stop) == 1 {
				p.Stop = openai.ChatCompletionNewParamsStopUnion{OfString: openai.String(tc.stop[0])}
			} else {
				p.Stop = openai.ChatCompletionNewParamsStopUnion{OfStringArray: tc.stop}
			}
			r := bothWays(t, ts, p)
			if r.content != tc.content || r.finish != tc.finish {
				t.Fatalf("content %q, finish %q; want %q, %q", r.content, r.finish, tc.content, tc.finish)
			}
		})
	}
}

func TestChatMaxTokens(t *testing.T) {
	ts := newTestServer(t, nil, nil)
	for _, tc := range []struct {
		name string
		p    openai.ChatCompletionNewParams
		want int64
	}{
		{"max_tokens", openai.ChatCompletionNewParams{MaxTokens: openai.Int(5)}, 5},
		{"max_completion_tokens", openai.ChatCompletionNewParams{MaxCompletionTokens: openai.Int(3)}, 3},
		{"both", openai.ChatCompletionNewParams{MaxTokens: openai.Int(9), MaxCompletionTokens: openai.Int(2)}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			p.Model, p.Messages, p.Temperature, p.LogitBias = testModelID, userMsg("Tell me a story"), openai.Float(0), eogBias(ts.tok)
			r := bothWays(t, ts, p)
			if r.finish != "length" || r.usage.CompletionTokens != tc.want {
				t.Fatalf("finish %q, %d completion tokens; want length, %d", r.finish, r.usage.CompletionTokens, tc.want)
			}
		})
	}
}

func TestChatContextLimit(t *testing.T) {
	// A reply that would pass the context ends with "length" at the
	// context's end.
	ts := newTestServer(t, func(c *Config) { c.ContextSize = 24 }, nil)
	r := bothWays(t, ts, openai.ChatCompletionNewParams{
		Model: testModelID, Messages: userMsg("Hi"), Temperature: openai.Float(0), LogitBias: eogBias(ts.tok),
	})
	if r.finish != "length" || r.usage.TotalTokens != 24 {
		t.Fatalf("finish %q, usage %+v; want length at 24 tokens", r.finish, r.usage)
	}
}

func TestChatSeed(t *testing.T) {
	ts := newTestServer(t, nil, nil)
	run := func(seed int64, stream bool) reply {
		p := openai.ChatCompletionNewParams{
			Model: testModelID, Messages: userMsg("Surprise me"), MaxTokens: openai.Int(12),
			Temperature: openai.Float(1), TopP: openai.Float(1), Seed: openai.Int(seed), LogitBias: eogBias(ts.tok),
		}
		if stream {
			return chatStream(t, ts, p)
		}
		return chatOnce(t, ts, p)
	}
	a, b, c, d := run(7, false), run(7, false), run(7, true), run(8, false)
	if a.reasoning+a.content != b.reasoning+b.content || a.reasoning+a.content != c.reasoning+c.content {
		t.Fatalf("seed 7 gave different replies: %q, %q, %q", a.reasoning+a.content, b.reasoning+b.content, c.reasoning+c.content)
	}
	if a.reasoning+a.content == d.reasoning+d.content {
		t.Fatalf("seeds 7 and 8 gave the same 12 sampled tokens %q", a.reasoning+a.content)
	}
}

func TestChatUTF8(t *testing.T) {
	const text = "héllo wörld 🙂 日本語"
	ts := newTestServer(t, nil, scriptFor(testModel(t).tok, text, "<|user|>"))
	if ids := ts.tok.Encode(text, false, false); len(ids) <= utf8.RuneCountInString(text)/2 {
		t.Logf("note: %d tokens for %d characters", len(ids), utf8.RuneCountInString(text))
	}
	p := openai.ChatCompletionNewParams{Model: testModelID, Messages: userMsg("Hi")}
	p.SetExtraFields(map[string]any{"chat_template_kwargs": map[string]any{"enable_thinking": false}})
	r := bothWays(t, ts, p) // checks every delta is valid UTF-8
	if r.content != text {
		t.Fatalf("content %q, want %q", r.content, text)
	}
	if s := chatStream(t, ts, p); len(s.deltas) < 3 {
		t.Fatalf("only %d deltas: the reply was not streamed per token", len(s.deltas))
	}
}

// TestChatOneBOS: with a vocabulary that asks for BOS (add_bos_token),
// the chat prompt still has the one the template writes, as the
// library's Chat gives it.
func TestChatOneBOS(t *testing.T) {
	f, err := gguf.Open(testModelPath)
	if err != nil {
		t.Fatal(err)
	}
	w := gguf.NewWriterFrom(f)
	w.SetKV(tokenizer.KeyAddBOS, gguf.Bool(true))
	path := filepath.Join(t.TempDir(), "glm5-mini-add-bos.gguf")
	err = w.WriteFile(path)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	l, err := loadModelFile(path, glmrun.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.g.Close() }) // registered first, so it runs after the servers' Close
	if !l.tok.AddBOS() {
		t.Fatalf("%s: the tokenizer does not add BOS", path)
	}
	counts := map[bool]int{}
	for _, addBOS := range []bool{false, true} {
		ts := newTestServer(t, func(c *Config) {
			if addBOS {
				c.Model = l.g
			}
		}, nil)
		code, body := post(t, ts.url, "/v1/chat/completions",
			`{"model": "`+testModelID+`", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}`, nil)
		if code != 200 {
			t.Fatalf("status %d: %v", code, body)
		}
		counts[addBOS] = int(body["usage"].(map[string]any)["prompt_tokens"].(float64))
	}
	if counts[true] != counts[false] {
		t.Errorf("prompt tokens %d with add_bos_token, %d without: the BOS is doubled", counts[true], counts[false])
	}
}

// TestChatToolChoice: tool_choice "required" and a named function make
// the reply a tool call: the prompt ends with the call's opening (and the
// function's name), thinking off, and the model writes the rest.
func TestChatToolChoice(t *testing.T) {
	tok := testModel(t).tok
	const args = "<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>"
	for _, tc := range []struct {
		name   string
		choice openai.ChatCompletionToolChoiceOptionUnionParam
		prefix string // what the prompt must end with
		script string // what the model writes after it
	}{
		{"required", openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")},
			"</think><tool_call>", "get_weather" + args},
		{"named", openai.ChatCompletionToolChoiceOptionUnionParam{OfFunctionToolChoice: &openai.ChatCompletionNamedToolChoiceParam{
			Function: openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"}}},
			"</think><tool_call>get_weather", args},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tok.Encode(tc.prefix, false, true)
			emit := scriptFor(tok, tc.script, "<|observation|>")
			var prompts [][]int32
			var mu sync.Mutex
			ts := newTestServer(t, nil, func(prompt []int32) []int32 {
				mu.Lock()
				prompts = append(prompts, prompt)
				mu.Unlock()
				return emit(prompt)
			})
			p := openai.ChatCompletionNewParams{Model: testModelID, Messages: userMsg("Weather in Paris?"),
				Tools: []openai.ChatCompletionToolUnionParam{weatherTool()}, ToolChoice: tc.choice}
			r := bothWays(t, ts, p)
			if r.finish != "tool_calls" || len(r.calls) != 1 || r.calls[0].name != "get_weather" || r.calls[0].args != `{"city":"Paris"}` || r.content != "" {
				t.Fatalf("content %q, finish %q, calls %+v: want one get_weather call", r.content, r.finish, r.calls)
			}
			for _, pr := range prompts {
				if len(pr) < len(want) || !slices.Equal(pr[len(pr)-len(want):], want) {
					t.Errorf("the prompt does not end with %q", tc.prefix)
				}
			}
		})
	}
	ts := newTestServer(t, nil, nil)
	for _, c := range []struct{ name, body, want string }{
		{"unknown function", `"tools": [` + weatherToolJSON + `], "tool_choice": {"type": "function", "function": {"name": "nope"}}`, `"nope", which is not in tools`},
		{"required without tools", `"tool_choice": "required"`, "needs tools"},
		{"bad choice", `"tools": [` + weatherToolJSON + `], "tool_choice": "always"`, "tool_choice must be"},
	} {
		code, body := post(t, ts.url, "/v1/chat/completions", `{"model": "`+testModelID+`", "messages": [{"role": "user", "content": "Hi"}], `+c.body+`}`, nil)
		msg, _ := body["error"].(map[string]any)["message"].(string)
		if code != 400 || !strings.Contains(msg, c.want) {
			t.Errorf("%s: status %d, %v; want 400 saying %q", c.name, code, body, c.want)
		}
	}
}

const weatherToolJSON = `{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}`

// TestChatOneToolCall: parallel_tool_calls false ends the reply with its
// first call.
func TestChatOneToolCall(t *testing.T) {
	script := "</think><tool_call>get_weather<arg_key>city</arg_key><arg_value>Oslo</arg_value></tool_call>\n" +
		"<tool_call>get_weather<arg_key>city</arg_key><arg_value>Rome</arg_value></tool_call>"
	ts := newTestServer(t, nil, scriptFor(testModel(t).tok, script, "<|observation|>"))
	for _, parallel := range []bool{true, false} {
		p := openai.ChatCompletionNewParams{Model: testModelID, Messages: userMsg("Weather in Oslo and Rome?"),
			Tools: []openai.ChatCompletionToolUnionParam{weatherTool()}, ParallelToolCalls: openai.Bool(parallel)}
		r := bothWays(t, ts, p)
		want := 2
		if !parallel {
			want = 1
		}
		if len(r.calls) != want || r.finish != "tool_calls" || r.calls[0].args != `{"city":"Oslo"}` {
			t.Fatalf("parallel_tool_calls %v: calls %+v, finish %q", parallel, r.calls, r.finish)
		}
	}
}
