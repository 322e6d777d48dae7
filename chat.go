package glmrun

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"

	"github.com/glmrun/glmrun/model/chat"
)

// Message is one turn of a conversation (see package model/chat).
type Message = chat.Message

// ChatOptions configure Chat.
type ChatOptions struct {
	GenerateOptions

	// NoThinking sets the template's enable_thinking to false: GLM then
	// answers without a reasoning block.
	NoThinking bool
	// Tools are tool definitions, each a JSON value such as
	// {"type": "function", "function": {...}}.
	Tools []json.RawMessage
	// Vars are extra template variables (llama.cpp's
	// chat_template_kwargs).
	Vars map[string]any
}

// RenderChat returns the prompt text for msgs: the chat template rendered
// with add_generation_prompt, ready for the assistant's reply.
func (m *Model) RenderChat(msgs []Message, opts ChatOptions) (string, error) {
	if m.tmplErr != nil {
		return "", m.tmplErr
	}
	text, err := m.tmpl.Render(msgs, m.chatOptions(opts))
	if err != nil {
		return "", fmt.Errorf("glmrun: chat template: %w", err)
	}
	return text, nil
}

func (m *Model) chatOptions(opts ChatOptions) chat.Options {
	o := chat.Options{
		Tools:               opts.Tools,
		AddGenerationPrompt: true,
		NoThinking:          opts.NoThinking,
		Vars:                opts.Vars,
	}
	if id := m.tok.BOS(); id >= 0 {
		o.BOSToken = m.tok.Text(id)
	}
	if id := m.tok.EOS(); id >= 0 {
		o.EOSToken = m.tok.Text(id)
	}
	return o
}

// Chat renders msgs with the model's chat template, makes the result the
// session's sequence and generates the assistant's reply (see Generate).
// When the rendered conversation extends the session's cached tokens, as the
// next turn of the same conversation does, only the new tokens are run
// through the model.
func (s *Session) Chat(ctx context.Context, msgs []Message, opts ChatOptions) iter.Seq2[Token, error] {
	return func(yield func(Token, error) bool) {
		prompt, err := s.m.RenderChat(msgs, opts)
		if err != nil {
			yield(Token{}, err)
			return
		}
		// The template writes the special tokens as text ("[gMASK]",
		// "<|user|>"): parse them, add nothing.
		if err := s.PromptTokens(s.m.tok.Encode(prompt, false, true)); err != nil {
			yield(Token{}, err)
			return
		}
		for tok, err := range s.Generate(ctx, opts.GenerateOptions) {
			if !yield(tok, err) {
				return
			}
		}
	}
}
