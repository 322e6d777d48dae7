package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
)

// checkErrorBody checks OpenAI's error shape: {"error": {"message", "type",
// "param", "code"}} with the given param and code.
func checkErrorBody(t *testing.T, body map[string]any, param, code string) {
	t.Helper()
	e, ok := body["error"].(map[string]any)
	if !ok {
		t.Fatalf("no error object in %v", body)
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := e[k]; !ok {
			t.Fatalf("error has no %q: %v", k, e)
		}
	}
	if m, _ := e["message"].(string); m == "" {
		t.Fatalf("empty error message: %v", e)
	}
	if typ, _ := e["type"].(string); typ == "" {
		t.Fatalf("empty error type: %v", e)
	}
	if got, _ := e["code"].(string); got != code {
		t.Fatalf("error code %v, want %q (%v)", e["code"], code, e)
	}
	if param == "" {
		if e["param"] != nil {
			t.Fatalf("error param %v, want null", e["param"])
		}
	} else if got, _ := e["param"].(string); got != param {
		t.Fatalf("error param %v, want %q (%v)", e["param"], param, e)
	}
}

func TestErrors(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.ContextSize = 64; c.MaxBodyBytes = 4096 }, nil)
	long := strings.Repeat("word ", 200)
	for _, tc := range []struct {
		name, path, body string
		status           int
		param, code      string
	}{
		{"malformed JSON", "/v1/chat/completions", `{"messages": [`, 400, "", "invalid_json"},
		{"malformed JSON completions", "/v1/completions", `not json`, 400, "", "invalid_json"},
		{"wrong type", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}`, 400, "temperature", "invalid_type"},
		{"unknown model", "/v1/chat/completions", `{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}`, 404, "model", "model_not_found"},
		{"unknown model completions", "/v1/completions", `{"model": "gpt-4o", "prompt": "hi"}`, 404, "model", "model_not_found"},
		{"no messages", "/v1/chat/completions", `{"messages": []}`, 400, "messages", "invalid_value"},
		{"temperature", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "temperature": 3}`, 400, "temperature", "invalid_value"},
		{"top_p", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "top_p": 0}`, 400, "top_p", "invalid_value"},
		{"max_tokens", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0}`, 400, "max_tokens", "invalid_value"},
		{"max_completion_tokens", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": -1}`, 400, "max_completion_tokens", "invalid_value"},
		{"n", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "n": 2}`, 400, "n", "invalid_value"},
		{"presence_penalty", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "presence_penalty": 2.5}`, 400, "presence_penalty", "invalid_value"},
		{"frequency_penalty", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "frequency_penalty": -3}`, 400, "frequency_penalty", "invalid_value"},
		{"top_logprobs range", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "logprobs": true, "top_logprobs": 21}`, 400, "top_logprobs", "invalid_value"},
		{"top_logprobs without logprobs", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "top_logprobs": 2}`, 400, "top_logprobs", "invalid_value"},
		{"logit_bias key", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "logit_bias": {"abc": 1}}`, 400, "logit_bias", "invalid_value"},
		{"logit_bias value", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "logit_bias": {"5": 101}}`, 400, "logit_bias", "invalid_value"},
		{"empty stop", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "stop": [""]}`, 400, "stop", "invalid_value"},
		{"too many stops", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "stop": [` + strings.Repeat(`"x",`, 16) + `"x"]}`, 400, "stop", "invalid_value"},
		{"role", "/v1/chat/completions", `{"messages": [{"role": "wizard", "content": "hi"}]}`, 400, "messages[0].role", "invalid_value"},
		{"content part", "/v1/chat/completions", `{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}`, 400, "messages[0].content", "invalid_value"},
		{"tool", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}]}`, 400, "tools[0]", "invalid_value"},
		{"tool_choice", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "tool_choice": "always"}`, 400, "tool_choice", "invalid_value"},
		{"enable_thinking", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"enable_thinking": "no"}}`, 400, "chat_template_kwargs.enable_thinking", "invalid_value"},
		{"stream_options without stream", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "stream_options": {"include_usage": true}}`, 400, "stream_options", "invalid_value"},
		{"response_format", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_schema"}}`, 400, "response_format.json_schema.schema", "invalid_value"},
		{"prompt missing", "/v1/completions", `{"max_tokens": 3}`, 400, "prompt", "invalid_value"},
		{"prompt token", "/v1/completions", `{"prompt": [1, 2, 99999]}`, 400, "prompt", "invalid_value"},
		{"prompt batch", "/v1/completions", `{"prompt": ["a", "b"]}`, 400, "prompt", "invalid_value"},
		{"completion logprobs", "/v1/completions", `{"prompt": "hi", "logprobs": 50}`, 400, "logprobs", "invalid_value"},
		{"echo", "/v1/completions", `{"prompt": "hi", "echo": true}`, 400, "echo", "invalid_value"},
		{"prompt too long", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "` + long + `"}]}`, 400, "messages", "context_length_exceeded"},
		{"prompt too long completions", "/v1/completions", `{"prompt": "` + long + `"}`, 400, "prompt", "context_length_exceeded"},
		{"prompt too long as tokens", "/v1/completions", `{"prompt": [` + strings.Repeat("5,", 63) + `5]}`, 400, "prompt", "context_length_exceeded"},
		{"reasoning_effort", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "reasoning_effort": "extreme"}`, 400, "reasoning_effort", "invalid_value"},
		{"clear_thinking", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"clear_thinking": 1}}`, 400, "chat_template_kwargs.clear_thinking", "invalid_value"},
		{"body too large", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "` + strings.Repeat("x", 5000) + `"}]}`, 413, "", "request_too_large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(t, ts.url, tc.path, tc.body, nil)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %v", status, tc.status, body)
			}
			checkErrorBody(t, body, tc.param, tc.code)
			if tc.code == "context_length_exceeded" {
				e := body["error"].(map[string]any)
				if e["type"] != "invalid_request_error" || !strings.Contains(e["message"].(string), "maximum context length is 64 tokens") {
					t.Fatalf("error %v: want type invalid_request_error and OpenAI's message naming the 64-token context", e)
				}
			}
		})
	}

	t.Run("method", func(t *testing.T) {
		status, body := get(t, ts.url, "/v1/chat/completions")
		if status != http.StatusMethodNotAllowed || !strings.Contains(string(body), `"code":"method_not_allowed"`) {
			t.Fatalf("GET chat: %d %s", status, body)
		}
	})
	t.Run("unknown path", func(t *testing.T) {
		status, body := get(t, ts.url, "/v1/embeddings")
		if status != http.StatusNotFound || !strings.Contains(string(body), `"code":"not_found"`) {
			t.Fatalf("GET /v1/embeddings: %d %s", status, body)
		}
	})

	// The official client sees the same errors as *openai.Error.
	t.Run("client", func(t *testing.T) {
		_, err := ts.client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model: "gpt-4o", Messages: userMsg("hi"),
		})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != "model_not_found" || apiErr.Param != "model" {
			t.Fatalf("unknown model: %v", err)
		}
		_, err = ts.client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model: testModelID, Messages: userMsg("hi"), Temperature: openai.Float(9),
		})
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "temperature" {
			t.Fatalf("bad temperature: %v", err)
		}
		s := ts.client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
			Model: testModelID, Messages: userMsg(long),
		})
		for s.Next() {
		}
		if !errors.As(s.Err(), &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "context_length_exceeded" || apiErr.Param != "messages" {
			t.Fatalf("streaming a prompt too long: %v", s.Err())
		}
	})
}

func TestAPIKey(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.APIKey = "sekret" }, nil)
	body := `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}`
	for _, tc := range []struct {
		name   string
		header map[string]string
		status int
	}{
		{"none", nil, 401},
		{"wrong", map[string]string{"Authorization": "Bearer nope"}, 401},
		{"not bearer", map[string]string{"Authorization": "Basic sekret"}, 401},
		{"no space", map[string]string{"Authorization": "Bearersekret"}, 401},
		{"no key", map[string]string{"Authorization": "Bearer"}, 401},
		{"empty key", map[string]string{"Authorization": "Bearer "}, 401},
		{"key prefix", map[string]string{"Authorization": "Bearer sekre"}, 401},
		{"key and more", map[string]string{"Authorization": "Bearer sekret x"}, 401},
		{"key in another header", map[string]string{"X-Api-Key": "sekret"}, 401},
		{"right", map[string]string{"Authorization": "Bearer sekret"}, 200},
		{"lowercase scheme", map[string]string{"Authorization": "bearer sekret"}, 200},
		{"uppercase scheme", map[string]string{"Authorization": "BEARER sekret"}, 200},
		{"extra spaces", map[string]string{"Authorization": "  Bearer   sekret "}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, b := post(t, ts.url, "/v1/chat/completions", body, tc.header)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %v", status, tc.status, b)
			}
			if tc.status == 401 {
				checkErrorBody(t, b, "", "invalid_api_key")
			}
		})
	}
	// /health and /metrics stay open; the client with the key gets in.
	if status, _ := get(t, ts.url, "/health"); status != 200 {
		t.Fatalf("/health without a key: %d", status)
	}
	if status, b := get(t, ts.url, "/v1/models"); status != 401 {
		t.Fatalf("/v1/models without a key: %d %s", status, b)
	}
	if _, err := ts.client.Models.List(context.Background()); err != nil {
		t.Fatalf("client with the key: %v", err)
	}
}

// TestQueueFull: with every slot busy and the queue full, a request gets
// 503; the queued one runs once the slot frees.
func TestQueueFull(t *testing.T) {
	gate := &gateStepper{gate: make(chan struct{})}
	ts := newTestServer(t, func(c *Config) { c.Parallel = 1; c.QueueSize = 1; c.Stepper = gate }, nil)
	body := `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "temperature": 0}`
	type result struct {
		status int
		body   map[string]any
	}
	results := make(chan result, 2)
	send := func() {
		status, b := post(t, ts.url, "/v1/chat/completions", body, nil)
		results <- result{status, b}
	}
	go send() // takes the slot, then waits at the gate
	waitFor(t, "the first request in its slot", func() bool { return ts.s.metrics.active.Load() == 1 })
	go send() // waits in the queue
	waitFor(t, "the second request in the queue", func() bool { return ts.s.sched.queue.len() == 1 })
	status, b := post(t, ts.url, "/v1/chat/completions", body, nil)
	if status != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503: %v", status, b)
	}
	checkErrorBody(t, b, "", "server_busy")
	close(gate.gate) // let every step run
	for range 2 {
		if r := <-results; r.status != 200 {
			t.Fatalf("a request that got a slot: %d %v", r.status, r.body)
		}
	}
	if n := ts.s.metrics.rejected.Load(); n != 1 {
		t.Fatalf("rejected counter %d, want 1", n)
	}
}
