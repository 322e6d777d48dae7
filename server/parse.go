package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
)

// GLM's reply markup (the bundled chat template shows it).
const (
	tagThink       = "<think>"
	tagThinkEnd    = "</think>"
	tagToolCall    = "<tool_call>"
	tagToolCallEnd = "</tool_call>"
	tagArgKey      = "<arg_key>"
	tagArgKeyEnd   = "</arg_key>"
	tagArgValue    = "<arg_value>"
	tagArgValueEnd = "</arg_value>"
)

// replyDelta is a piece of a parsed reply.
type replyDelta struct {
	reasoning string
	content   string
	calls     []toolCall
}

func (d replyDelta) empty() bool {
	return d.reasoning == "" && d.content == "" && len(d.calls) == 0
}

// replyParser splits GLM's generated text, as it streams in, into
// reasoning (before </think>), content and tool calls (<tool_call> blocks,
// when the request has tools). It holds back text that may be the start of a
// tag, and a tool call until it is closed.
type replyParser struct {
	thinking bool                         // inside the reasoning block
	atStart  bool                         // a leading <think> may still come
	tools    map[string]map[string]string // tool name -> parameter -> JSON schema type; nil: no tool parsing
	inCall   bool
	buf      string // held text
	nCalls   int
	newID    func() string
}

// newReplyParser returns a parser for a reply that starts inside the
// reasoning block when thinking is set (the prompt ended with <think>).
// tools are the request's tool definitions; with none, <tool_call> stays text.
func newReplyParser(thinking bool, tools []json.RawMessage, newID func() string) *replyParser {
	p := &replyParser{thinking: thinking, atStart: true, newID: newID}
	if len(tools) > 0 {
		p.tools = toolParamTypes(tools)
	}
	return p
}

// add consumes generated text and returns what is complete.
func (p *replyParser) add(text string) replyDelta {
	p.buf += text
	var d replyDelta
	for {
		switch {
		case p.thinking:
			if p.atStart {
				// The model may open the block the prompt opened already.
				trimmed := strings.TrimLeft(p.buf, " \t\r\n")
				if len(trimmed) < len(tagThink) && strings.HasPrefix(tagThink, trimmed) {
					return d // undecided yet
				}
				if strings.HasPrefix(trimmed, tagThink) {
					p.buf = trimmed[len(tagThink):]
				}
				p.atStart = false
			}
			if i := strings.Index(p.buf, tagThinkEnd); i >= 0 {
				d.reasoning += p.buf[:i]
				p.buf = p.buf[i+len(tagThinkEnd):]
				p.thinking = false
				continue
			}
			n := len(p.buf) - partialTagLen(p.buf, tagThinkEnd)
			d.reasoning += p.buf[:n]
			p.buf = p.buf[n:]
			return d
		case p.inCall:
			i := strings.Index(p.buf, tagToolCallEnd)
			if i < 0 {
				return d
			}
			body := p.buf[:i]
			p.buf = p.buf[i+len(tagToolCallEnd):]
			p.inCall = false
			if c, err := p.parseCall(body); err == nil {
				d.calls = append(d.calls, c)
				p.nCalls++
			} else {
				d.content += tagToolCall + body + tagToolCallEnd
			}
		default:
			if p.tools != nil {
				if i := strings.Index(p.buf, tagToolCall); i >= 0 {
					p.addContent(&d, p.buf[:i])
					p.buf = p.buf[i+len(tagToolCall):]
					p.inCall = true
					continue
				}
			}
			n := len(p.buf)
			if p.tools != nil {
				n -= partialTagLen(p.buf, tagToolCall)
			}
			p.addContent(&d, p.buf[:n])
			p.buf = p.buf[n:]
			return d
		}
	}
}

// flush returns what is held at the end of the reply: an unclosed reasoning
// block is reasoning, an unclosed tool call is content.
func (p *replyParser) flush() replyDelta {
	var d replyDelta
	switch {
	case p.thinking:
		d.reasoning = p.buf
	case p.inCall:
		d.content = tagToolCall + p.buf
	default:
		p.addContent(&d, p.buf)
	}
	p.buf, p.inCall = "", false
	return d
}

// addContent adds text to d's content, except whitespace between and after
// tool calls (GLM puts newlines there).
func (p *replyParser) addContent(d *replyDelta, text string) {
	if p.nCalls > 0 && strings.TrimSpace(text) == "" {
		return
	}
	d.content += text
}

// parseCall parses the inside of a <tool_call> block:
// name<arg_key>k</arg_key><arg_value>v</arg_value>...
func (p *replyParser) parseCall(body string) (toolCall, error) {
	name, rest, hasArgs := strings.Cut(body, tagArgKey)
	name = strings.TrimSpace(name)
	if name == "" || strings.ContainsAny(name, "<>") {
		return toolCall{}, errors.New("no function name")
	}
	types := p.tools[name]
	var args bytes.Buffer
	enc := json.NewEncoder(&args)
	enc.SetEscapeHTML(false)
	args.WriteByte('{')
	first := true
	if hasArgs {
		rest = tagArgKey + rest
	}
	for rest = strings.TrimSpace(rest); rest != ""; rest = strings.TrimSpace(rest) {
		var key, value string
		var ok bool
		if rest, ok = strings.CutPrefix(rest, tagArgKey); !ok {
			return toolCall{}, errors.New("expected <arg_key>")
		}
		if key, rest, ok = strings.Cut(rest, tagArgKeyEnd); !ok {
			return toolCall{}, errors.New("unclosed <arg_key>")
		}
		rest = strings.TrimSpace(rest)
		if rest, ok = strings.CutPrefix(rest, tagArgValue); !ok {
			return toolCall{}, errors.New("expected <arg_value>")
		}
		if value, rest, ok = strings.Cut(rest, tagArgValueEnd); !ok {
			return toolCall{}, errors.New("unclosed <arg_value>")
		}
		key = strings.TrimSpace(key)
		if !first {
			args.WriteByte(',')
		}
		first = false
		enc.Encode(key)               // a string always encodes
		args.Truncate(args.Len() - 1) // Encode's newline
		args.WriteByte(':')
		if v := strings.TrimSpace(value); types[key] != "string" && v != "" && json.Valid([]byte(v)) {
			if err := json.Compact(&args, []byte(v)); err != nil {
				return toolCall{}, err
			}
		} else {
			enc.Encode(value)
			args.Truncate(args.Len() - 1)
		}
	}
	args.WriteByte('}')
	return toolCall{ID: p.newID(), Type: "function", Function: functionCall{Name: name, Arguments: args.String()}}, nil
}

// partialTagLen returns the length of the longest suffix of s that is a
// proper prefix of tag.
func partialTagLen(s, tag string) int {
	for n := min(len(tag)-1, len(s)); n > 0; n-- {
		if strings.HasSuffix(s, tag[:n]) {
			return n
		}
	}
	return 0
}

// toolParamTypes reads the JSON schema type of every parameter of every
// function tool ("" when it has none or several). GLM writes string
// arguments bare and the others as JSON, so the type decides how a value is
// read back.
func toolParamTypes(tools []json.RawMessage) map[string]map[string]string {
	out := make(map[string]map[string]string)
	for _, raw := range tools {
		var t struct {
			Function struct {
				Name       string `json:"name"`
				Parameters struct {
					Properties map[string]struct {
						Type json.RawMessage `json:"type"`
					} `json:"properties"`
				} `json:"parameters"`
			} `json:"function"`
		}
		if json.Unmarshal(raw, &t) != nil || t.Function.Name == "" {
			continue
		}
		params := make(map[string]string)
		for k, p := range t.Function.Parameters.Properties {
			var typ string
			if json.Unmarshal(p.Type, &typ) == nil {
				params[k] = typ
			}
		}
		out[t.Function.Name] = params
	}
	return out
}
