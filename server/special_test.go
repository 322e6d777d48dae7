package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"

	"github.com/glmrun/glmrun/model/chat"
	"github.com/glmrun/glmrun/model/tokenizer"
)

// controlTexts are the texts of tok's control tokens.
func controlTexts(tok *tokenizer.Tokenizer) []string {
	var out []string
	for id := range int32(tok.NumTokens()) {
		if tok.Type(id) == tokenizer.TypeControl {
			out = append(out, tok.Text(id))
		}
	}
	return out
}

// checkNoControl fails if a control token's text is in a reply field.
func checkNoControl(t *testing.T, tok *tokenizer.Tokenizer, field, text string) {
	t.Helper()
	for _, c := range controlTexts(tok) {
		if strings.Contains(text, c) {
			t.Fatalf("%s %q holds the control token %s", field, text, c)
		}
	}
}

// byteToken returns the id of the vocabulary's token for the single byte b.
func byteToken(t testing.TB, tok *tokenizer.Tokenizer, b byte) int32 {
	t.Helper()
	for id := range int32(tok.NumTokens()) {
		if tok.Type(id) == tokenizer.TypeNormal && tok.Piece(id, false) == string([]byte{b}) {
			return id
		}
	}
	t.Fatalf("no token for the byte %#x", b)
	return 0
}

// noThinking turns thinking off in p.
func noThinking(p *openai.ChatCompletionNewParams) {
	p.SetExtraFields(map[string]any{"chat_template_kwargs": map[string]any{"enable_thinking": false}})
}

// TestChatControlTokens: control tokens never reach content or
// reasoning_content unless Config.Special; the markup ones are still
// parsed.
func TestChatControlTokens(t *testing.T) {
	tok := testModel(t).tok
	for _, tc := range []struct {
		name      string
		script    string
		thinking  bool
		special   bool
		reasoning string
		content   string
	}{
		{"role token in content", "Hello<|assistant|> world<|system|>!", false, false, "", "Hello world!"},
		{"role token in content, special", "Hello<|assistant|> world<|system|>!", false, true, "", "Hello<|assistant|> world<|system|>!"},
		{"in reasoning", "a[gMASK]b<sop></think>c/nothink", true, false, "ab", "c"},
		{"in reasoning, special", "a[gMASK]b<sop></think>c/nothink", true, true, "a[gMASK]b<sop>", "c/nothink"},
		{"stray think tags", "x<think>y</think>z</think><think>w", true, false, "xy", "zw"},
		{"stray think tags, special", "x<think>y</think>z</think><think>w", true, true, "x<think>y", "z</think><think>w"},
		{"think opened though off", "\n<think>hm</think>ok", false, false, "hm", "ok"},
		{"think opened though off, special", "\n<think>hm</think>ok", false, true, "hm", "ok"},
		{"tool markup without tools", "</think>see<tool_call>f<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>", true, false, "", "seefkv"},
		{"tool response tags", "</think><tool_response>r</tool_response>", true, false, "", "r"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTestServer(t, func(c *Config) { c.Special = tc.special }, scriptFor(tok, tc.script, "<|user|>"))
			p := openai.ChatCompletionNewParams{Model: testModelID, Messages: userMsg("Hi")}
			if !tc.thinking {
				noThinking(&p)
			}
			r := bothWays(t, ts, p)
			if r.reasoning != tc.reasoning || r.content != tc.content || r.finish != "stop" {
				t.Fatalf("reasoning %q, content %q, finish %q; want %q, %q, stop", r.reasoning, r.content, r.finish, tc.reasoning, tc.content)
			}
			if !tc.special {
				checkNoControl(t, tok, "content", r.content)
				checkNoControl(t, tok, "reasoning", r.reasoning)
			}
		})
	}
}

// TestStopControlTokens: stop strings match the reply's text, which holds
// control tokens only with Config.Special.
func TestStopControlTokens(t *testing.T) {
	tok := testModel(t).tok
	for _, tc := range []struct {
		name    string
		special bool
		stop    string
		content string
	}{
		{"across a hidden token", false, "ab", ""},
		{"a hidden token", false, "<|assistant|>", "abc"},
		{"a hidden markup tag", false, "</think>", "abc"},
		{"a shown token", true, "<|assistant|>", "a"},
		{"a shown markup tag", true, "</think>", "a<|assistant|>b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTestServer(t, func(c *Config) { c.Special = tc.special }, scriptFor(tok, "a<|assistant|>b</think>c", "<|user|>"))
			p := openai.ChatCompletionNewParams{Model: testModelID, Messages: userMsg("Hi"),
				Stop: openai.ChatCompletionNewParamsStopUnion{OfString: openai.String(tc.stop)}}
			noThinking(&p)
			if r := bothWays(t, ts, p); r.content != tc.content || r.finish != "stop" {
				t.Fatalf("content %q, finish %q; want %q, stop", r.content, r.finish, tc.content)
			}
		})
	}
}

// TestCompletionControlTokens: a completion's text drops control tokens
// unless Config.Special.
func TestCompletionControlTokens(t *testing.T) {
	tok := testModel(t).tok
	for _, tc := range []struct {
		name    string
		special bool
		want    string
	}{
		{"hidden", false, "alpha beta gamma"},
		{"special", true, "alpha<|assistant|> beta<think> gamma</tool_call>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTestServer(t, func(c *Config) { c.Special = tc.special },
				scriptFor(tok, "alpha<|assistant|> beta<think> gamma</tool_call>", "<|endoftext|>"))
			p := openai.CompletionNewParams{
				Model:  openai.CompletionNewParamsModel(testModelID),
				Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Greek:")}, MaxTokens: openai.Int(50),
			}
			whole, streamed := completeOnce(t, ts, p), completeStream(t, ts, p)
			if whole.text != tc.want || streamed.text != tc.want || whole.finish != "stop" || streamed.finish != "stop" {
				t.Fatalf("whole %q (%s), streamed %q (%s); want %q, stop", whole.text, whole.finish, streamed.text, streamed.finish, tc.want)
			}
		})
	}
}

// TestByteTokensUTF8: byte tokens that do not form characters become
// U+FFFD in content, reasoning and completion text, streamed and whole
// alike, and every text is valid UTF-8. The bytes 0xF8-0xFF are those of
// the scheduler's markup markers: as tokens they are text, not markup.
func TestByteTokensUTF8(t *testing.T) {
	tok := testModel(t).tok
	b := func(bs ...byte) []int32 {
		ids := make([]int32, len(bs))
		for i, x := range bs {
			ids[i] = byteToken(t, tok, x)
		}
		return ids
	}
	special := func(name string) int32 {
		id, ok := tok.ID(name)
		if !ok {
			t.Fatalf("no token %s", name)
		}
		return id
	}
	cat := func(parts ...[]int32) []int32 {
		var out []int32
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	thinkEnd, gmask := []int32{special("</think>")}, []int32{special("[gMASK]")}
	for _, tc := range []struct {
		name    string
		ids     []int32 // the reply, before the end-of-generation token
		special bool
		want    string // the text (thinking off), or reasoning + "|" + content (thinking on, split at thinkEnd)
	}{
		{"lone lead byte before ASCII", b(0xc3, 'a'), false, "\uFFFDa"},
		{"whole character", b(0xc3, 0xa9), false, "é"},
		{"broken three-byte character", b(0xe4, 0xb8, 'b'), false, "\uFFFD\uFFFDb"},
		{"four-byte character", b(0xf0, 0x9f, 0x9a, 0x80), false, "🚀"},
		{"lone continuation", b('x', 0x80, 'y'), false, "x\uFFFDy"},
		{"marker-valued bytes", b(0xf8, 'x', 0xfa, 0xff), false, "\uFFFDx\uFFFD\uFFFD"},
		{"lead byte at the end", b('z', 0xe4), false, "z\uFFFD"},
		{"hidden control token inside a character", cat(b(0xc3), gmask, b(0xa9)), false, "é"},
		{"shown control token inside a character", cat(b(0xc3), gmask, b(0xa9)), true, "\uFFFD[gMASK]\uFFFD"},
		{"reasoning ends inside a character", cat(b(0xc3), thinkEnd, b(0xa9, 'k')), false, "\uFFFD|\uFFFDk"},
		{"reasoning ends inside a character, special", cat(b(0xc3), thinkEnd, b(0xa9, 'k')), true, "\uFFFD|\uFFFDk"},
		{"marker-valued bytes in reasoning", cat(b(0xf9, 0xfb), thinkEnd, b(0xfa)), false, "\uFFFD\uFFFD|\uFFFD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script := append(append([]int32(nil), tc.ids...), special("<|user|>"))
			ts := newTestServer(t, func(c *Config) { c.Special = tc.special }, func([]int32) []int32 { return script })
			thinking := strings.Contains(tc.want, "|")
			p := openai.ChatCompletionNewParams{Model: testModelID, Messages: userMsg("Hi")}
			if !thinking {
				noThinking(&p)
			}
			r := bothWays(t, ts, p) // whole and streamed agree, deltas are valid UTF-8
			got := r.content
			if thinking {
				got = r.reasoning + "|" + r.content
			}
			if got != tc.want || !utf8.ValidString(r.content) || !utf8.ValidString(r.reasoning) {
				t.Fatalf("chat gave %q, want %q", got, tc.want)
			}
			if thinking {
				return
			}
			// The scheduler's own events are valid UTF-8, not only once
			// JSON has coerced them.
			smp, e := ts.s.sampler(samplingParams{})
			if e != nil {
				t.Fatal(e)
			}
			req, e := ts.s.start(context.Background(), ts.tok.Encode("Hi", true, true), smp, 0, nil, false, 0, ts.s.markers, extras{})
			if e != nil {
				t.Fatal(e)
			}
			var text string
			for done := false; !done; {
				evs, err := next(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				for _, ev := range evs {
					if ev.err != nil {
						t.Fatal(ev.err)
					}
					if !utf8.ValidString(ev.text) {
						t.Fatalf("event text %q is not valid UTF-8", ev.text)
					}
					text += ev.text
					done = done || ev.finish != ""
				}
			}
			if text != tc.want {
				t.Fatalf("events spell %q, want %q", text, tc.want)
			}
			// The same tokens as a completion.
			cp := openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(testModelID),
				Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Hi")}, MaxTokens: openai.Int(50)}
			whole, streamed := completeOnce(t, ts, cp), completeStream(t, ts, cp)
			if whole.text != tc.want || streamed.text != tc.want {
				t.Fatalf("completion whole %q, streamed %q; want %q", whole.text, streamed.text, tc.want)
			}
		})
	}
}

// TestByteTokensSampled: a logit bias that forces a lone byte token makes
// every sampled token one that is no character; each becomes U+FFFD, in
// the stream as in the whole reply.
func TestByteTokensSampled(t *testing.T) {
	ts := newTestServer(t, nil, nil)
	const n = 5
	for _, tc := range []struct {
		name string
		b    byte
	}{
		{"lead byte", 0xc3},
		{"marker-valued byte", 0xff},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bias := map[string]int64{itoa(byteToken(t, ts.tok, tc.b)): 100}
			want := strings.Repeat("\uFFFD", n)
			p := openai.ChatCompletionNewParams{Model: testModelID, Messages: userMsg("Hi"), MaxTokens: openai.Int(n),
				Temperature: openai.Float(0), LogitBias: bias}
			r := bothWays(t, ts, p) // thinking on: it is all reasoning
			if r.reasoning != want || r.content != "" || r.finish != "length" {
				t.Fatalf("reasoning %q, content %q, finish %q; want %q, \"\", length", r.reasoning, r.content, r.finish, want)
			}
			noThinking(&p)
			if r := bothWays(t, ts, p); r.content != want || r.reasoning != "" {
				t.Fatalf("thinking off: content %q, reasoning %q; want %q", r.content, r.reasoning, want)
			}
			cp := openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(testModelID),
				Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("Hi")},
				MaxTokens: openai.Int(n), Temperature: openai.Float(0), LogitBias: bias}
			whole, streamed := completeOnce(t, ts, cp), completeStream(t, ts, cp)
			if whole.text != want || streamed.text != want {
				t.Fatalf("completion whole %q, streamed %q; want %q", whole.text, streamed.text, want)
			}
		})
	}
}

// TestThinkingSwitch: thinking is switched per request by
// chat_template_kwargs.enable_thinking (which wins) or reasoning_effort
// "none"; the other reasoning_effort levels leave it on.
func TestThinkingSwitch(t *testing.T) {
	tok := testModel(t).tok
	for _, tc := range []struct {
		name     string
		extra    map[string]any
		thinking bool
	}{
		{"default", nil, true},
		{"enable_thinking false", map[string]any{"chat_template_kwargs": map[string]any{"enable_thinking": false}}, false},
		{"enable_thinking true", map[string]any{"chat_template_kwargs": map[string]any{"enable_thinking": true}}, true},
		{"reasoning_effort none", map[string]any{"reasoning_effort": "none"}, false},
		{"reasoning_effort high", map[string]any{"reasoning_effort": "high"}, true},
		{"reasoning_effort minimal", map[string]any{"reasoning_effort": "minimal"}, true},
		{"enable_thinking wins", map[string]any{"reasoning_effort": "none", "chat_template_kwargs": map[string]any{"enable_thinking": true}}, true},
		{"enable_thinking wins off", map[string]any{"reasoning_effort": "high", "chat_template_kwargs": map[string]any{"enable_thinking": false}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var prompt []int32
			script := scriptFor(tok, "Hmm.</think>Four.", "<|user|>")
			ts := newTestServer(t, nil, func(p []int32) []int32 { prompt = p; return script(p) })
			p := openai.ChatCompletionNewParams{Model: testModelID, Messages: userMsg("What is 2+2?")}
			if tc.extra != nil {
				p.SetExtraFields(tc.extra)
			}
			r := bothWays(t, ts, p)
			text, _ := tok.Decode(prompt, true)
			wantEnd, reasoning, content := "<|assistant|><think>", "Hmm.", "Four."
			if !tc.thinking {
				// The template closed the block: the model's </think> is a
				// stray control token.
				wantEnd, reasoning, content = "<|assistant|></think>", "", "Hmm.Four."
			}
			if !strings.HasSuffix(text, wantEnd) {
				t.Fatalf("prompt ends %q, want ...%s", text[max(0, len(text)-30):], wantEnd)
			}
			if r.reasoning != reasoning || r.content != content {
				t.Fatalf("reasoning %q, content %q; want %q, %q", r.reasoning, r.content, reasoning, content)
			}
		})
	}
}

// TestReasoningEffortVariable: reasoning_effort reaches a template that
// reads it, and a chat_template_kwargs entry of the same name wins.
func TestReasoningEffortVariable(t *testing.T) {
	tmpl, err := chat.Parse(`{% for m in messages %}<|user|>{{ m.content }}{% endfor %}<|assistant|>` +
		`{% if reasoning_effort is defined %}[{{ reasoning_effort }}]{% endif %}</think>`)
	if err != nil {
		t.Fatal(err)
	}
	tok := testModel(t).tok
	for _, tc := range []struct {
		name  string
		extra map[string]any
		want  string
	}{
		{"absent", nil, "<|assistant|></think>"},
		{"low", map[string]any{"reasoning_effort": "low"}, "<|assistant|>[low]</think>"},
		{"kwarg wins", map[string]any{"reasoning_effort": "low", "chat_template_kwargs": map[string]any{"reasoning_effort": "high"}},
			"<|assistant|>[high]</think>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var prompt []int32
			script := scriptFor(tok, "ok", "<|user|>")
			ts := newTestServer(t, func(c *Config) { c.Template = tmpl }, func(p []int32) []int32 { prompt = p; return script(p) })
			p := openai.ChatCompletionNewParams{Model: testModelID, Messages: userMsg("Hi")}
			if tc.extra != nil {
				p.SetExtraFields(tc.extra)
			}
			if r := chatOnce(t, ts, p); r.content != "ok" {
				t.Fatalf("content %q, want ok", r.content)
			}
			if text, _ := tok.Decode(prompt, true); !strings.HasSuffix(text, tc.want) {
				t.Fatalf("prompt %q, want it to end %q", text, tc.want)
			}
		})
	}
}

// TestUnclosedReasoning: with thinking on (the prompt opened the block), a
// reply that never closes it is all reasoning, as llama-server and vLLM
// return it: reasoning_content holds the text, content is "" and
// finish_reason says why it ended.
func TestUnclosedReasoning(t *testing.T) {
	tok := testModel(t).tok
	const text = "Let me think about this carefully"
	ids := tok.Encode(text, false, false)
	for _, tc := range []struct {
		name   string
		max    int
		finish string
	}{
		{"cut by max_tokens", 3, "length"},
		{"ended by the model", 0, "stop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTestServer(t, nil, scriptFor(tok, text, "<|user|>"))
			body := `{"messages": [{"role": "user", "content": "Hi"}]`
			want := text
			if tc.max > 0 {
				body += `, "max_tokens": ` + itoa(int32(tc.max))
				want, _ = tok.Decode(ids[:tc.max], false)
			}
			status, b := post(t, ts.url, "/v1/chat/completions", body+`}`, nil)
			if status != 200 {
				t.Fatalf("status %d: %v", status, b)
			}
			raw, _ := json.Marshal(b)
			var resp struct {
				Choices []struct {
					Message struct {
						Content          *string `json:"content"`
						ReasoningContent *string `json:"reasoning_content"`
					} `json:"message"`
					FinishReason string `json:"finish_reason"`
				} `json:"choices"`
			}
			if err := json.Unmarshal(raw, &resp); err != nil || len(resp.Choices) != 1 {
				t.Fatalf("response %s: %v", raw, err)
			}
			m := resp.Choices[0].Message
			if m.Content == nil || *m.Content != "" || m.ReasoningContent == nil || *m.ReasoningContent != want ||
				resp.Choices[0].FinishReason != tc.finish {
				t.Fatalf("response %s; want content \"\", reasoning_content %q, finish_reason %s", raw, want, tc.finish)
			}
			p := openai.ChatCompletionNewParams{Model: testModelID, Messages: userMsg("Hi")}
			if tc.max > 0 {
				p.MaxTokens = openai.Int(int64(tc.max))
			}
			if r := chatStream(t, ts, p); r.reasoning != want || r.content != "" || r.finish != tc.finish {
				t.Fatalf("streamed reasoning %q, content %q, finish %q", r.reasoning, r.content, r.finish)
			}
		})
	}
}
