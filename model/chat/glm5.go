package chat

import (
	"fmt"
	"strings"
)

// GLM special tokens, as they appear in prompt text.
const (
	glmPrefix      = "[gMASK]<sop>"
	glmSystem      = "<|system|>"
	glmUser        = "<|user|>"
	glmAssistant   = "<|assistant|>"
	glmObservation = "<|observation|>"
	glmThinkOpen   = "<think>"
	glmThinkClose  = "</think>"
)

// glmToolsHeader and glmToolsFooter surround the tool definitions (one JSON
// object per line) in the system turn that GLM templates add for tools.
const (
	glmToolsHeader = glmSystem + "\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
		"You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
	glmToolsFooter = "</tools>\n\nFor each function call, output the function name and arguments within the following XML format:\n" +
		"<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>{arg-value-1}</arg_value>" +
		"<arg_key>{arg-key-2}</arg_key><arg_value>{arg-value-2}</arg_value>...</tool_call>"
)

// renderGLM5 writes the GLM-4.7/GLM-5 prompt format:
//
//	[gMASK]<sop>[<|system|> tools...]<|system|>S<|user|>U<|assistant|><think>R</think>A
//	    <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>
//	<|observation|><tool_response>T</tool_response>...<|assistant|><think>
//
// An assistant turn keeps its reasoning when clear_thinking is off or it
// follows the last user message; otherwise it gets a bare </think>. Reasoning
// may also come inline in the content as <think>R</think>A.
func renderGLM5(ms []message, tools []node, opts Options) (string, error) {
	var sb strings.Builder
	sb.WriteString(glmPrefix)
	if len(tools) > 0 {
		sb.WriteString(glmToolsHeader)
		for i := range tools {
			tools[i].writeJSON(&sb)
			sb.WriteByte('\n')
		}
		sb.WriteString(glmToolsFooter)
	}
	lastUser := -1
	for i, m := range ms {
		if m.Role == RoleUser {
			lastUser = i
		}
	}
	for i, m := range ms {
		switch m.Role {
		case RoleSystem:
			sb.WriteString(glmSystem)
			sb.WriteString(m.Content)
		case RoleUser:
			sb.WriteString(glmUser)
			sb.WriteString(m.Content)
		case RoleAssistant:
			sb.WriteString(glmAssistant)
			reasoning, content := m.ReasoningContent, m.Content
			if reasoning == "" && strings.Contains(content, glmThinkClose) {
				// Python: content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
				before, _, _ := strings.Cut(content, glmThinkClose)
				before = strings.TrimRight(before, "\n")
				if k := strings.LastIndex(before, glmThinkOpen); k >= 0 {
					before = before[k+len(glmThinkOpen):]
				}
				reasoning = strings.TrimLeft(before, "\n")
				// content.split('</think>')[-1].lstrip('\n')
				content = content[strings.LastIndex(content, glmThinkClose)+len(glmThinkClose):]
				content = strings.TrimLeft(content, "\n")
			}
			if (!opts.ClearThinking || i > lastUser) && reasoning != "" {
				sb.WriteString(glmThinkOpen)
				sb.WriteString(strings.TrimSpace(reasoning))
				sb.WriteString(glmThinkClose)
			} else {
				sb.WriteString(glmThinkClose)
			}
			sb.WriteString(strings.TrimSpace(content))
			for j, tc := range m.ToolCalls {
				sb.WriteString("<tool_call>")
				sb.WriteString(tc.Function.Name)
				args := &m.args[j]
				for k, key := range args.keys {
					sb.WriteString("<arg_key>")
					sb.WriteString(key)
					sb.WriteString("</arg_key><arg_value>")
					if v := &args.items[k]; v.kind == kindString {
						sb.WriteString(v.s)
					} else {
						v.writeJSON(&sb)
					}
					sb.WriteString("</arg_value>")
				}
				sb.WriteString("</tool_call>")
			}
		case RoleTool:
			if i == 0 || ms[i-1].Role != RoleTool {
				sb.WriteString(glmObservation)
			}
			sb.WriteString("<tool_response>")
			sb.WriteString(m.Content)
			sb.WriteString("</tool_response>")
		default:
			return "", fmt.Errorf("chat: message %d: role %q is not one of system, user, assistant, tool", i, m.Role)
		}
	}
	if opts.AddGenerationPrompt {
		sb.WriteString(glmAssistant)
		if opts.NoThinking {
			sb.WriteString(glmThinkClose)
		} else {
			sb.WriteString(glmThinkOpen)
		}
	}
	return sb.String(), nil
}
