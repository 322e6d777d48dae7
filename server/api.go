package server

import (
	"encoding/json"
	"errors"
	"fmt"
)

// This file holds the JSON shapes of OpenAI's API that the server reads and
// writes. Field names are OpenAI's; optional request fields are pointers so
// that "absent" and "zero" differ.

// chatRequest is the body of POST /v1/chat/completions.
type chatRequest struct {
	Model               string                     `json:"model"`
	Messages            []chatMessage              `json:"messages"`
	Temperature         *float64                   `json:"temperature"`
	TopP                *float64                   `json:"top_p"`
	TopK                *int                       `json:"top_k"` // llama-server / vLLM extension
	MinP                *float64                   `json:"min_p"` // llama-server / vLLM extension
	MaxTokens           *int                       `json:"max_tokens"`
	MaxCompletionTokens *int                       `json:"max_completion_tokens"`
	Stop                stopList                   `json:"stop"`
	Seed                *int64                     `json:"seed"`
	PresencePenalty     *float64                   `json:"presence_penalty"`
	FrequencyPenalty    *float64                   `json:"frequency_penalty"`
	LogitBias           map[string]float64         `json:"logit_bias"`
	Logprobs            *bool                      `json:"logprobs"`
	TopLogprobs         *int                       `json:"top_logprobs"`
	N                   *int                       `json:"n"`
	Stream              bool                       `json:"stream"`
	StreamOptions       *streamOptions             `json:"stream_options"`
	Tools               []json.RawMessage          `json:"tools"`
	ToolChoice          json.RawMessage            `json:"tool_choice"`
	ParallelToolCalls   *bool                      `json:"parallel_tool_calls"`
	ChatTemplateKwargs  map[string]json.RawMessage `json:"chat_template_kwargs"` // llama-server / vLLM extension
	ReasoningEffort     *string                    `json:"reasoning_effort"`
	ResponseFormat      *responseFormat            `json:"response_format"`
	Grammar             *string                    `json:"grammar"`           // llama-server extension: GBNF the reply must match
	CachePrompt         *bool                      `json:"cache_prompt"`      // llama-server extension: reuse a slot's cached prefix (default true)
	SpecMax             *int                       `json:"speculative.n_max"` // llama-server extension: most drafted tokens per step (0: off)
}

// completionRequest is the body of POST /v1/completions.
type completionRequest struct {
	Model            string             `json:"model"`
	Prompt           json.RawMessage    `json:"prompt"`
	Temperature      *float64           `json:"temperature"`
	TopP             *float64           `json:"top_p"`
	TopK             *int               `json:"top_k"`
	MinP             *float64           `json:"min_p"`
	MaxTokens        *int               `json:"max_tokens"`
	Stop             stopList           `json:"stop"`
	Seed             *int64             `json:"seed"`
	PresencePenalty  *float64           `json:"presence_penalty"`
	FrequencyPenalty *float64           `json:"frequency_penalty"`
	LogitBias        map[string]float64 `json:"logit_bias"`
	Logprobs         *int               `json:"logprobs"`
	N                *int               `json:"n"`
	Echo             bool               `json:"echo"`
	Suffix           *string            `json:"suffix"`
	Stream           bool               `json:"stream"`
	StreamOptions    *streamOptions     `json:"stream_options"`
	CachePrompt      *bool              `json:"cache_prompt"`
	SpecMax          *int               `json:"speculative.n_max"`
	ResponseFormat   *responseFormat    `json:"response_format"`
	Grammar          *string            `json:"grammar"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// chatMessage is a message as OpenAI clients send it: content is a string,
// null, or an array of parts ({"type": "text", "text": ...}).
type chatMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	ReasoningContent string          `json:"reasoning_content"`
	Name             string          `json:"name"`
	ToolCalls        []toolCall      `json:"tool_calls"`
	ToolCallID       string          `json:"tool_call_id"`
}

// text returns the message's content as one string: the text parts of an
// array joined together.
func (m *chatMessage) text() (string, error) {
	if len(m.Content) == 0 || string(m.Content) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(m.Content, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(m.Content, &parts); err != nil {
		return "", errors.New("content must be a string or an array of content parts")
	}
	var out string
	for _, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("content part type %q is not supported (only \"text\")", p.Type)
		}
		out += p.Text
	}
	return out, nil
}

// stopList is OpenAI's stop parameter: null, a string or an array of strings.
type stopList []string

func (s *stopList) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*s = nil
		return nil
	}
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = stopList{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("stop must be a string or an array of strings")
	}
	*s = many
	return nil
}

type toolCall struct {
	Index    *int         `json:"index,omitempty"` // streaming deltas only
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function functionCall `json:"function"`
}

type functionCall struct {
	Name string `json:"name,omitempty"`
	// Arguments is a JSON string holding a JSON object (OpenAI's wire form).
	Arguments string `json:"arguments"`
}

type usage struct {
	PromptTokens        int                 `json:"prompt_tokens"`
	CompletionTokens    int                 `json:"completion_tokens"`
	TotalTokens         int                 `json:"total_tokens"`
	PromptTokensDetails promptTokensDetails `json:"prompt_tokens_details"`
}

// promptTokensDetails is OpenAI's breakdown of the prompt tokens:
// CachedTokens were found in a slot's KV cache and not run again.
type promptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

func newUsage(prompt, completion int) *usage {
	return &usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}
}

// cachedUsage is newUsage with the prompt tokens taken from the cache.
func cachedUsage(prompt, completion, cached int) *usage {
	u := newUsage(prompt, completion)
	u.PromptTokensDetails.CachedTokens = cached
	return u
}

// Chat completion responses.

type chatCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"` // "chat.completion" or "chat.completion.chunk"
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint"`
	Choices           []chatChoice `json:"choices"`
	Usage             *usage       `json:"usage,omitempty"`
}

type chatChoice struct {
	Index        int           `json:"index"`
	Message      *replyMessage `json:"message,omitempty"` // whole response
	Delta        *replyMessage `json:"delta,omitempty"`   // stream chunk
	Logprobs     *chatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
}

type replyMessage struct {
	Role             string     `json:"role,omitempty"`
	Content          *string    `json:"content,omitempty"`
	ReasoningContent *string    `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCall `json:"tool_calls,omitempty"`
}

type chatLogprobs struct {
	Content []chatTokenLogprob `json:"content"`
}

type chatTokenLogprob struct {
	Token       string           `json:"token"`
	Logprob     float64          `json:"logprob"`
	Bytes       []int            `json:"bytes"`
	TopLogprobs []chatTopLogprob `json:"top_logprobs"`
}

type chatTopLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// Text completion responses.

type textCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"` // "text_completion"
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint"`
	Choices           []textChoice `json:"choices"`
	Usage             *usage       `json:"usage,omitempty"`
}

type textChoice struct {
	Index        int           `json:"index"`
	Text         string        `json:"text"`
	Logprobs     *textLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
}

// textLogprobs is the legacy completions logprobs layout: parallel arrays.
type textLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// Models.

type modelList struct {
	Object string      `json:"object"` // "list"
	Data   []modelCard `json:"data"`
}

type modelCard struct {
	ID      string `json:"id"`
	Object  string `json:"object"` // "model"
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// Errors.

type errorBody struct {
	Error apiError `json:"error"`
}

// apiError is an OpenAI-style error; status is the HTTP status it goes with.
type apiError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
	status  int
}

func (e *apiError) Error() string { return e.Message }
