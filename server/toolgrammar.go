package server

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/glmrun/glmrun/model/grammar"
)

// forcedCallGrammar is the grammar of a reply that tool_choice forces to
// call a tool ("required", or a named function: Anthropic's "any" and
// "tool"). The prompt ends with the call's opening (<tool_call>, and the
// function's name when one is named); the grammar takes the rest of that
// call and then any further calls, each of a function in tools with its
// declared argument names and, for typed arguments, values of their type:
// a string argument's value is free text, as GLM writes it, an integer,
// number or boolean one is that JSON literal, any other JSON. The markup
// tags are GLM's control tokens, named by id. It returns nil when the
// vocabulary lacks one of them: the call's opening in the prompt then
// forces the call alone.
func (s *Server) forcedCallGrammar(tools []json.RawMessage, name string) (*grammar.Grammar, error) {
	tags := map[string]string{}
	for _, tag := range []string{tagToolCall, tagToolCallEnd, tagArgKey, tagArgKeyEnd, tagArgValue, tagArgValueEnd} {
		id, ok := s.tok.ID(tag)
		if !ok {
			return nil, nil
		}
		tags[tag] = fmt.Sprintf("<[%d]>", id)
	}
	funcs := toolParamTypes(tools)
	names := slices.Sorted(maps.Keys(funcs))
	var b strings.Builder
	first := "call"
	if name != "" {
		i := slices.Index(names, name)
		if i < 0 {
			return nil, fmt.Errorf("server: tool_choice names %q, which tools do not define", name)
		}
		first = fmt.Sprintf("args%d", i)
	}
	fmt.Fprintf(&b, "root ::= %s %s ( %s call %s )*\n", first, tags[tagToolCallEnd], tags[tagToolCall], tags[tagToolCallEnd])
	b.WriteString("call ::= ")
	for i, n := range names {
		if i > 0 {
			b.WriteString(" | ")
		}
		fmt.Fprintf(&b, "%s args%d", grammar.Literal(n), i)
	}
	if len(names) == 0 {
		b.WriteString(`[^\x00]+`) // no readable tool: any name
	}
	b.WriteString("\n")
	for i, n := range names {
		params := funcs[n]
		keys := slices.Sorted(maps.Keys(params))
		if len(keys) == 0 {
			fmt.Fprintf(&b, "args%d ::= \"\"\n", i)
			continue
		}
		fmt.Fprintf(&b, "args%d ::= ( %s ( ", i, tags[tagArgKey])
		for j, k := range keys {
			if j > 0 {
				b.WriteString(" | ")
			}
			fmt.Fprintf(&b, "%s %s %s %s", grammar.Literal(k), tags[tagArgKeyEnd], tags[tagArgValue], argValueRule(params[k]))
		}
		fmt.Fprintf(&b, " ) %s )*\n", tags[tagArgValueEnd])
	}
	b.WriteString("text ::= .*\n")
	b.WriteString(grammar.JSONValueRules)
	return grammar.Parse(b.String())
}

// argValueRule is the grammar rule of an argument value of JSON Schema type
// typ, as GLM's template writes it: strings raw, anything else as JSON.
func argValueRule(typ string) string {
	switch typ {
	case "string", "":
		return "text"
	case "integer", "number", "boolean", "null", "object", "array":
		return typ
	}
	return "value"
}
