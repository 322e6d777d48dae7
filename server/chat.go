package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/glmrun/glmrun/model/chat"
	"github.com/glmrun/glmrun/model/grammar"
	"github.com/glmrun/glmrun/model/sample"
)

// handleChat answers POST /v1/chat/completions.
func (s *Server) handleChat(w http.ResponseWriter, hr *http.Request) {
	var req chatRequest
	if e := s.decodeBody(w, hr, &req); e != nil {
		writeError(w, e)
		return
	}
	if e := s.checkModel(req.Model); e != nil {
		writeError(w, e)
		return
	}
	prep, e := s.prepareChat(&req)
	if e != nil {
		writeError(w, e)
		return
	}
	ctx, cancel := context.WithCancel(hr.Context())
	defer cancel() // frees the slot whenever the handler returns
	r, e := s.start(ctx, prep.prompt, prep.sampler, prep.maxTokens, req.Stop, prep.logprobs, prep.topLogprobs, s.markers, extras{cachePrompt: req.CachePrompt, specMax: req.SpecMax, grammar: prep.grammar, thinking: prep.thinking, oneCall: prep.oneCall})
	if e != nil {
		writeError(w, e)
		return
	}
	c := chatCompletion{
		ID: newID("chatcmpl-"), Created: time.Now().Unix(), Model: s.cfg.ModelID, SystemFingerprint: "glmrun",
	}
	parser := prep.newParser("call_")
	if req.Stream {
		s.streamChat(ctx, w, r, c, parser, prep, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
		return
	}

	var content, reasoning strings.Builder
	var calls []toolCall
	var lps []chatTokenLogprob
	last, ok := readReply(ctx, r, parser, func(d replyDelta, tl []tokenLogprob) bool {
		content.WriteString(d.content)
		reasoning.WriteString(d.reasoning)
		calls = append(calls, d.calls...)
		lps = appendChatLogprobs(lps, tl)
		return true
	}, nil, 0)
	if !ok {
		return // the client went away
	}
	if last.err != nil {
		writeError(w, runError(last.err))
		return
	}
	msg := &replyMessage{Role: "assistant", ToolCalls: calls}
	if content.Len() > 0 || len(calls) == 0 {
		msg.Content = ptr(content.String())
	}
	if reasoning.Len() > 0 {
		msg.ReasoningContent = ptr(reasoning.String())
	}
	finish := last.finish
	if len(calls) > 0 && finish == "stop" {
		finish = "tool_calls"
	}
	ch := chatChoice{Message: msg, FinishReason: &finish}
	if prep.logprobs {
		ch.Logprobs = &chatLogprobs{Content: nonNil(lps)}
	}
	c.Object = "chat.completion"
	c.Choices = []chatChoice{ch}
	c.Usage = &last.usage
	writeJSON(w, http.StatusOK, c)
}

// streamChat writes r's reply as chat.completion.chunk events.
func (s *Server) streamChat(ctx context.Context, w http.ResponseWriter, r *request, c chatCompletion, parser *replyParser, prep *chatPrep, includeUsage bool) {
	sse := newSSE(w)
	c.Object = "chat.completion.chunk"
	send := func(delta *replyMessage, lps []chatTokenLogprob, finish *string) bool {
		ch := chatChoice{Delta: delta, FinishReason: finish}
		if prep.logprobs && len(lps) > 0 {
			ch.Logprobs = &chatLogprobs{Content: lps}
		}
		c.Choices = []chatChoice{ch}
		return sse.send(c)
	}
	nCalls := 0
	deltaOf := func(d replyDelta) *replyMessage {
		m := &replyMessage{}
		if d.content != "" {
			m.Content = ptr(d.content)
		}
		if d.reasoning != "" {
			m.ReasoningContent = ptr(d.reasoning)
		}
		for _, tc := range d.calls {
			tc.Index = ptr(nCalls)
			nCalls++
			m.ToolCalls = append(m.ToolCalls, tc)
		}
		return m
	}
	if !send(&replyMessage{Role: "assistant", Content: ptr("")}, nil, nil) {
		return
	}
	last, ok := readReply(ctx, r, parser, func(d replyDelta, tl []tokenLogprob) bool {
		return send(deltaOf(d), appendChatLogprobs(nil, tl), nil)
	}, nil, 0)
	if !ok {
		return
	}
	if last.err != nil {
		sse.send(errorBody{*runError(last.err)})
		return
	}
	finish := last.finish
	if nCalls > 0 && finish == "stop" {
		finish = "tool_calls"
	}
	if !send(&replyMessage{}, nil, &finish) {
		return
	}
	if includeUsage {
		c.Choices = []chatChoice{}
		c.Usage = &last.usage
		if !sse.send(c) {
			return
		}
	}
	sse.done()
}

// readReply passes r's reply, parsed by parser, to emit as it comes: each
// piece with the log-probabilities of the tokens that made it, the
// parser's held text joined to the last piece. Both chat APIs, whole and
// streamed, read replies through it, so that they split reasoning, content
// and tool calls alike. It returns the last event (finish or err set), or
// false when ctx ends first (the client went away) or emit or idle returns
// false. idle, when not nil, is called once per idleEvery tick that finds
// no event waiting (a stream's keep-alive).
func readReply(ctx context.Context, r *request, parser *replyParser, emit func(replyDelta, []tokenLogprob) bool,
	idle func() bool, idleEvery time.Duration) (event, bool) {
	var tick <-chan time.Time
	if idle != nil {
		t := time.NewTicker(idleEvery)
		defer t.Stop()
		tick = t.C
	}
	for {
		evs := r.out.take()
		if len(evs) == 0 {
			select {
			case <-r.out.ready:
			case <-ctx.Done():
				return event{}, false
			case <-tick:
				if !idle() {
					return event{}, false
				}
			}
			continue
		}
		for _, ev := range evs {
			if ev.err != nil {
				return ev, true
			}
			d := parser.add(ev.text)
			if ev.finish != "" {
				f := parser.flush()
				d.content += f.content
				d.reasoning += f.reasoning
				d.calls = append(d.calls, f.calls...)
			}
			if (!d.empty() || len(ev.logprobs) > 0) && !emit(d, ev.logprobs) {
				return event{}, false
			}
			if ev.finish != "" {
				return ev, true
			}
		}
	}
}

// chatPrep is a checked chat request: the prompt and how to generate.
type chatPrep struct {
	prompt      []int32
	sampler     *sample.Sampler
	maxTokens   int
	logprobs    bool
	topLogprobs int
	thinking    bool              // the prompt opened a reasoning block
	tools       []json.RawMessage // parse tool calls against these; nil: none
	// forced is the start of the reply that the prompt ends with, when
	// tool_choice forces a tool call: "<tool_call>" and the function's
	// name if it names one. The reply parser reads it first.
	forced string
	// grammar constrains the reply's content (response_format, grammar),
	// or the rest of a forced tool call (forcedCallGrammar).
	grammar *grammar.Grammar
	// oneCall ends the reply after its first tool call
	// (parallel_tool_calls false, disable_parallel_tool_use).
	oneCall bool
}

// prepareChat checks req's parameters, renders and tokenizes the prompt.
func (s *Server) prepareChat(req *chatRequest) (*chatPrep, *apiError) {
	if len(req.Messages) == 0 {
		return nil, invalid("messages", "messages must not be empty")
	}
	if e := checkN(req.N); e != nil {
		return nil, e
	}
	if e := checkStop("stop", req.Stop); e != nil {
		return nil, e
	}
	if req.StreamOptions != nil && !req.Stream {
		return nil, invalid("stream_options", "stream_options is only allowed with stream: true")
	}
	g, e := compileConstraint(req.ResponseFormat, req.Grammar)
	if e != nil {
		return nil, e
	}
	p := &chatPrep{grammar: g}
	maxTok := req.MaxTokens
	param := "max_tokens"
	if req.MaxCompletionTokens != nil {
		maxTok, param = req.MaxCompletionTokens, "max_completion_tokens"
	}
	if maxTok != nil {
		if *maxTok < 1 {
			return nil, invalid(param, "%s must be at least 1, not %d", param, *maxTok)
		}
		p.maxTokens = *maxTok
	}
	if req.Logprobs != nil {
		p.logprobs = *req.Logprobs
	}
	if req.TopLogprobs != nil {
		n := *req.TopLogprobs
		if n < 0 || n > maxTopLogprobs {
			return nil, invalid("top_logprobs", "top_logprobs must be between 0 and %d, not %d", maxTopLogprobs, n)
		}
		if n > 0 && !p.logprobs {
			return nil, invalid("top_logprobs", "top_logprobs requires logprobs: true")
		}
		p.topLogprobs = n
	}
	smp, e := s.sampler(samplingParams{
		temperature: req.Temperature, topP: req.TopP, minP: req.MinP, topK: req.TopK, seed: req.Seed,
		presencePenalty: req.PresencePenalty, frequencyPenalty: req.FrequencyPenalty, logitBias: req.LogitBias,
	})
	if e != nil {
		return nil, e
	}
	p.sampler = smp

	turn, e := chatTurnOf(req)
	if e != nil {
		return nil, e
	}
	r, e := s.renderChat(turn)
	if e != nil {
		return nil, e
	}
	if e := s.checkPromptLen("messages", len(r.prompt)); e != nil {
		return nil, e
	}
	if p.grammar != nil && r.forced != "" {
		return nil, invalid("tool_choice", "tool_choice forces a tool call, which response_format or grammar would not let through")
	}
	p.prompt, p.thinking, p.tools, p.forced = r.prompt, r.thinking, r.tools, r.forced
	if r.grammar != nil {
		p.grammar = r.grammar
	}
	p.oneCall = req.ParallelToolCalls != nil && !*req.ParallelToolCalls && len(p.tools) > 0
	return p, nil
}

// chatTurnOf reads the parts of an OpenAI chat request that shape its
// prompt (messages, tools, tool_choice, reasoning_effort,
// chat_template_kwargs) into a chatTurn. /v1/chat/completions and
// /apply-template both read requests through it, so that /apply-template
// shows the prompt the chat endpoint runs.
func chatTurnOf(req *chatRequest) (*chatTurn, *apiError) {
	msgs := make([]chat.Message, len(req.Messages))
	for i, m := range req.Messages {
		param := fmt.Sprintf("messages[%d]", i)
		role := m.Role
		switch role {
		case "developer":
			role = chat.RoleSystem
		case chat.RoleSystem, chat.RoleUser, chat.RoleAssistant, chat.RoleTool:
		default:
			return nil, invalid(param+".role", "unknown role %q (want system, developer, user, assistant or tool)", m.Role)
		}
		text, err := m.text()
		if err != nil {
			return nil, invalid(param+".content", "%v", err)
		}
		cm := chat.Message{Role: role, Content: text, ReasoningContent: m.ReasoningContent, ToolCallID: m.ToolCallID, Name: m.Name}
		for j, tc := range m.ToolCalls {
			args := tc.Function.Arguments
			if args == "" {
				args = "{}"
			}
			if !json.Valid([]byte(args)) {
				return nil, invalid(fmt.Sprintf("%s.tool_calls[%d].function.arguments", param, j), "arguments must be a JSON object in a string")
			}
			enc, _ := json.Marshal(args) // the wire form: a JSON string holding the object
			cm.ToolCalls = append(cm.ToolCalls, chat.ToolCall{ID: tc.ID, Type: tc.Type,
				Function: chat.FunctionCall{Name: tc.Function.Name, Arguments: enc}})
		}
		msgs[i] = cm
	}

	for i, t := range req.Tools {
		var def struct {
			Type     string `json:"type"`
			Function *struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if err := json.Unmarshal(t, &def); err != nil || def.Function == nil || def.Function.Name == "" ||
			(def.Type != "" && def.Type != "function") {
			return nil, invalid(fmt.Sprintf("tools[%d]", i), "a tool must be {\"type\": \"function\", \"function\": {\"name\": ...}}")
		}
	}
	turn := &chatTurn{messages: msgs, tools: req.Tools}
	var e *apiError
	turn.parseTools, turn.force, turn.forceName, e = toolChoice(req.ToolChoice, req.Tools)
	if e != nil {
		return nil, e
	}
	if e := thinkingOptions(&turn.opts, req.ReasoningEffort, req.ChatTemplateKwargs); e != nil {
		return nil, e
	}
	return turn, nil
}

// chatTurn is a conversation in the chat template's terms, read from an
// OpenAI chat request or an Anthropic Messages request: both APIs render,
// force tool calls and parse replies through it, so that the same
// conversation gets the same prompt and the same reply from either.
type chatTurn struct {
	messages []chat.Message
	// tools are the tool definitions in OpenAI's function shape
	// ({"type": "function", "function": {...}}), which the template renders
	// and toolParamTypes reads.
	tools      []json.RawMessage
	parseTools bool   // parse tool calls in the reply
	force      bool   // the reply must be a tool call ...
	forceName  string // ... of this function, if set
	// opts holds the request's thinking switches and template variables;
	// renderChat sets the rest.
	opts chat.Options
}

// renderChat renders and tokenizes t's prompt. The returned chatPrep has
// the prompt, thinking, tools and forced set; checking the prompt's length
// is the caller's, whose API words the error.
func (s *Server) renderChat(t *chatTurn) (*chatPrep, *apiError) {
	text, p, e := s.renderPrompt(t)
	if e != nil {
		return nil, e
	}
	// The template writes the BOS text itself ("[gMASK]<sop>"): parse it,
	// add nothing, as the library's Chat does.
	p.prompt = s.tok.Encode(text, false, true)
	if t.force {
		g, err := s.forcedCallGrammar(t.tools, t.forceName)
		if err != nil {
			return nil, invalid("tool_choice", "%v", err)
		}
		p.grammar = g
	}
	return p, nil
}

// renderPrompt renders t's prompt text: the text renderChat tokenizes and
// /apply-template returns, a forced tool call's opening included. The
// returned chatPrep has thinking, tools and forced set, not the prompt.
func (s *Server) renderPrompt(t *chatTurn) (string, *chatPrep, *apiError) {
	p := &chatPrep{}
	if t.parseTools {
		p.tools = t.tools
	}
	opts := t.opts
	opts.Tools, opts.AddGenerationPrompt = t.tools, true
	tok := s.tok
	if id := tok.BOS(); id >= 0 {
		opts.BOSToken = tok.Text(id)
	}
	if id := tok.EOS(); id >= 0 {
		opts.EOSToken = tok.Text(id)
	}
	if t.force {
		// The reply is the tool call, with no reasoning before it.
		opts.NoThinking = true
	}
	text, err := s.cfg.Template.Render(t.messages, opts)
	if err != nil {
		return "", nil, invalid("messages", "rendering the chat template: %v", err)
	}
	if t.force {
		p.forced = tagToolCall + t.forceName
		text += p.forced
	}
	p.thinking = strings.HasSuffix(strings.TrimRight(text, " \t\r\n"), tagThink)
	return text, p, nil
}

// newParser returns the parser of p's reply, which names tool calls with
// ids made of idPrefix ("call_" in OpenAI's API, "toolu_" in Anthropic's).
// A forced call's opening, which the prompt ends with, is read first.
func (p *chatPrep) newParser(idPrefix string) *replyParser {
	parser := newReplyParser(p.thinking, p.tools, func() string { return newID(idPrefix) })
	if p.forced != "" {
		parser.add(p.forced) // opens the call; nothing to emit yet
	}
	return parser
}

// reasoningEfforts are the values of OpenAI's reasoning_effort.
var reasoningEfforts = []string{"none", "minimal", "low", "medium", "high", "xhigh"}

// toolChoice reads tool_choice against tools: whether to parse tool
// calls, and whether the reply must be one (force), of the function
// forceName if it names one. "required" and a named function are forced
// by ending the prompt with the call's opening, as a reply that calls a
// tool starts.
func toolChoice(raw json.RawMessage, tools []json.RawMessage) (parse, force bool, forceName string, e *apiError) {
	parse = len(tools) > 0
	if len(raw) == 0 || string(raw) == "null" {
		return parse, false, "", nil
	}
	var choice string
	if err := json.Unmarshal(raw, &choice); err == nil {
		switch choice {
		case "none":
			return false, false, "", nil
		case "auto":
			return parse, false, "", nil
		case "required":
			if !parse {
				return false, false, "", invalid("tool_choice", "tool_choice \"required\" needs tools")
			}
			return true, true, "", nil
		}
		return false, false, "", invalid("tool_choice", "tool_choice must be \"none\", \"auto\", \"required\" or a function, not %q", choice)
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &named); err != nil || named.Function.Name == "" || (named.Type != "" && named.Type != "function") {
		return false, false, "", invalid("tool_choice", "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}")
	}
	if hasTool(tools, named.Function.Name) {
		return true, true, named.Function.Name, nil
	}
	return false, false, "", invalid("tool_choice", "tool_choice names the function %q, which is not in tools", named.Function.Name)
}

// hasTool reports whether tools (OpenAI function definitions) define the
// function name.
func hasTool(tools []json.RawMessage, name string) bool {
	for _, t := range tools {
		var def struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if json.Unmarshal(t, &def) == nil && def.Function.Name == name {
			return true
		}
	}
	return false
}

// thinkingOptions sets the template options that switch thinking, from
// OpenAI's reasoning_effort and llama-server's / vLLM's
// chat_template_kwargs. Every kwarg becomes a template variable.
// enable_thinking and clear_thinking must be booleans, and also set the
// built-in template's options (which reads no variables). GLM's template
// knows thinking on and off, no levels: reasoning_effort "none" turns it
// off (as Ollama maps it), the other levels leave it on; the value is
// passed as the variable reasoning_effort for templates that read it. An
// explicit enable_thinking wins over reasoning_effort.
func thinkingOptions(opts *chat.Options, effort *string, kwargs map[string]json.RawMessage) *apiError {
	vars := make(map[string]any, len(kwargs)+1)
	if effort != nil {
		if !slices.Contains(reasoningEfforts, *effort) {
			return invalid("reasoning_effort", "reasoning_effort must be one of %s, not %q",
				strings.Join(reasoningEfforts, ", "), *effort)
		}
		vars["reasoning_effort"] = *effort
		opts.NoThinking = *effort == "none"
	}
	for k, v := range kwargs {
		vars[k] = v
		switch k {
		case "enable_thinking", "clear_thinking":
			var b bool
			if err := json.Unmarshal(v, &b); err != nil {
				return invalid("chat_template_kwargs."+k, "%s must be true or false, not %s", k, v)
			}
			if k == "enable_thinking" {
				opts.NoThinking = !b
			} else {
				opts.ClearThinking = b
			}
		}
	}
	if len(vars) > 0 {
		opts.Vars = vars
	}
	return nil
}

// appendChatLogprobs converts the scheduler's logprobs to OpenAI's chat form.
func appendChatLogprobs(dst []chatTokenLogprob, lps []tokenLogprob) []chatTokenLogprob {
	for _, lp := range lps {
		e := chatTokenLogprob{Token: lp.piece, Logprob: lp.logprob, Bytes: byteList(lp.piece), TopLogprobs: []chatTopLogprob{}}
		for _, t := range lp.top {
			e.TopLogprobs = append(e.TopLogprobs, chatTopLogprob{Token: t.piece, Logprob: t.logprob, Bytes: byteList(t.piece)})
		}
		dst = append(dst, e)
	}
	return dst
}

func byteList(s string) []int {
	b := make([]int, len(s))
	for i := range len(s) {
		b[i] = int(s[i])
	}
	return b
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
