package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/glmrun/glmrun/model/chat"
)

// This file is Anthropic's Messages API: POST /v1/messages and
// POST /v1/messages/count_tokens. A request is read into the same chatTurn
// as an OpenAI chat request and runs through the same rendering, scheduler
// and reply parser; only the wire shapes differ.

// pingEvery is how often a Messages stream sends a ping while it waits
// (in the queue, in a long prefill, between tokens), as Anthropic's API
// does, so that proxies and clients do not take a quiet stream for dead.
// A variable so that a test can shorten it.
var pingEvery = 10 * time.Second

// messagesPath reports whether path belongs to Anthropic's API, whose
// errors have Anthropic's shape.
func messagesPath(path string) bool {
	return path == "/v1/messages" || strings.HasPrefix(path, "/v1/messages/")
}

// messagesRequest is the body of POST /v1/messages and of
// POST /v1/messages/count_tokens. Fields the server has no use for
// (metadata, cache_control, service_tier, ...) are ignored, so that
// clients that send them, as Claude Code does, work unchanged.
type messagesRequest struct {
	Model         string             `json:"model"`
	System        json.RawMessage    `json:"system"` // a string or an array of text blocks
	Messages      []anthropicMessage `json:"messages"`
	MaxTokens     *int               `json:"max_tokens"`
	Temperature   *float64           `json:"temperature"`
	TopP          *float64           `json:"top_p"`
	TopK          *int               `json:"top_k"`
	StopSequences []string           `json:"stop_sequences"`
	Stream        bool               `json:"stream"`
	Tools         []anthropicTool    `json:"tools"`
	ToolChoice    *anthropicChoice   `json:"tool_choice"`
	Thinking      *anthropicThinking `json:"thinking"`
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // a string or an array of content blocks
}

// inputBlock is a content block of a request, any type: the fields of
// the types the server reads (text, thinking, redacted_thinking,
// tool_use, tool_result).
type inputBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"` // tool_result: a string or an array of text blocks
	IsError   bool            `json:"is_error"`
}

type anthropicTool struct {
	Type        string          `json:"type"` // "" or "custom": a client tool
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type anthropicChoice struct {
	Type                   string `json:"type"` // auto, any, tool, none
	Name                   string `json:"name"` // type tool
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
}

type anthropicThinking struct {
	Type         string `json:"type"` // enabled, adaptive, disabled
	BudgetTokens *int   `json:"budget_tokens"`
}

// Response shapes.

type messageOut struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"` // "message"
	Role         string         `json:"role"` // "assistant"
	Model        string         `json:"model"`
	Content      []blockOut     `json:"content"`
	StopReason   *string        `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	Usage        anthropicUsage `json:"usage"`
}

// blockOut is a content block of a reply: text, thinking or tool_use. The
// pointers tell an empty text ("text": "", as a stream's block starts)
// from a field the type has not.
type blockOut struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
}

// anthropicUsage counts a reply's tokens as Anthropic does: input_tokens
// are the prompt tokens run now, cache_read_input_tokens those a slot's KV
// cache held already; the server writes no cache entries of its own
// (every freed slot keeps its tokens), so cache_creation_input_tokens is 0.
type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

func usageOf(u usage) anthropicUsage {
	cached := u.PromptTokensDetails.CachedTokens
	return anthropicUsage{InputTokens: u.PromptTokens - cached, CacheReadInputTokens: cached, OutputTokens: u.CompletionTokens}
}

// Stream events.

type messageStartEvent struct {
	Type    string     `json:"type"` // message_start
	Message messageOut `json:"message"`
}

type blockStartEvent struct {
	Type         string   `json:"type"` // content_block_start
	Index        int      `json:"index"`
	ContentBlock blockOut `json:"content_block"`
}

type blockDeltaEvent struct {
	Type  string     `json:"type"` // content_block_delta
	Index int        `json:"index"`
	Delta blockDelta `json:"delta"`
}

type blockDelta struct {
	Type        string  `json:"type"` // text_delta, thinking_delta, input_json_delta
	Text        *string `json:"text,omitempty"`
	Thinking    *string `json:"thinking,omitempty"`
	PartialJSON *string `json:"partial_json,omitempty"`
}

type blockStopEvent struct {
	Type  string `json:"type"` // content_block_stop
	Index int    `json:"index"`
}

type messageDeltaEvent struct {
	Type  string         `json:"type"` // message_delta
	Delta stopDelta      `json:"delta"`
	Usage anthropicUsage `json:"usage"`
}

type stopDelta struct {
	StopReason   *string `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}

type typeOnly struct {
	Type string `json:"type"` // ping, message_stop
}

// Errors.

type anthropicErrorBody struct {
	Type  string         `json:"type"` // "error"
	Error anthropicError `json:"error"`
}

type anthropicError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// toAnthropic words e as Anthropic's API would: its error type for the
// status, and the status Anthropic sends with it (529 for an overloaded
// server, where the OpenAI side sends 503). The parameter an OpenAI error
// names separately leads the message, as Anthropic's messages name the
// field ("max_tokens: ...").
func toAnthropic(e *apiError) (int, anthropicErrorBody) {
	status, typ := e.status, "api_error"
	switch e.status {
	case http.StatusBadRequest, http.StatusMethodNotAllowed:
		typ = "invalid_request_error"
	case http.StatusUnauthorized:
		typ = "authentication_error"
	case http.StatusForbidden:
		typ = "permission_error"
	case http.StatusNotFound:
		typ = "not_found_error"
	case http.StatusRequestEntityTooLarge:
		typ = "request_too_large"
	case http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case http.StatusServiceUnavailable:
		status, typ = 529, "overloaded_error"
	default:
		status = http.StatusInternalServerError
	}
	msg := e.Message
	if e.Param != nil && !strings.HasPrefix(msg, *e.Param) {
		msg = *e.Param + ": " + msg
	}
	return status, anthropicErrorBody{Type: "error", Error: anthropicError{Type: typ, Message: msg}}
}

func writeAnthropicError(w http.ResponseWriter, e *apiError) {
	status, body := toAnthropic(e)
	writeJSON(w, status, body)
}

// anthropicPost is Server.post with Anthropic's error shape.
func (s *Server) anthropicPost(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeAnthropicError(w, &apiError{status: http.StatusMethodNotAllowed,
				Message: fmt.Sprintf("%s %s is not allowed; use POST", r.Method, r.URL.Path)})
			return
		}
		h(w, r)
	}
}

// handleMessagesNotFound answers the paths under /v1/messages/ the server
// does not have (batches, for one) in Anthropic's shape.
func (s *Server) handleMessagesNotFound(w http.ResponseWriter, r *http.Request) {
	writeAnthropicError(w, &apiError{status: http.StatusNotFound,
		Message: fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path)})
}

// readMessages decodes and prepares a /v1/messages request (generate:
// for a reply, not for count_tokens; see prepareMessages), answering the
// error itself; ok is false then.
func (s *Server) readMessages(w http.ResponseWriter, hr *http.Request, generate bool) (*messagesRequest, *chatPrep, bool) {
	req := new(messagesRequest)
	if e := s.decodeBody(w, hr, req); e != nil {
		writeAnthropicError(w, e)
		return nil, nil, false
	}
	if e := s.checkModel(req.Model); e != nil {
		writeAnthropicError(w, e)
		return nil, nil, false
	}
	prep, e := s.prepareMessages(req, generate)
	if e != nil {
		writeAnthropicError(w, e)
		return nil, nil, false
	}
	return req, prep, true
}

// handleMessages answers POST /v1/messages.
func (s *Server) handleMessages(w http.ResponseWriter, hr *http.Request) {
	req, prep, ok := s.readMessages(w, hr, true)
	if !ok {
		return
	}
	ctx, cancel := context.WithCancel(hr.Context())
	defer cancel() // frees the slot whenever the handler returns
	r, e := s.start(ctx, prep.prompt, prep.sampler, prep.maxTokens, req.StopSequences, false, 0, s.markers, extras{oneCall: prep.oneCall, grammar: prep.grammar})
	if e != nil {
		writeAnthropicError(w, e)
		return
	}
	msg := messageOut{ID: newID("msg_"), Type: "message", Role: "assistant", Model: s.cfg.ModelID, Content: []blockOut{}}
	parser := prep.newParser("toolu_")
	if req.Stream {
		s.streamMessages(ctx, w, r, msg, parser, len(prep.prompt))
		return
	}
	var b blockBuilder
	last, ok := readReply(ctx, r, parser, func(d replyDelta, _ []tokenLogprob) bool { return b.add(d) }, nil, 0)
	if !ok {
		return // the client went away
	}
	if last.err != nil {
		writeAnthropicError(w, runError(last.err))
		return
	}
	b.close()
	msg.Content = b.out()
	msg.StopReason, msg.StopSequence = stopReason(last, b.calls)
	msg.Usage = usageOf(last.usage)
	writeJSON(w, http.StatusOK, msg)
}

// streamMessages writes r's reply as Anthropic's stream: message_start, a
// ping, each content block's content_block_start, content_block_delta
// events and content_block_stop, then message_delta (stop reason and
// usage) and message_stop; pings come every pingEvery while it waits.
// message_start counts the whole prompt as input_tokens, since which part
// of it a slot's cache holds is known only once the request has a slot;
// message_delta has the final counts, which a client's accumulator takes
// over.
func (s *Server) streamMessages(ctx context.Context, w http.ResponseWriter, r *request, msg messageOut, parser *replyParser, promptLen int) {
	st := newSSE(w)
	msg.Usage = anthropicUsage{InputTokens: promptLen}
	if !st.event("message_start", messageStartEvent{Type: "message_start", Message: msg}) ||
		!st.event("ping", typeOnly{Type: "ping"}) {
		return
	}
	b := blockBuilder{send: st.event}
	ping := func() bool { return st.event("ping", typeOnly{Type: "ping"}) }
	last, ok := readReply(ctx, r, parser, func(d replyDelta, _ []tokenLogprob) bool { return b.add(d) }, ping, pingEvery)
	if !ok {
		return
	}
	if last.err != nil {
		_, body := toAnthropic(runError(last.err))
		st.event("error", body)
		return
	}
	if !b.close() {
		return
	}
	reason, seq := stopReason(last, b.calls)
	if !st.event("message_delta", messageDeltaEvent{Type: "message_delta",
		Delta: stopDelta{StopReason: reason, StopSequence: seq}, Usage: usageOf(last.usage)}) {
		return
	}
	st.event("message_stop", typeOnly{Type: "message_stop"})
}

// handleCountTokens answers POST /v1/messages/count_tokens: the number of
// tokens of the prompt the same /v1/messages request would run, whether or
// not it fits the context (a client asks to find out).
func (s *Server) handleCountTokens(w http.ResponseWriter, hr *http.Request) {
	_, prep, ok := s.readMessages(w, hr, false)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"input_tokens": len(prep.prompt)})
}

// stopReason is Anthropic's stop_reason (and stop_sequence) for a reply
// that ended with last and made calls tool calls. A call outranks a stop
// string, as tool_calls outranks stop on the OpenAI side: a client must
// answer the calls either way.
func stopReason(last event, calls int) (reason, seq *string) {
	switch {
	case last.finish == "length":
		return ptr("max_tokens"), nil
	case calls > 0:
		return ptr("tool_use"), nil
	case last.stop != "":
		return ptr("stop_sequence"), ptr(last.stop)
	}
	return ptr("end_turn"), nil
}

// prepareMessages checks req and renders its prompt. generate is false
// for count_tokens, which needs no max_tokens or sampler and counts a
// prompt too long for the context too.
func (s *Server) prepareMessages(req *messagesRequest, generate bool) (*chatPrep, *apiError) {
	msgs, e := anthropicMessages(req.System, req.Messages)
	if e != nil {
		return nil, e
	}
	turn := &chatTurn{messages: msgs}
	if turn.tools, e = anthropicTools(req.Tools); e != nil {
		return nil, e
	}
	if turn.parseTools, turn.force, turn.forceName, e = anthropicToolChoice(req.ToolChoice, turn.tools); e != nil {
		return nil, e
	}
	if t := req.Thinking; t != nil {
		switch t.Type {
		case "enabled", "adaptive":
		case "disabled":
			turn.opts.NoThinking = true
		default:
			return nil, invalid("thinking.type", "thinking.type must be \"enabled\", \"adaptive\" or \"disabled\", not %q", t.Type)
		}
		// GLM has no reasoning budget; max_tokens bounds thinking and
		// answer together.
		if t.BudgetTokens != nil && *t.BudgetTokens < 1 {
			return nil, invalid("thinking.budget_tokens", "thinking.budget_tokens must be at least 1, not %d", *t.BudgetTokens)
		}
	}
	if !generate {
		return s.renderChat(turn)
	}

	if req.MaxTokens == nil {
		return nil, invalid("max_tokens", "max_tokens is required")
	}
	if *req.MaxTokens < 1 {
		return nil, invalid("max_tokens", "max_tokens must be at least 1, not %d", *req.MaxTokens)
	}
	if e := checkStop("stop_sequences", req.StopSequences); e != nil {
		return nil, e
	}
	smp, e := s.sampler(samplingParams{temperature: req.Temperature, topP: req.TopP, topK: req.TopK})
	if e != nil {
		return nil, e
	}
	p, e := s.renderChat(turn)
	if e != nil {
		return nil, e
	}
	if n := len(p.prompt); n >= s.ctxSize {
		// Anthropic's words, which its clients (Claude Code among them)
		// recognise as a conversation grown too long.
		return nil, invalid("messages", "prompt is too long: %d tokens > %d maximum (the context holds %d tokens, "+
			"prompt and reply together; shorten the conversation or raise --ctx-size)", n, s.ctxSize-1, s.ctxSize)
	}
	p.sampler, p.maxTokens = smp, *req.MaxTokens
	p.oneCall = req.ToolChoice != nil && req.ToolChoice.DisableParallelToolUse && len(turn.tools) > 0
	return p, nil
}

// anthropicMessages maps Anthropic's system and messages onto the chat
// template's messages, as the OpenAI side maps the equivalent OpenAI
// messages: system text is a system message; an assistant message's text
// is its content, its thinking blocks its reasoning_content and its
// tool_use blocks its tool calls; a user message's tool_result blocks are
// tool messages, in order with its text.
func anthropicMessages(system json.RawMessage, in []anthropicMessage) ([]chat.Message, *apiError) {
	if len(in) == 0 {
		return nil, invalid("messages", "messages must not be empty")
	}
	var out []chat.Message
	if len(system) > 0 && string(system) != "null" {
		text, e := blocksText("system", system)
		if e != nil {
			return nil, e
		}
		if text != "" {
			out = append(out, chat.Message{Role: chat.RoleSystem, Content: text})
		}
	}
	for i, m := range in {
		param := fmt.Sprintf("messages.%d", i)
		blocks, e := contentBlocks(param+".content", m.Content)
		if e != nil {
			return nil, e
		}
		switch m.Role {
		case chat.RoleSystem: // newer API versions allow system turns among the messages
			text, e := blocksText(param+".content", m.Content)
			if e != nil {
				return nil, e
			}
			out = append(out, chat.Message{Role: chat.RoleSystem, Content: text})
		case chat.RoleUser:
			if out, e = appendUser(out, param, blocks); e != nil {
				return nil, e
			}
		case chat.RoleAssistant:
			if i == len(in)-1 {
				// Anthropic continues a final assistant message (a
				// prefill); the template would end it and open a new
				// turn, a different request than the client meant.
				return nil, invalid(param+".role", "the last message must be a user message: continuing an assistant message (prefill) is not supported")
			}
			msg, e := assistantMessage(param, blocks)
			if e != nil {
				return nil, e
			}
			out = append(out, msg)
		default:
			return nil, invalid(param+".role", "unknown role %q (want user, assistant or system)", m.Role)
		}
	}
	return out, nil
}

// contentBlocks reads a message's content: a string is one text block.
func contentBlocks(param string, raw json.RawMessage) ([]inputBlock, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, invalid(param, "content is required: a string or an array of content blocks")
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return []inputBlock{{Type: "text", Text: text}}, nil
	}
	var blocks []inputBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, invalid(param, "content must be a string or an array of content blocks: %v", err)
	}
	return blocks, nil
}

// blocksText reads a string or an array of text blocks (system, a
// tool_result's content) as one text, the blocks joined as the OpenAI
// side joins text parts.
func blocksText(param string, raw json.RawMessage) (string, *apiError) {
	blocks, e := contentBlocks(param, raw)
	if e != nil {
		return "", e
	}
	var b strings.Builder
	for j, bl := range blocks {
		if bl.Type != "text" {
			return "", invalid(fmt.Sprintf("%s.%d.type", param, j), "content block type %q is not supported here (only \"text\")", bl.Type)
		}
		b.WriteString(bl.Text)
	}
	return b.String(), nil
}

// appendUser appends a user message's blocks to out: runs of text blocks
// as user messages, each tool_result as a tool message.
func appendUser(out []chat.Message, param string, blocks []inputBlock) ([]chat.Message, *apiError) {
	var text strings.Builder
	hasText := false
	flush := func() {
		if hasText {
			out = append(out, chat.Message{Role: chat.RoleUser, Content: text.String()})
			text.Reset()
			hasText = false
		}
	}
	for j, bl := range blocks {
		bp := fmt.Sprintf("%s.content.%d", param, j)
		switch bl.Type {
		case "text":
			text.WriteString(bl.Text)
			hasText = true
		case "tool_result":
			if bl.ToolUseID == "" {
				return nil, invalid(bp+".tool_use_id", "a tool_result block needs the tool_use_id of the call it answers")
			}
			result := ""
			if len(bl.Content) > 0 && string(bl.Content) != "null" {
				var e *apiError
				if result, e = blocksText(bp+".content", bl.Content); e != nil {
					return nil, e
				}
			}
			if bl.IsError {
				// The template has no error flag for a tool result: say
				// it in the text, so that the model knows the call failed.
				result = "Error: " + result
			}
			flush()
			out = append(out, chat.Message{Role: chat.RoleTool, Content: result, ToolCallID: bl.ToolUseID})
		default:
			return nil, invalid(bp+".type", "content block type %q is not supported in a user message (only \"text\" and \"tool_result\")", bl.Type)
		}
	}
	if len(blocks) == 0 {
		hasText = true // an empty user turn is still a turn
	}
	flush()
	return out, nil
}

// assistantMessage reads an assistant message's blocks into one message.
// A thinking block's signature, and redacted_thinking (encrypted reasoning
// of another model), have no use here and are dropped.
func assistantMessage(param string, blocks []inputBlock) (chat.Message, *apiError) {
	msg := chat.Message{Role: chat.RoleAssistant}
	var text, reasoning strings.Builder
	for j, bl := range blocks {
		bp := fmt.Sprintf("%s.content.%d", param, j)
		switch bl.Type {
		case "text":
			text.WriteString(bl.Text)
		case "thinking":
			reasoning.WriteString(bl.Thinking)
		case "redacted_thinking": // dropped, as said above
		case "tool_use":
			if bl.Name == "" {
				return msg, invalid(bp+".name", "a tool_use block needs the name of the tool")
			}
			input := bytes.TrimSpace(bl.Input)
			if len(input) == 0 || string(input) == "null" {
				input = []byte("{}")
			}
			if input[0] != '{' {
				return msg, invalid(bp+".input", "a tool_use block's input must be a JSON object")
			}
			// The OpenAI wire form, a JSON string holding the object, as
			// the OpenAI side passes arguments to the template.
			enc, _ := json.Marshal(string(input))
			msg.ToolCalls = append(msg.ToolCalls, chat.ToolCall{ID: bl.ID, Type: "function",
				Function: chat.FunctionCall{Name: bl.Name, Arguments: enc}})
		default:
			return msg, invalid(bp+".type", "content block type %q is not supported in an assistant message (only \"text\", \"thinking\" and \"tool_use\")", bl.Type)
		}
	}
	msg.Content, msg.ReasoningContent = text.String(), reasoning.String()
	return msg, nil
}

// anthropicTools converts Anthropic's client tools to the OpenAI function
// shape the template renders: input_schema becomes parameters.
func anthropicTools(in []anthropicTool) ([]json.RawMessage, *apiError) {
	type function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	}
	type tool struct {
		Type     string   `json:"type"`
		Function function `json:"function"`
	}
	var out []json.RawMessage
	for i, t := range in {
		param := fmt.Sprintf("tools.%d", i)
		if t.Type != "" && t.Type != "custom" {
			return nil, invalid(param+".type", "tool type %q is not supported: only client tools ({name, description, input_schema}) are", t.Type)
		}
		if t.Name == "" {
			return nil, invalid(param+".name", "a tool needs a name")
		}
		schema := bytes.TrimSpace(t.InputSchema)
		if string(schema) == "null" {
			schema = nil
		}
		if len(schema) > 0 && schema[0] != '{' {
			return nil, invalid(param+".input_schema", "input_schema must be a JSON schema object")
		}
		b, err := marshal(tool{Type: "function", Function: function{Name: t.Name, Description: t.Description, Parameters: schema}})
		if err != nil {
			return nil, invalid(param, "tool definition: %v", err)
		}
		out = append(out, b)
	}
	return out, nil
}

// anthropicToolChoice reads tool_choice as toolChoice reads OpenAI's:
// "any" is OpenAI's "required", {"type": "tool", "name"} a named function.
func anthropicToolChoice(c *anthropicChoice, tools []json.RawMessage) (parse, force bool, forceName string, e *apiError) {
	parse = len(tools) > 0
	if c == nil {
		return parse, false, "", nil
	}
	switch c.Type {
	case "auto":
		return parse, false, "", nil
	case "none":
		return false, false, "", nil
	case "any":
		if !parse {
			return false, false, "", invalid("tool_choice", "tool_choice \"any\" needs tools")
		}
		return true, true, "", nil
	case "tool":
		if c.Name == "" {
			return false, false, "", invalid("tool_choice.name", "tool_choice of type \"tool\" needs the tool's name")
		}
		if !hasTool(tools, c.Name) {
			return false, false, "", invalid("tool_choice.name", "tool_choice names the tool %q, which is not in tools", c.Name)
		}
		return true, true, c.Name, nil
	}
	return false, false, "", invalid("tool_choice.type", "tool_choice.type must be \"auto\", \"any\", \"tool\" or \"none\", not %q", c.Type)
}

// blockBuilder lays a reply's parsed pieces out as Anthropic content
// blocks, in the order they come: thinking, text and tool_use blocks, a
// new block whenever the kind changes. With send set it also writes each
// step as stream events; a whole response and a stream thus get the same
// blocks from the same reply. Whitespace that would open a thinking or
// text block is held until more than whitespace follows, so that the
// newlines GLM writes around its markup make no empty-looking blocks.
type blockBuilder struct {
	send     func(name string, v any) bool // nil for a whole response
	blocks   []builtBlock
	open     bool   // the last block may still grow
	pending  string // held whitespace ...
	pendKind string // ... of a block of this kind
	calls    int
}

type builtBlock struct {
	kind string // "thinking", "text" or "tool_use"
	text []byte // thinking or text
	call toolCall
}

// add takes a piece of the reply; it reports false once a send failed.
func (b *blockBuilder) add(d replyDelta) bool {
	if !b.addText("thinking", d.reasoning) || !b.addText("text", d.content) {
		return false
	}
	for _, c := range d.calls {
		if !b.addCall(c) {
			return false
		}
	}
	return true
}

func (b *blockBuilder) addText(kind, text string) bool {
	if text == "" {
		return true
	}
	if b.open && b.blocks[len(b.blocks)-1].kind == kind {
		last := &b.blocks[len(b.blocks)-1]
		last.text = append(last.text, text...)
		return b.delta(len(b.blocks)-1, kind, text)
	}
	if b.pendKind != kind {
		b.pending, b.pendKind = "", kind
	}
	text = b.pending + text
	if strings.TrimSpace(text) == "" {
		b.pending = text
		return true
	}
	b.pending, b.pendKind = "", ""
	if !b.stopOpen() {
		return false
	}
	b.blocks = append(b.blocks, builtBlock{kind: kind, text: []byte(text)})
	b.open = true
	i := len(b.blocks) - 1
	return b.event("content_block_start", blockStartEvent{Type: "content_block_start", Index: i, ContentBlock: emptyBlock(kind)}) &&
		b.delta(i, kind, text)
}

func (b *blockBuilder) addCall(c toolCall) bool {
	b.pending, b.pendKind = "", ""
	if !b.stopOpen() {
		return false
	}
	b.blocks = append(b.blocks, builtBlock{kind: "tool_use", call: c})
	b.calls++
	i := len(b.blocks) - 1
	start := blockOut{Type: "tool_use", ID: c.ID, Name: c.Function.Name, Input: json.RawMessage("{}")}
	return b.event("content_block_start", blockStartEvent{Type: "content_block_start", Index: i, ContentBlock: start}) &&
		b.event("content_block_delta", blockDeltaEvent{Type: "content_block_delta", Index: i,
			Delta: blockDelta{Type: "input_json_delta", PartialJSON: ptr(c.Function.Arguments)}}) &&
		b.event("content_block_stop", blockStopEvent{Type: "content_block_stop", Index: i})
}

// close ends the reply: held whitespace is dropped, the open block stops.
func (b *blockBuilder) close() bool {
	b.pending, b.pendKind = "", ""
	return b.stopOpen()
}

func (b *blockBuilder) stopOpen() bool {
	if !b.open {
		return true
	}
	b.open = false
	return b.event("content_block_stop", blockStopEvent{Type: "content_block_stop", Index: len(b.blocks) - 1})
}

func (b *blockBuilder) delta(i int, kind, text string) bool {
	d := blockDelta{Type: "text_delta", Text: &text}
	if kind == "thinking" {
		d = blockDelta{Type: "thinking_delta", Thinking: &text}
	}
	return b.event("content_block_delta", blockDeltaEvent{Type: "content_block_delta", Index: i, Delta: d})
}

func (b *blockBuilder) event(name string, v any) bool {
	return b.send == nil || b.send(name, v)
}

// emptyBlock is a thinking or text block as its stream start shows it.
// GLM's reasoning has no signature; the field is there, empty, because
// clients read it from every thinking block.
func emptyBlock(kind string) blockOut {
	if kind == "thinking" {
		return blockOut{Type: "thinking", Thinking: ptr(""), Signature: ptr("")}
	}
	return blockOut{Type: "text", Text: ptr("")}
}

// out returns the blocks in their wire shape.
func (b *blockBuilder) out() []blockOut {
	out := make([]blockOut, 0, len(b.blocks))
	for _, bl := range b.blocks {
		switch bl.kind {
		case "tool_use":
			out = append(out, blockOut{Type: "tool_use", ID: bl.call.ID, Name: bl.call.Function.Name,
				Input: json.RawMessage(bl.call.Function.Arguments)})
		case "thinking":
			out = append(out, blockOut{Type: "thinking", Thinking: ptr(string(bl.text)), Signature: ptr("")})
		default:
			out = append(out, blockOut{Type: "text", Text: ptr(string(bl.text))})
		}
	}
	return out
}

// event writes one named Server-Sent Event ("event: NAME\ndata: JSON\n\n"),
// as Anthropic streams them; it reports false once a write failed.
func (s *sse) event(name string, v any) bool {
	if s.err != nil {
		return false
	}
	b, err := marshal(v)
	if err != nil {
		s.err = err
		return false
	}
	var buf bytes.Buffer
	buf.Grow(len(name) + len(b) + 16)
	buf.WriteString("event: ")
	buf.WriteString(name)
	buf.WriteString("\ndata: ")
	buf.Write(b)
	buf.WriteString("\n\n")
	s.write(buf.Bytes())
	return s.err == nil
}
