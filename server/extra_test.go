package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/model/chat"
	"github.com/glmrun/glmrun/model/sample"
)

// postInto posts body to path, wants 200 and decodes the answer into v.
func postInto(t testing.TB, ts *testServer, path, body string, v any) {
	t.Helper()
	status, _, b := do(t, http.MethodPost, ts.url+path, body, nil)
	if status != http.StatusOK {
		t.Fatalf("POST %s %s: status %d: %s", path, body, status, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("POST %s: %v: %s", path, err, b)
	}
}

// tokenizeIDs tokenizes text through POST /tokenize with the given extra
// fields (a JSON object's inside, or "").
func tokenizeIDs(t testing.TB, ts *testServer, text, extra string) []int32 {
	t.Helper()
	c, _ := json.Marshal(text)
	body := `{"content": ` + string(c)
	if extra != "" {
		body += ", " + extra
	}
	var r struct {
		Tokens []int32 `json:"tokens"`
	}
	postInto(t, ts, "/tokenize", body+"}", &r)
	return r.Tokens
}

// detokenize returns POST /detokenize's content for ids.
func detokenize(t testing.TB, ts *testServer, ids []int32) string {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"tokens": nonNil(ids)})
	var r struct {
		Content *string `json:"content"`
	}
	postInto(t, ts, "/detokenize", string(b), &r)
	if r.Content == nil {
		t.Fatal("/detokenize answered no content")
	}
	return *r.Content
}

// errorCase is a request an endpoint refuses: its status, param and code.
type errorCase struct {
	name, method, path, body string
	status                   int
	param, code              string
	message                  string // a part of the message, if set
}

func checkErrorCases(t *testing.T, ts *testServer, cases []errorCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, h, b := do(t, tc.method, ts.url+tc.path, tc.body, nil)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, b)
			}
			var body map[string]any
			if err := json.Unmarshal(b, &body); err != nil {
				t.Fatalf("error body is not JSON: %q", b)
			}
			checkErrorBody(t, body, tc.param, tc.code)
			if msg := body["error"].(map[string]any)["message"].(string); !strings.Contains(msg, tc.message) {
				t.Fatalf("message %q does not say %q", msg, tc.message)
			}
			if tc.status == http.StatusMethodNotAllowed && h.Get("Allow") == "" {
				t.Fatal("405 without an Allow header")
			}
		})
	}
}

// specialText has control tokens, accented letters, CJK and emoji, which
// the bundled vocabulary splits into byte tokens.
const specialText = "[gMASK]<sop><|user|>héllo 世界 🙂<|assistant|>"

func TestTokenize(t *testing.T) {
	ts := newTestServer(t, nil, nil)
	tok := ts.tok
	user, ok := tok.ID("<|user|>")
	if !ok {
		t.Fatal("no <|user|> token")
	}
	eAcute := tok.Encode("é", false, false) // two byte tokens: 0xc3 0xa9
	if len(eAcute) != 2 {
		t.Fatalf("é is %d tokens; the test wants a character split over two", len(eAcute))
	}
	for _, tc := range []struct {
		name, body string
		want       []int32
	}{
		{"defaults parse control tokens", `{"content": "<|user|>hi"}`, tok.Encode("<|user|>hi", false, true)},
		{"parse_special false", `{"content": "<|user|>hi", "parse_special": false}`, tok.Encode("<|user|>hi", false, false)},
		{"add_special", `{"content": "hi", "add_special": true}`, tok.Encode("hi", true, true)},
		{"non-ASCII", `{"content": "héllo 世界 🙂"}`, tok.Encode("héllo 世界 🙂", false, true)},
		{"mixed array", `{"content": ["<|user|>", 71, "ello"]}`, append(append([]int32{user}, 71), tok.Encode("ello", false, true)...)},
		{"empty", `{"content": ""}`, []int32{}},
		{"no content", `{}`, []int32{}},
		{"null content", `{"content": null}`, []int32{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r struct {
				Tokens []int32 `json:"tokens"`
			}
			postInto(t, ts, "/tokenize", tc.body, &r)
			if r.Tokens == nil || !slices.Equal(r.Tokens, tc.want) {
				t.Fatalf("tokens %v, want %v", r.Tokens, tc.want)
			}
		})
	}
	if got := tokenizeIDs(t, ts, "<|user|>hi", ""); !slices.Contains(got, user) {
		t.Fatalf("default tokenize %v has no <|user|> (%d)", got, user)
	}
	if got := tokenizeIDs(t, ts, "<|user|>hi", `"parse_special": false`); slices.Contains(got, user) {
		t.Fatalf("parse_special false %v has the <|user|> token", got)
	}

	t.Run("with_pieces", func(t *testing.T) {
		const text = "<|user|>é!"
		var r struct {
			Tokens []struct {
				ID    int32           `json:"id"`
				Piece json.RawMessage `json:"piece"`
			} `json:"tokens"`
		}
		postInto(t, ts, "/tokenize", `{"content": "<|user|>é!", "with_pieces": true}`, &r)
		ids := tok.Encode(text, false, true)
		want := []string{`"<|user|>"`, `[195]`, `[169]`, `"!"`}
		if len(r.Tokens) != len(want) {
			t.Fatalf("%d tokens, want %d: %+v", len(r.Tokens), len(want), r.Tokens)
		}
		for i, p := range r.Tokens {
			if p.ID != ids[i] || string(p.Piece) != want[i] {
				t.Fatalf("token %d: id %d piece %s, want id %d piece %s", i, p.ID, p.Piece, ids[i], want[i])
			}
		}
	})

	checkErrorCases(t, ts, []errorCase{
		{"malformed JSON", "POST", "/tokenize", `{"content": `, 400, "", "invalid_json", ""},
		{"content a number", "POST", "/tokenize", `{"content": 5}`, 400, "content", "invalid_type", "a number"},
		{"content an object", "POST", "/tokenize", `{"content": {"text": "hi"}}`, 400, "content", "invalid_type", ""},
		{"add_special a string", "POST", "/tokenize", `{"content": "hi", "add_special": "yes"}`, 400, "add_special", "invalid_type", ""},
		{"with_pieces a number", "POST", "/tokenize", `{"content": "hi", "with_pieces": 1}`, 400, "with_pieces", "invalid_type", ""},
		{"fractional id", "POST", "/tokenize", `{"content": ["hi", 1.5]}`, 400, "content[1]", "invalid_type", ""},
		{"id out of range", "POST", "/tokenize", `{"content": ["hi", 99999]}`, 400, "content[1]", "invalid_value", "99999"},
		{"negative id", "POST", "/tokenize", `{"content": [-1]}`, 400, "content[0]", "invalid_value", "-1"},
		{"null element", "POST", "/tokenize", `{"content": ["hi", null]}`, 400, "content[1]", "invalid_type", "null"},
		{"boolean element", "POST", "/tokenize", `{"content": [true]}`, 400, "content[0]", "invalid_type", "boolean"},
		{"nested array", "POST", "/tokenize", `{"content": [[1]]}`, 400, "content[0]", "invalid_type", "array"},
		{"huge id", "POST", "/tokenize", `{"content": [9007199254740993]}`, 400, "content[0]", "invalid_value", "9007199254740993"},
		{"GET", "GET", "/tokenize", "", 405, "", "method_not_allowed", ""},
	})
}

func TestDetokenize(t *testing.T) {
	ts := newTestServer(t, nil, nil)
	tok := ts.tok
	n := tok.NumTokens()
	eAcute := tok.Encode("é", false, false)
	for _, tc := range []struct {
		name, body, want string
	}{
		{"text", mustJSON(map[string]any{"tokens": tok.Encode("hello world", false, true)}), "hello world"},
		{"control tokens shown", mustJSON(map[string]any{"tokens": tok.Encode("<|user|>hi<|assistant|>", false, true)}), "<|user|>hi<|assistant|>"},
		{"split character whole", mustJSON(map[string]any{"tokens": eAcute}), "é"},
		{"half a character", mustJSON(map[string]any{"tokens": eAcute[:1]}), "\uFFFD"},
		{"empty", `{"tokens": []}`, ""},
		{"no tokens", `{}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r struct {
				Content *string `json:"content"`
			}
			postInto(t, ts, "/detokenize", tc.body, &r)
			if r.Content == nil || *r.Content != tc.want {
				t.Fatalf("content %v, want %q", r.Content, tc.want)
			}
		})
	}
	checkErrorCases(t, ts, []errorCase{
		{"malformed JSON", "POST", "/detokenize", `{"tokens": [1,`, 400, "", "invalid_json", ""},
		{"tokens a string", "POST", "/detokenize", `{"tokens": "hello"}`, 400, "tokens", "invalid_type", ""},
		{"token a string", "POST", "/detokenize", `{"tokens": [1, "2"]}`, 400, "tokens", "invalid_type", ""},
		{"fractional token", "POST", "/detokenize", `{"tokens": [1.5]}`, 400, "tokens", "invalid_type", ""},
		{"id the vocabulary size", "POST", "/detokenize", fmt.Sprintf(`{"tokens": [1, %d]}`, n), 400, "tokens", "invalid_value", fmt.Sprintf("token id %d (tokens[1])", n)},
		{"negative id", "POST", "/detokenize", `{"tokens": [-7]}`, 400, "tokens", "invalid_value", "token id -7"},
		{"id over int32", "POST", "/detokenize", `{"tokens": [4294967296]}`, 400, "tokens", "invalid_value", "4294967296"},
		{"GET", "GET", "/detokenize", "", 405, "", "method_not_allowed", ""},
	})
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestTokenizeRoundTrip: /detokenize gives back the text /tokenize read,
// control tokens and split characters included, parsed as control tokens
// or not; the with_pieces pieces add up to it too.
func TestTokenizeRoundTrip(t *testing.T) {
	ts := newTestServer(t, nil, nil)
	for _, text := range []string{
		specialText,
		"plain ASCII text, with punctuation!",
		"Grüße, ça va? Привет мир. こんにちは 🦙🙂 ꙮ",
		"<|system|>sys<|user|>Q <tool_call>f<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>",
		"  leading and trailing spaces \n\t",
	} {
		for _, extra := range []string{"", `"parse_special": false`, `"add_special": true`} {
			t.Run(fmt.Sprintf("%.12q %s", text, extra), func(t *testing.T) {
				ids := tokenizeIDs(t, ts, text, extra)
				if got := detokenize(t, ts, ids); got != text {
					t.Fatalf("detokenize(tokenize(%q)) = %q", text, got)
				}
			})
		}
		t.Run(fmt.Sprintf("%.12q pieces", text), func(t *testing.T) {
			var r struct {
				Tokens []struct {
					ID    int32 `json:"id"`
					Piece any   `json:"piece"`
				} `json:"tokens"`
			}
			postInto(t, ts, "/tokenize", mustJSON(map[string]any{"content": text, "with_pieces": true}), &r)
			var b []byte
			for _, p := range r.Tokens {
				switch v := p.Piece.(type) {
				case string:
					b = append(b, v...)
				case []any:
					for _, x := range v {
						b = append(b, byte(x.(float64)))
					}
				default:
					t.Fatalf("piece %v of token %d is neither a string nor bytes", p.Piece, p.ID)
				}
			}
			if string(b) != text {
				t.Fatalf("pieces add up to %q, want %q", b, text)
			}
		})
	}
}

// weatherTools is the tools array of the chat bodies.
const weatherTools = `[` + weatherToolJSON + `]`

// TestApplyTemplate: /apply-template's prompt is the one
// /v1/chat/completions runs for the same body: tokenized, it is the
// prompt prepareChat builds, and as many tokens as the chat's
// usage.prompt_tokens.
func TestApplyTemplate(t *testing.T) {
	ts := newTestServer(t, nil, replyScript(testModel(t).tok, "ok", "<|user|>"))
	const user = `{"role": "user", "content": "What is the weather in Paris?"}`
	for _, tc := range []struct {
		name, fields string // fields: the body's members besides max_tokens
		suffix       string // the prompt's end
	}{
		{"one message", `"messages": [` + user + `]`, "<|assistant|><think>"},
		{"conversation", `"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
			{"role": "assistant", "content": "Hello!", "reasoning_content": "greet"}, ` + user + `]`, "<|assistant|><think>"},
		{"content parts", `"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]`, "<think>"},
		{"enable_thinking false", `"messages": [` + user + `], "chat_template_kwargs": {"enable_thinking": false}`, "</think>"},
		{"reasoning_effort none", `"messages": [` + user + `], "reasoning_effort": "none"`, "</think>"},
		{"tools", `"messages": [` + user + `], "tools": ` + weatherTools, "<think>"},
		{"tool_choice required", `"messages": [` + user + `], "tools": ` + weatherTools + `, "tool_choice": "required"`, "<tool_call>"},
		{"named tool", `"messages": [` + user + `], "tools": ` + weatherTools +
			`, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}`, "<tool_call>get_weather"},
		{"tool result", `"messages": [` + user + `, {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
			"function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
			{"role": "tool", "tool_call_id": "call_1", "content": "sunny"}], "tools": ` + weatherTools, "<think>"},
		{"other fields ignored", `"model": "` + testModelID + `", "temperature": 0.2, "stream": false, "messages": [` + user + `]`, "<think>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := "{" + tc.fields + "}"
			var r struct {
				Prompt *string `json:"prompt"`
			}
			postInto(t, ts, "/apply-template", body, &r)
			if r.Prompt == nil || !strings.HasPrefix(*r.Prompt, "[gMASK]<sop>") || !strings.HasSuffix(*r.Prompt, tc.suffix) {
				t.Fatalf("prompt %v, want [gMASK]<sop>...%s", r.Prompt, tc.suffix)
			}
			ids := tokenizeIDs(t, ts, *r.Prompt, "")

			var req chatRequest
			if err := json.Unmarshal([]byte(body), &req); err != nil {
				t.Fatal(err)
			}
			prep, e := ts.s.prepareChat(&req)
			if e != nil {
				t.Fatal(e)
			}
			if !slices.Equal(prep.prompt, ids) {
				t.Fatalf("the chat prompt is %d tokens %v,\n/apply-template's %d tokens %v", len(prep.prompt), prep.prompt, len(ids), ids)
			}

			var c struct {
				Usage struct {
					PromptTokens int `json:"prompt_tokens"`
				} `json:"usage"`
			}
			postInto(t, ts, "/v1/chat/completions", "{"+tc.fields+`, "max_tokens": 1}`, &c)
			if c.Usage.PromptTokens != len(ids) {
				t.Fatalf("chat usage.prompt_tokens %d, /apply-template's prompt %d tokens", c.Usage.PromptTokens, len(ids))
			}
		})
	}

	checkErrorCases(t, ts, []errorCase{
		{"malformed JSON", "POST", "/apply-template", `{"messages": [`, 400, "", "invalid_json", ""},
		{"messages a string", "POST", "/apply-template", `{"messages": "hi"}`, 400, "messages", "invalid_type", ""},
		{"no messages", "POST", "/apply-template", `{"messages": []}`, 400, "messages", "invalid_value", ""},
		{"missing messages", "POST", "/apply-template", `{}`, 400, "messages", "invalid_value", ""},
		{"role", "POST", "/apply-template", `{"messages": [{"role": "wizard", "content": "hi"}]}`, 400, "messages[0].role", "invalid_value", "wizard"},
		{"content part", "POST", "/apply-template", `{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}`, 400, "messages[0].content", "invalid_value", ""},
		{"tool", "POST", "/apply-template", `{"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}]}`, 400, "tools[0]", "invalid_value", ""},
		{"tool_choice", "POST", "/apply-template", `{"messages": [{"role": "user", "content": "hi"}], "tool_choice": "always"}`, 400, "tool_choice", "invalid_value", ""},
		{"tool_choice unknown function", "POST", "/apply-template", `{"messages": [{"role": "user", "content": "hi"}], "tools": ` + weatherTools +
			`, "tool_choice": {"type": "function", "function": {"name": "nope"}}}`, 400, "tool_choice", "invalid_value", "nope"},
		{"enable_thinking", "POST", "/apply-template", `{"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"enable_thinking": "no"}}`, 400, "chat_template_kwargs.enable_thinking", "invalid_value", ""},
		{"reasoning_effort", "POST", "/apply-template", `{"messages": [{"role": "user", "content": "hi"}], "reasoning_effort": "max"}`, 400, "reasoning_effort", "invalid_value", ""},
		{"tool arguments", "POST", "/apply-template", `{"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{"}}]}]}`, 400, "messages[0].tool_calls[0].function.arguments", "invalid_value", ""},
		{"GET", "GET", "/apply-template", "", 405, "", "method_not_allowed", ""},
	})

	// A prompt too long to run is still rendered: a script can measure it.
	small := newTestServer(t, func(c *Config) { c.ContextSize = 32 }, nil)
	long := mustJSON(map[string]any{"messages": []map[string]string{{"role": "user", "content": strings.Repeat("word ", 50)}}})
	var r struct {
		Prompt string `json:"prompt"`
	}
	postInto(t, small, "/apply-template", long, &r)
	if n := len(small.tok.Encode(r.Prompt, false, true)); n < 32 {
		t.Fatalf("the long prompt is %d tokens, want more than the context of 32", n)
	}
	if status, b := post(t, small.url, "/v1/chat/completions", long, nil); status != 400 {
		t.Fatalf("the chat endpoint ran the long prompt: %d %v", status, b)
	}
}

func TestProps(t *testing.T) {
	l := testModel(t)
	type propsBody struct {
		DefaultGenerationSettings struct {
			NCtx   int                `json:"n_ctx"`
			Params generationDefaults `json:"params"`
		} `json:"default_generation_settings"`
		TotalSlots   int             `json:"total_slots"`
		ModelPath    string          `json:"model_path"`
		ModelAlias   string          `json:"model_alias"`
		ChatTemplate *string         `json:"chat_template"`
		BOSToken     string          `json:"bos_token"`
		EOSToken     string          `json:"eos_token"`
		Modalities   map[string]bool `json:"modalities"`
		BuildInfo    string          `json:"build_info"`
	}
	o := sample.DefaultOptions(0)
	params := generationDefaults{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1, RepeatLastN: -1, Seed: -1, CachePrompt: true}
	// The expected numbers are the sampler's own defaults.
	if float32(params.Temperature) != o.Temperature || params.TopK != o.TopK || float32(params.TopP) != o.TopP ||
		float32(params.MinP) != o.MinP || float32(params.RepeatPenalty) != o.RepeatPenalty {
		t.Fatalf("the test's defaults %+v are not sample.DefaultOptions %+v", params, o)
	}
	for _, tc := range []struct {
		name              string
		edit              func(*Config)
		path, template    string
		parallel, context int
	}{
		{"configured", func(c *Config) {
			c.Parallel, c.ContextSize, c.ModelPath = 3, 256, "/models/glm5-mini.Q8_0.gguf"
		}, "/models/glm5-mini.Q8_0.gguf", l.tmpl.Source(), 3, 256},
		{"defaults, built-in template", func(c *Config) {
			c.Parallel, c.ContextSize, c.Template = 0, 0, chat.GLM5()
		}, testModelID, "", DefaultParallel, min(l.m.Config().ContextLength, DefaultContextSize)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTestServer(t, tc.edit, nil)
			status, _, b := do(t, http.MethodGet, ts.url+"/props", "", nil)
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, b)
			}
			var p propsBody
			if err := json.Unmarshal(b, &p); err != nil {
				t.Fatal(err)
			}
			if p.DefaultGenerationSettings.NCtx != tc.context || p.DefaultGenerationSettings.NCtx != ts.s.ContextSize() {
				t.Fatalf("n_ctx %d, want %d (ContextSize %d)", p.DefaultGenerationSettings.NCtx, tc.context, ts.s.ContextSize())
			}
			if p.TotalSlots != tc.parallel || p.ModelPath != tc.path || p.ModelAlias != testModelID {
				t.Fatalf("total_slots %d model_path %q model_alias %q, want %d %q %q", p.TotalSlots, p.ModelPath, p.ModelAlias, tc.parallel, tc.path, testModelID)
			}
			if p.ChatTemplate == nil || *p.ChatTemplate != tc.template {
				t.Fatalf("chat_template %.40v, want %.40q", p.ChatTemplate, tc.template)
			}
			if p.DefaultGenerationSettings.Params != params {
				t.Fatalf("params %+v, want %+v", p.DefaultGenerationSettings.Params, params)
			}
			if p.BOSToken != "[gMASK]" || p.EOSToken != "<|endoftext|>" || p.BuildInfo != "glmrun" ||
				!reflect.DeepEqual(p.Modalities, map[string]bool{"vision": false, "audio": false}) {
				t.Fatalf("bos %q eos %q build %q modalities %v", p.BOSToken, p.EOSToken, p.BuildInfo, p.Modalities)
			}
			// Exact numbers in the JSON text, not float32 noise.
			if !strings.Contains(string(b), `"temperature":0.8,`) || !strings.Contains(string(b), `"top_p":0.95,`) {
				t.Fatalf("params written inexactly: %s", b)
			}
			if status, _, _ := do(t, http.MethodHead, ts.url+"/props", "", nil); status != http.StatusOK {
				t.Fatalf("HEAD /props: %d", status)
			}
			checkErrorCases(t, ts, []errorCase{{"POST", "POST", "/props", `{}`, 405, "", "method_not_allowed", ""}})
		})
	}
}

// slotsOf reads GET /slots.
func slotsOf(t testing.TB, ts *testServer) []slotInfo {
	t.Helper()
	status, _, b := do(t, http.MethodGet, ts.url+"/slots", "", nil)
	if status != http.StatusOK {
		t.Fatalf("/slots: %d %s", status, b)
	}
	var s []slotInfo
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("/slots: %v: %s", err, b)
	}
	return s
}

// TestSlots: /slots lists the slots created so far, shows a request held
// in its step as processing, and after a request the tokens its slot's
// cache keeps.
func TestSlots(t *testing.T) {
	gate := &gateStepper{gate: make(chan struct{})}
	ts := newTestServer(t, func(c *Config) { c.Parallel = 2; c.ContextSize = 256; c.Stepper = gate }, nil)
	idle := func(id, cached int) slotInfo {
		return slotInfo{ID: id, IDTask: -1, NCtx: 256, NCached: cached, NextToken: nextToken{NRemain: -1}}
	}
	if got, want := slotsOf(t, ts), []slotInfo{idle(0, 0)}; !reflect.DeepEqual(got, want) {
		t.Fatalf("a new server's slots %+v, want %+v (New makes one)", got, want)
	}

	const maxTokens = 3
	bodyOf := func(q string) string {
		return fmt.Sprintf(`{"messages": [{"role": "user", "content": %q}], "max_tokens": %d, "temperature": 0, "logit_bias": %s}`,
			q, maxTokens, mustJSON(eogBias(ts.tok)))
	}
	promptLen := func(body string) int {
		var req chatRequest
		if err := json.Unmarshal([]byte(body), &req); err != nil {
			t.Fatal(err)
		}
		p, e := ts.s.prepareChat(&req)
		if e != nil {
			t.Fatal(e)
		}
		return len(p.prompt)
	}
	type reply struct {
		status int
		body   map[string]any
	}
	replies := make(chan reply, 2)
	send := func(body string) {
		status, b := post(t, ts.url, "/v1/chat/completions", body, nil)
		replies <- reply{status, b}
	}
	a, b := bodyOf("first question"), bodyOf("a second, longer question")
	na, nb := promptLen(a), promptLen(b)
	if na == nb {
		t.Fatal("the two prompts must differ in length, to tell their usages apart")
	}
	byTask := func(s []slotInfo, task int64) (slotInfo, bool) {
		for _, in := range s {
			if in.IDTask == task {
				return in, true
			}
		}
		return slotInfo{}, false
	}
	go send(a)
	// The request is prefilled (its first token sampled) and then waits
	// at the gate for its first decode step. It gets a new slot, id 1:
	// while fewer than Parallel exist, a request that finds no cached
	// prefix gets a fresh one, and the first stays free.
	waitFor(t, "the first request processing", func() bool {
		in, ok := byTask(slotsOf(t, ts), 0)
		return ok && in.NCached == na
	})
	want := []slotInfo{idle(0, 0), {ID: 1, IDTask: 0, NCtx: 256, IsProcessing: true, NCached: na, NPromptTokens: na,
		NextToken: nextToken{HasNextToken: true, NRemain: maxTokens - 1, NDecoded: 1}}}
	if got := slotsOf(t, ts); !reflect.DeepEqual(got, want) {
		t.Fatalf("the first request held at the gate: %+v, want %+v", got, want)
	}
	if status, _, raw := do(t, http.MethodGet, ts.url+"/slots?fail_on_no_slot=1", "", nil); status != http.StatusOK {
		t.Fatalf("fail_on_no_slot with a free slot: %d %s", status, raw)
	}

	// The second request waits in the queue while the scheduler is held in
	// the step; one step later it takes slot 0 and is prefilled.
	go send(b)
	waitFor(t, "the second request queued", func() bool { return ts.s.sched.queue.len() == 1 })
	gate.gate <- struct{}{}
	waitFor(t, "both requests processing", func() bool {
		in, ok := byTask(slotsOf(t, ts), 1)
		return ok && in.NCached == nb
	})
	want = []slotInfo{
		{ID: 0, IDTask: 1, NCtx: 256, IsProcessing: true, NCached: nb, NPromptTokens: nb,
			NextToken: nextToken{HasNextToken: true, NRemain: maxTokens - 1, NDecoded: 1}},
		{ID: 1, IDTask: 0, NCtx: 256, IsProcessing: true, NCached: na + 1, NPromptTokens: na,
			NextToken: nextToken{HasNextToken: true, NRemain: maxTokens - 2, NDecoded: 2}},
	}
	if got := slotsOf(t, ts); !reflect.DeepEqual(got, want) {
		t.Fatalf("both requests held at the gate: %+v, want %+v", got, want)
	}
	status, _, raw := do(t, http.MethodGet, ts.url+"/slots?fail_on_no_slot=1", "", nil)
	if status != http.StatusServiceUnavailable {
		t.Fatalf("fail_on_no_slot with both slots busy: %d %s", status, raw)
	}
	var eb map[string]any
	if err := json.Unmarshal(raw, &eb); err != nil {
		t.Fatal(err)
	}
	checkErrorBody(t, eb, "", "no_slot_available")

	close(gate.gate)
	usages := map[int]int{} // prompt tokens -> completion tokens
	for range 2 {
		r := <-replies
		if r.status != http.StatusOK {
			t.Fatalf("a request: %d %v", r.status, r.body)
		}
		u := r.body["usage"].(map[string]any)
		usages[int(u["prompt_tokens"].(float64))] = int(u["completion_tokens"].(float64))
	}
	if usages[na] != maxTokens || usages[nb] != maxTokens {
		t.Fatalf("usages %v, want %d and %d prompt tokens, %d completion tokens each", usages, na, nb, maxTokens)
	}
	// Each slot keeps its prompt and the reply's tokens that were fed back
	// through the model: all but the last, which was sampled and never
	// run. The replies came after their slots were settled.
	if got, want := slotsOf(t, ts), []slotInfo{idle(0, nb+maxTokens-1), idle(1, na+maxTokens-1)}; !reflect.DeepEqual(got, want) {
		t.Fatalf("slots after the requests: %+v, want %+v", got, want)
	}
	if status, _, raw := do(t, http.MethodGet, ts.url+"/slots?fail_on_no_slot=1", "", nil); status != http.StatusOK {
		t.Fatalf("fail_on_no_slot with idle slots: %d %s", status, raw)
	}
	checkErrorCases(t, ts, []errorCase{{"POST", "POST", "/slots", `{}`, 405, "", "method_not_allowed", ""}})

	ts.s.Close()
	if s := ts.s.sched.slots.Load(); s == nil || len(*s) != 0 {
		t.Fatalf("slots after Close: %v, want none (their sessions are closed)", s)
	}
}

// TestLlamaEndpointsAPIKey: with an API key, llama-server's endpoints need
// it, as llama-server's do, and answer with it; /health stays open.
func TestLlamaEndpointsAPIKey(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.APIKey = "sekret" }, nil)
	for _, ep := range []struct{ method, path, body string }{
		{"POST", "/tokenize", `{"content": "hi"}`},
		{"POST", "/detokenize", `{"tokens": [71]}`},
		{"POST", "/apply-template", `{"messages": [{"role": "user", "content": "hi"}]}`},
		{"GET", "/props", ""},
		{"GET", "/slots", ""},
	} {
		for _, tc := range []struct {
			name   string
			header map[string]string
			status int
		}{
			{"no key", nil, 401},
			{"wrong key", map[string]string{"Authorization": "Bearer nope"}, 401},
			{"x-api-key is Anthropic's only", map[string]string{"X-Api-Key": "sekret"}, 401},
			{"key", map[string]string{"Authorization": "Bearer sekret"}, 200},
			{"lowercase scheme", map[string]string{"Authorization": "bearer sekret"}, 200},
		} {
			t.Run(ep.path+" "+tc.name, func(t *testing.T) {
				status, h, b := do(t, ep.method, ts.url+ep.path, ep.body, tc.header)
				if status != tc.status {
					t.Fatalf("status %d, want %d: %s", status, tc.status, b)
				}
				if status == 401 {
					var body map[string]any
					if err := json.Unmarshal(b, &body); err != nil {
						t.Fatal(err)
					}
					checkErrorBody(t, body, "", "invalid_api_key")
					if h.Get("WWW-Authenticate") == "" {
						t.Fatal("401 without WWW-Authenticate")
					}
				}
			})
		}
	}
	if status, _ := get(t, ts.url, "/health"); status != 200 {
		t.Fatalf("/health without a key: %d", status)
	}
	// The requests are counted under their own paths.
	_, m := get(t, ts.url, "/metrics")
	for _, want := range []string{`path="/tokenize",code="401"`, `path="/slots",code="200"`, `path="/apply-template",code="200"`} {
		if !strings.Contains(string(m), want) {
			t.Errorf("/metrics has no glmrun_requests_total{%s}", want)
		}
	}
}
