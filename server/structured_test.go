package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/glmrun/glmrun/internal/schematest"
)

func schemaFormat(schema map[string]any) openai.ChatCompletionNewParamsResponseFormatUnion {
	return openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
		JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "reply", Schema: schema, Strict: openai.Bool(true)}}}
}

// TestStructuredRandomSchemas sends 100 seeded requests, each with a random
// schema of the supported subset, through the official client, sampling at
// temperature 1 from the bundled (random) model: every reply must end by
// itself and be JSON valid under its schema.
func TestStructuredRandomSchemas(t *testing.T) {
	ts := newTestServer(t, nil, nil)
	r := rand.New(rand.NewPCG(11, 12))
	schemas := make([]map[string]any, 100)
	for i := range schemas {
		schemas[i] = schematest.Random(r)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(schemas))
	sem := make(chan struct{}, 4)
	for i, s := range schemas {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			p := openai.ChatCompletionNewParams{Model: testModelID, Messages: userMsg("Answer in JSON."),
				Temperature: openai.Float(1), Seed: openai.Int(int64(i)), MaxTokens: openai.Int(400),
				ResponseFormat: schemaFormat(s)}
			noThinking(&p)
			c, err := ts.client.Chat.Completions.New(context.Background(), p)
			if err != nil {
				errs[i] = err
				return
			}
			ch := c.Choices[0]
			sb, _ := json.Marshal(s)
			if ch.FinishReason != "stop" {
				errs[i] = fmt.Errorf("schema %s: finish %q after %q", sb, ch.FinishReason, ch.Message.Content)
				return
			}
			var v any
			d := json.NewDecoder(bytes.NewReader([]byte(ch.Message.Content)))
			d.UseNumber()
			if err := d.Decode(&v); err != nil {
				errs[i] = fmt.Errorf("schema %s: %q is not JSON: %v", sb, ch.Message.Content, err)
				return
			}
			if err := schematest.Validate(s, v); err != nil {
				errs[i] = fmt.Errorf("schema %s: %q: %v", sb, ch.Message.Content, err)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("request %d: %v", i, err)
		}
	}
}

// TestStructuredScripted drives the constraint with scripted replies: a
// JSON object ends the reply as soon as it is complete, reasoning before it
// is free, and a reply that breaks the grammar fails the request.
func TestStructuredScripted(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		thinking     bool
		want         string // content; "" expects an error
	}{
		{"object", `{"a": [1, true]}` + " and more", false, `{"a": [1, true]}`},
		{"after reasoning", `Let me think: {</think>{"a": null}`, true, `{"a": null}`},
		{"broken", `{"a" 1}`, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTestServer(t, nil, scriptFor(testModel(t).tok, tc.script, "<|user|>"))
			p := openai.ChatCompletionNewParams{Model: testModelID, Messages: userMsg("JSON please"), MaxTokens: openai.Int(100),
				ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}}
			if !tc.thinking {
				noThinking(&p)
			}
			c, err := ts.client.Chat.Completions.New(context.Background(), p)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("a reply that breaks the grammar came back: %q", c.Choices[0].Message.Content)
				}
				var apiErr *openai.Error
				if !errors.As(err, &apiErr) || !strings.Contains(apiErr.RawJSON(), "grammar") {
					t.Fatalf("error %v does not name the grammar", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ch := c.Choices[0]
			if ch.Message.Content != tc.want || ch.FinishReason != "stop" {
				t.Fatalf("content %q finish %q, want %q stop", ch.Message.Content, ch.FinishReason, tc.want)
			}
		})
	}
}

// TestStructuredJSONObject samples json_object replies from the random
// model. A JSON object has no length bound, so whether a random walk closes
// it within the context depends on the sampled tokens (and so on the CPU's
// kernels): a reply that ends by the grammar or an end token must be one
// JSON object, and one cut by the context must be the start of one.
func TestStructuredJSONObject(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.ContextSize = 2048 }, nil)
	for seed := range 4 {
		p := openai.ChatCompletionNewParams{Model: testModelID, Messages: userMsg("JSON please"), Temperature: openai.Float(1),
			Seed: openai.Int(int64(seed)), MaxTokens: openai.Int(2000),
			ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}}
		noThinking(&p)
		r := chatOnce(t, ts, p)
		switch r.finish {
		case "stop":
			var v map[string]any
			if err := json.Unmarshal([]byte(r.content), &v); err != nil {
				t.Fatalf("seed %d: %q is not a JSON object: %v", seed, r.content, err)
			}
		case "length":
			if !strings.HasPrefix(strings.TrimSpace(r.content), "{") {
				t.Fatalf("seed %d: %q does not start an object", seed, r.content)
			}
			d := json.NewDecoder(strings.NewReader(r.content))
			for {
				if _, err := d.Token(); err != nil {
					if err != io.EOF && err != io.ErrUnexpectedEOF {
						t.Fatalf("seed %d: %q is not the start of a JSON object: %v", seed, r.content, err)
					}
					break
				}
			}
		default:
			t.Fatalf("seed %d: finish %q", seed, r.finish)
		}
	}
}

// TestGrammarField is llama-server's grammar field on both endpoints.
func TestGrammarField(t *testing.T) {
	ts := newTestServer(t, nil, nil)
	g := `root ::= ("yes" | "no") " (" [0-9] ")"`
	for seed := range 3 {
		c, err := ts.client.Completions.New(context.Background(), openai.CompletionNewParams{
			Model: testModelID, Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Answer:")},
			Temperature: openai.Float(1), Seed: openai.Int(int64(seed)), MaxTokens: openai.Int(50),
		}, option.WithJSONSet("grammar", g))
		if err != nil {
			t.Fatal(err)
		}
		text, finish := c.Choices[0].Text, string(c.Choices[0].FinishReason)
		if !(strings.HasPrefix(text, "yes (") || strings.HasPrefix(text, "no (")) || len(text) < 5 || finish != "stop" {
			t.Fatalf("seed %d: text %q finish %q", seed, text, finish)
		}
		p := openai.ChatCompletionNewParams{Model: testModelID, Messages: userMsg("yes or no?"), Temperature: openai.Float(1),
			Seed: openai.Int(int64(seed)), MaxTokens: openai.Int(50)}
		p.SetExtraFields(map[string]any{"grammar": g, "chat_template_kwargs": map[string]any{"enable_thinking": false}})
		r := chatOnce(t, ts, p)
		if !(strings.HasPrefix(r.content, "yes (") || strings.HasPrefix(r.content, "no (")) || r.finish != "stop" {
			t.Fatalf("seed %d: chat content %q finish %q", seed, r.content, r.finish)
		}
	}
}

func TestStructuredErrors(t *testing.T) {
	ts := newTestServer(t, nil, nil)
	msgs := `"messages": [{"role": "user", "content": "hi"}]`
	for _, tc := range []struct{ name, path, body, param string }{
		{"unsupported keyword", "/v1/chat/completions", `{` + msgs + `, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string", "pattern": "a"}}}}`, "response_format.json_schema.schema"},
		{"unknown format type", "/v1/chat/completions", `{` + msgs + `, "response_format": {"type": "yaml"}}`, "response_format.type"},
		{"bad grammar", "/v1/chat/completions", `{` + msgs + `, "grammar": "root ::= undefined"}`, "grammar"},
		{"grammar and format", "/v1/chat/completions", `{` + msgs + `, "grammar": "root ::= \"a\"", "response_format": {"type": "json_object"}}`, "grammar"},
		{"bad schema shorthand", "/v1/completions", `{"prompt": "hi", "response_format": {"type": "json_object", "schema": {"type": "nope"}}}`, "response_format.schema"},
		{"bad grammar completions", "/v1/completions", `{"prompt": "hi", "grammar": "root ::= (\"a\""}`, "grammar"},
		{"forced tool call", "/v1/chat/completions", `{` + msgs + `, "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}], "tool_choice": "required", "response_format": {"type": "json_object"}}`, "tool_choice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(t, ts.url, tc.path, tc.body, nil)
			if status != 400 {
				t.Fatalf("status %d, want 400: %v", status, body)
			}
			checkErrorBody(t, body, tc.param, "invalid_value")
		})
	}
}
