package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"github.com/glmrun/glmrun/model/tokenizer"
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

// markupTags are the tags of GLM's reply markup, in the order of their
// marker bytes: markupTags[i]'s marker is markerBase+i.
var markupTags = [...]string{tagThink, tagThinkEnd, tagToolCall, tagToolCallEnd, tagArgKey, tagArgKeyEnd, tagArgValue, tagArgValueEnd}

// markerBase is the first marker byte. GLM's tags are control tokens, which
// must not reach a reply as text, yet the reply parser must see them: the
// scheduler passes each as one marker byte in the generated text instead.
// The bytes 0xF8-0xFF never occur in valid UTF-8, and the scheduler's
// decoder output is always valid (a byte token 0xFF decodes to U+FFFD), so
// a marker is never generated text; no stop string can match one either.
const markerBase = 0xF8

// Every tag's marker fits in a byte (this fails to compile otherwise).
const _ = uint8(markerBase + len(markupTags) - 1)

// markerOf returns tag's marker byte, or 0 for no markup tag.
func markerOf(tag string) byte {
	for i, t := range markupTags {
		if t == tag {
			return markerBase + byte(i)
		}
	}
	return 0
}

// markupMarkers maps each control token of tok whose text is a markup tag
// (hidden without special, as GLM's are) to its marker byte. A tag that is
// an ordinary token needs no marker: it decodes to its text.
func markupMarkers(tok *tokenizer.Tokenizer) map[int32]byte {
	m := make(map[int32]byte)
	for i, tag := range markupTags {
		if id, ok := tok.ID(tag); ok && tok.Piece(id, false) == "" && tok.Piece(id, true) == tag {
			m[id] = markerBase + byte(i)
		}
	}
	return m
}

// findTag returns the index and length of the first occurrence of tag in s,
// as text or as its marker, or -1, 0.
func findTag(s, tag string) (int, int) {
	i := strings.Index(s, tag)
	if m := markerOf(tag); m != 0 {
		if j := strings.IndexByte(s, m); j >= 0 && (i < 0 || j < i) {
			return j, 1
		}
	}
	if i < 0 {
		return -1, 0
	}
	return i, len(tag)
}

// tagPrefix returns the length of tag, as text or as its marker, at the
// start of s, or 0.
func tagPrefix(s, tag string) int {
	switch {
	case strings.HasPrefix(s, tag):
		return len(tag)
	case s != "" && s[0] >= markerBase && s[0] == markerOf(tag):
		return 1
	}
	return 0
}

// hasMarker reports whether s holds a marker byte.
func hasMarker(s string) bool {
	for i := range len(s) {
		if s[i] >= markerBase {
			return true
		}
	}
	return false
}

// stripMarkers removes the marker bytes from s: control tokens the parser
// did not consume as markup are not text.
func stripMarkers(s string) string {
	if !hasMarker(s) {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := range len(s) {
		if s[i] < markerBase {
			b = append(b, s[i])
		}
	}
	return string(b)
}

// expandMarkers replaces each marker in s by its tag's text.
func expandMarkers(s string) string {
	if !hasMarker(s) {
		return s
	}
	var b strings.Builder
	for i := range len(s) {
		if c := s[i]; c >= markerBase {
			b.WriteString(markupTags[c-markerBase])
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

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
// when the request has tools). A tag is recognised as text or as the
// scheduler's marker of its control token; markers the parser does not
// consume (a stray tag, the tags of a malformed or unclosed tool call) are
// dropped, so control tokens never reach content or reasoning. It holds
// back text that may be the start of a tag, and a tool call until it is
// closed.
type replyParser struct {
	thinking bool                         // inside the reasoning block
	atStart  bool                         // a leading <think> may still come
	tools    map[string]map[string]string // tool name -> parameter -> JSON schema type; nil: no tool parsing
	inCall   bool
	opener   string // the <tool_call> of the open call, as text or marker
	buf      string // held text
	nCalls   int
	newID    func() string
}

// newReplyParser returns a parser for a reply that starts inside the
// reasoning block when thinking is set (the prompt ended with <think>).
// tools are the request's tool definitions; with none, <tool_call> is not
// parsed.
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
	p.parse(&d)
	d.reasoning, d.content = stripMarkers(d.reasoning), stripMarkers(d.content)
	return d
}

func (p *replyParser) parse(d *replyDelta) {
	for {
		if p.atStart {
			// A reply may open a reasoning block: GLM repeats the one the
			// prompt opened, and one opened though the prompt closed it is
			// reasoning too, as llama-server parses it.
			trimmed := strings.TrimLeft(p.buf, " \t\r\n")
			if n := tagPrefix(trimmed, tagThink); n > 0 {
				p.buf = trimmed[n:]
				p.thinking = true
			} else if len(trimmed) < len(tagThink) && strings.HasPrefix(tagThink, trimmed) {
				return // undecided yet
			}
			p.atStart = false
		}
		switch {
		case p.thinking:
			if i, n := findTag(p.buf, tagThinkEnd); i >= 0 {
				d.reasoning += p.buf[:i]
				p.buf = p.buf[i+n:]
				p.thinking = false
				continue
			}
			n := len(p.buf) - partialTagLen(p.buf, tagThinkEnd)
			d.reasoning += p.buf[:n]
			p.buf = p.buf[n:]
			return
		case p.inCall:
			i, n := findTag(p.buf, tagToolCallEnd)
			if i < 0 {
				return
			}
			body, closer := p.buf[:i], p.buf[i:i+n]
			p.buf = p.buf[i+n:]
			p.inCall = false
			if c, err := p.parseCall(expandMarkers(body)); err == nil {
				d.calls = append(d.calls, c)
				p.nCalls++
			} else {
				d.content += p.opener + body + closer
			}
		default:
			if p.tools != nil {
				if i, n := findTag(p.buf, tagToolCall); i >= 0 {
					p.addContent(d, p.buf[:i])
					p.opener = p.buf[i : i+n]
					p.buf = p.buf[i+n:]
					p.inCall = true
					continue
				}
			}
			n := len(p.buf)
			if p.tools != nil {
				n -= partialTagLen(p.buf, tagToolCall)
			}
			p.addContent(d, p.buf[:n])
			p.buf = p.buf[n:]
			return
		}
	}
}

// flush returns what is held at the end of the reply: an unclosed reasoning
// block is reasoning (as llama-server and vLLM return it), an unclosed tool
// call is content.
func (p *replyParser) flush() replyDelta {
	var d replyDelta
	switch {
	case p.thinking:
		d.reasoning = p.buf
	case p.inCall:
		d.content = p.opener + p.buf
	default:
		p.addContent(&d, p.buf)
	}
	p.buf, p.inCall, p.atStart = "", false, false
	d.reasoning, d.content = stripMarkers(d.reasoning), stripMarkers(d.content)
	return d
}

// addContent adds text to d's content, except whitespace between and after
// tool calls (GLM puts newlines there).
func (p *replyParser) addContent(d *replyDelta, text string) {
	text = stripMarkers(text)
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
			_ = json.Unmarshal(p.Type, &typ) // a list of types, or none: ""
			params[k] = typ
		}
		out[t.Function.Name] = params
	}
	return out
}
