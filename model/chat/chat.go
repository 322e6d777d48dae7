package chat

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ardanlabs/jinja"
)

// Roles a message may have.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one turn of a conversation, shaped like an OpenAI chat message.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// ReasoningContent is an assistant's earlier thinking. Empty means none:
	// the template then sees no reasoning_content key (as with llama.cpp).
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID       string     `json:"tool_call_id,omitempty"` // tool results
	Name             string     `json:"name,omitempty"`
}

// ToolCall is a function call made by an assistant message.
type ToolCall struct {
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"` // "function" when empty
	Function FunctionCall `json:"function"`
}

// FunctionCall names a function and its arguments.
type FunctionCall struct {
	Name string `json:"name"`
	// Arguments is a JSON object, or a JSON string holding one (the OpenAI
	// wire form); empty means no arguments. Key order is kept.
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Options are the inputs of a rendering besides the messages.
type Options struct {
	// Tools are tool definitions, each a JSON value (usually
	// {"type": "function", "function": {...}}); key order is kept.
	Tools []json.RawMessage
	// AddGenerationPrompt ends the prompt with the opening of an assistant
	// turn, ready for the model to answer.
	AddGenerationPrompt bool
	// NoThinking sets enable_thinking to false (it is true otherwise): GLM
	// then opens the answer with a closed, empty thinking block.
	NoThinking bool
	// ClearThinking sets clear_thinking: GLM then drops the reasoning of
	// assistant turns before the last user message. It is false by default,
	// as llama.cpp's server passes it, which keeps past reasoning.
	ClearThinking bool
	// BOSToken and EOSToken are exposed as bos_token and eos_token.
	BOSToken, EOSToken string
	// Vars are extra template variables (llama.cpp's chat_template_kwargs);
	// they override the ones above. Values may be json.RawMessage (decoded
	// with key order kept), bool, string, int, int64, float64, nil, []any
	// or map[string]any (keys sorted). The built-in GLM5 template ignores
	// them.
	Vars map[string]any
}

// Template renders conversations into prompt text. A Template is safe for
// concurrent use.
type Template struct {
	source string
	tmpl   *jinja.Template // nil for the built-in GLM-5 format
}

// Parse compiles a Jinja chat template, such as a GGUF's
// tokenizer.chat_template.
func Parse(source string) (t *Template, err error) {
	if strings.TrimSpace(source) == "" {
		return nil, fmt.Errorf("chat: empty template")
	}
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, fmt.Errorf("chat: compiling template: internal error: %v", r)
		}
	}()
	tmpl, err := jinja.Compile(source)
	if err != nil {
		return nil, fmt.Errorf("chat: compiling template: %w", err)
	}
	return &Template{source: source, tmpl: tmpl}, nil
}

// GLM5 returns the built-in GLM-4.7/GLM-5 prompt format, for model files
// without a chat template. It renders what the GLM-4.7-Flash template
// (the one in the bundled test models) renders, tools included, but ignores
// Options.Vars.
func GLM5() *Template { return &Template{} }

// Source returns the Jinja text of t, or "" for the built-in format.
func (t *Template) Source() string { return t.source }

// Builtin reports whether t is the built-in GLM-5 format.
func (t *Template) Builtin() bool { return t.tmpl == nil }

// Render returns the prompt for msgs.
func (t *Template) Render(msgs []Message, opts Options) (string, error) {
	ms, err := prepare(msgs)
	if err != nil {
		return "", err
	}
	tools := make([]node, len(opts.Tools))
	for i, raw := range opts.Tools {
		if tools[i], err = decodeJSON(raw); err != nil {
			return "", fmt.Errorf("chat: tool %d: %w", i, err)
		}
	}
	if t.tmpl == nil {
		return renderGLM5(ms, tools, opts)
	}
	return t.renderJinja(ms, tools, opts)
}

// message is a validated Message with decoded tool-call arguments.
type message struct {
	Message
	args []node // per tool call: a JSON object
}

func prepare(msgs []Message) ([]message, error) {
	out := make([]message, len(msgs))
	for i, m := range msgs {
		if m.Role == "" {
			return nil, fmt.Errorf("chat: message %d: no role", i)
		}
		out[i].Message = m
		for j, tc := range m.ToolCalls {
			if tc.Function.Name == "" {
				return nil, fmt.Errorf("chat: message %d: tool call %d: no function name", i, j)
			}
			args, err := decodeArguments(tc.Function.Arguments)
			if err != nil {
				return nil, fmt.Errorf("chat: message %d: tool call %q: arguments: %w", i, tc.Function.Name, err)
			}
			out[i].args = append(out[i].args, args)
		}
	}
	return out, nil
}

// decodeArguments accepts a JSON object or a JSON string that holds one.
func decodeArguments(raw json.RawMessage) (node, error) {
	if len(strings.TrimSpace(string(raw))) == 0 {
		return node{kind: kindObject}, nil
	}
	n, err := decodeJSON(raw)
	if err != nil {
		return node{}, err
	}
	if n.kind == kindString {
		if strings.TrimSpace(n.s) == "" {
			return node{kind: kindObject}, nil
		}
		if n, err = decodeJSON([]byte(n.s)); err != nil {
			return node{}, err
		}
	}
	if n.kind != kindObject {
		return node{}, fmt.Errorf("not a JSON object")
	}
	return n, nil
}

func (t *Template) renderJinja(ms []message, tools []node, opts Options) (out string, err error) {
	vals := make([]jinja.Value, len(ms))
	for i := range ms {
		vals[i] = ms[i].value()
	}
	data := map[string]jinja.Value{
		"messages":              jinja.NewList(vals),
		"add_generation_prompt": jinja.NewBool(opts.AddGenerationPrompt),
		"enable_thinking":       jinja.NewBool(!opts.NoThinking),
		"clear_thinking":        jinja.NewBool(opts.ClearThinking),
		"bos_token":             jinja.NewString(opts.BOSToken),
		"eos_token":             jinja.NewString(opts.EOSToken),
	}
	if len(tools) > 0 {
		tv := make([]jinja.Value, len(tools))
		for i := range tools {
			tv[i] = tools[i].value()
		}
		data["tools"] = jinja.NewList(tv)
	}
	for k, v := range opts.Vars {
		val, err := goValue(v)
		if err != nil {
			return "", fmt.Errorf("chat: variable %q: %w", k, err)
		}
		data[k] = val
	}
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("chat: rendering template: internal error: %v", r)
		}
	}()
	out, err = t.tmpl.RenderValues(data)
	if err != nil {
		return "", fmt.Errorf("chat: rendering template: %w", err)
	}
	return out, nil
}

// value builds the dict a template sees for m, with the keys llama.cpp's
// server sets: role and content always, the others only when present.
func (m *message) value() jinja.Value {
	v := jinja.NewDict()
	d := v.AsDict()
	d.Set("role", jinja.NewString(m.Role))
	d.Set("content", jinja.NewString(m.Content))
	if m.ReasoningContent != "" {
		d.Set("reasoning_content", jinja.NewString(m.ReasoningContent))
	}
	if len(m.ToolCalls) > 0 {
		calls := make([]jinja.Value, len(m.ToolCalls))
		for i, tc := range m.ToolCalls {
			typ := tc.Type
			if typ == "" {
				typ = "function"
			}
			fn := jinja.NewDict()
			fn.AsDict().Set("name", jinja.NewString(tc.Function.Name))
			fn.AsDict().Set("arguments", m.args[i].value())
			c := jinja.NewDict()
			c.AsDict().Set("type", jinja.NewString(typ))
			c.AsDict().Set("function", fn)
			if tc.ID != "" {
				c.AsDict().Set("id", jinja.NewString(tc.ID))
			}
			calls[i] = c
		}
		d.Set("tool_calls", jinja.NewList(calls))
	}
	if m.ToolCallID != "" {
		d.Set("tool_call_id", jinja.NewString(m.ToolCallID))
	}
	if m.Name != "" {
		d.Set("name", jinja.NewString(m.Name))
	}
	return v
}

// goValue converts a Vars entry to a template value.
func goValue(v any) (jinja.Value, error) {
	switch v := v.(type) {
	case json.RawMessage:
		n, err := decodeJSON(v)
		if err != nil {
			return jinja.Value{}, err
		}
		return n.value(), nil
	case nil, bool, string, int, int64, float64, []any, map[string]any:
		return jinja.FromGoValue(v), nil
	}
	return jinja.Value{}, fmt.Errorf("unsupported type %T", v)
}
