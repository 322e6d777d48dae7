package server

import (
	"encoding/json"
	"fmt"

	"github.com/glmrun/glmrun/model/grammar"
)

// Structured output: a request's response_format (json_object, or
// json_schema with its schema) or llama-server's grammar field (GBNF)
// constrains decoding to the grammar's sentences (package grammar). The
// constraint starts with the reply's content: when the prompt opened a
// reasoning block it waits for the </think> that closes it, so a thinking
// model still thinks freely. The log-probabilities reported are those of
// the constrained distribution, the one the token was drawn from. A
// response_format reply has no tool calls (its grammar names no control
// token); a forced tool call is constrained the same way by a grammar that
// does (forcedCallGrammar). A reply ends as soon as its grammar is complete
// and nothing can follow.

// responseFormat is OpenAI's response_format; schema is llama-server's
// shorthand {"type": "json_object", "schema": {...}}.
type responseFormat struct {
	Type       string            `json:"type"`
	JSONSchema *jsonSchemaFormat `json:"json_schema"`
	Schema     json.RawMessage   `json:"schema"`
}

type jsonSchemaFormat struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Strict      *bool           `json:"strict"`
}

// compileConstraint reads response_format and grammar into a grammar, or
// nil when neither constrains the reply.
func compileConstraint(rf *responseFormat, gbnf *string) (*grammar.Grammar, *apiError) {
	var src, param string
	if gbnf != nil && *gbnf != "" {
		if rf != nil && rf.Type != "" && rf.Type != "text" {
			return nil, invalid("grammar", "grammar and response_format %q are exclusive", rf.Type)
		}
		src, param = *gbnf, "grammar"
	} else if rf != nil {
		switch rf.Type {
		case "", "text":
			return nil, nil
		case "json_object":
			src, param = grammar.JSONGrammar, "response_format"
			if len(rf.Schema) > 0 && string(rf.Schema) != "null" {
				s, err := grammar.SchemaGrammar(rf.Schema)
				if err != nil {
					return nil, invalid("response_format.schema", "%v", err)
				}
				src, param = s, "response_format.schema"
			}
		case "json_schema":
			if rf.JSONSchema == nil || len(rf.JSONSchema.Schema) == 0 || string(rf.JSONSchema.Schema) == "null" {
				return nil, invalid("response_format.json_schema.schema", "response_format json_schema needs json_schema.schema")
			}
			s, err := grammar.SchemaGrammar(rf.JSONSchema.Schema)
			if err != nil {
				return nil, invalid("response_format.json_schema.schema", "%v", err)
			}
			src, param = s, "response_format.json_schema.schema"
		default:
			return nil, invalid("response_format.type", "response_format.type must be \"text\", \"json_object\" or \"json_schema\", not %q", rf.Type)
		}
	} else {
		return nil, nil
	}
	g, err := grammar.Parse(src)
	if err != nil {
		return nil, invalid(param, "%v", err)
	}
	return g, nil
}

// grammarVocab is the model's vocabulary as the grammar matcher sees it,
// shared with the library's generations (glmrun.Model.GrammarVocab).
func (s *Server) grammarVocab() (*grammar.Vocab, error) { return s.cfg.Model.GrammarVocab() }

// constraint is a request's grammar matcher and the token that switches it
// on (-1: on from the first token).
type constraint struct {
	m     *grammar.Matcher
	after int32
}

// newConstraint starts a matcher for g; thinking says the prompt opened a
// reasoning block, which the constraint waits out.
func (s *Server) newConstraint(g *grammar.Grammar, thinking bool) (*constraint, *apiError) {
	if g == nil {
		return nil, nil
	}
	v, err := s.grammarVocab()
	if err != nil {
		return nil, runError(fmt.Errorf("server: grammar vocabulary: %w", err))
	}
	m, err := g.NewMatcher(v)
	if err != nil {
		return nil, invalid("grammar", "%v", err)
	}
	c := &constraint{m: m, after: -1}
	if thinking {
		id, ok := s.tok.ID("</think>")
		if !ok {
			return nil, invalid("response_format", "the prompt opens a reasoning block, but the vocabulary has no </think> to end it")
		}
		c.after = id
	}
	return c, nil
}

// active reports whether the constraint applies to the next token.
func (c *constraint) active() bool { return c != nil && c.after < 0 }

// accept moves the constraint past token id.
func (c *constraint) accept(id int32) error {
	if c == nil {
		return nil
	}
	if c.after >= 0 {
		if id == c.after {
			c.after = -1
		}
		return nil
	}
	return c.m.Accept(id)
}
