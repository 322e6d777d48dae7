package server

// This file holds llama-server's small endpoints, which users script
// against: POST /tokenize, POST /detokenize, POST /apply-template,
// GET /props and GET /slots, with llama-server's request and response
// shapes, so that scripts written for llama-server work here.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/glmrun/glmrun/model"
	"github.com/glmrun/glmrun/model/sample"
)

// llamaPaths are the llama-server endpoints of this file. With
// Config.APIKey they need the key, as llama-server protects every endpoint
// but /health and /models.
var llamaPaths = []string{"/tokenize", "/detokenize", "/apply-template", "/props", "/slots"}

// isLlamaPath reports whether path is one of llamaPaths.
func isLlamaPath(path string) bool { return slices.Contains(llamaPaths, path) }

// tokenizeRequest is the body of POST /tokenize. The flags are pointers
// because llama-server's defaults are not all false.
type tokenizeRequest struct {
	// Content is a string, or llama-server's mixed array of strings and
	// token ids; absent, the answer has no tokens, as llama-server's.
	Content      json.RawMessage `json:"content"`
	AddSpecial   *bool           `json:"add_special"`   // add BOS/EOS as the vocabulary asks; default false
	ParseSpecial *bool           `json:"parse_special"` // control tokens' text becomes those tokens; default true
	WithPieces   *bool           `json:"with_pieces"`   // answer {"id", "piece"} objects; default false
}

// tokenPiece is one token of a with_pieces answer. Piece is the token's
// text when its bytes are valid UTF-8 and otherwise the byte values, so
// that a character split over several tokens shows exactly.
type tokenPiece struct {
	ID    int32 `json:"id"`
	Piece any   `json:"piece"` // string or []int
}

// handleTokenize answers POST /tokenize: {"tokens": [ids]}, or with
// with_pieces {"tokens": [{"id", "piece"}]}.
func (s *Server) handleTokenize(w http.ResponseWriter, r *http.Request) {
	var req tokenizeRequest
	if e := s.decodeBody(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	addSpecial := req.AddSpecial != nil && *req.AddSpecial
	parseSpecial := req.ParseSpecial == nil || *req.ParseSpecial
	ids, e := s.tokenizeMixed(req.Content, addSpecial, parseSpecial)
	if e != nil {
		writeError(w, e)
		return
	}
	if req.WithPieces == nil || !*req.WithPieces {
		writeJSON(w, http.StatusOK, map[string]any{"tokens": nonNil(ids)})
		return
	}
	pieces := make([]tokenPiece, len(ids))
	for i, id := range ids {
		// Control tokens show their text, as llama-server's pieces do.
		p := s.tok.Piece(id, true)
		pieces[i] = tokenPiece{ID: id, Piece: p}
		if !utf8.ValidString(p) {
			pieces[i].Piece = byteList(p)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"tokens": pieces})
}

// tokenizeMixed tokenizes llama-server's content: a string, or an array
// of strings and token ids, concatenated, where only a string in first
// place gets the special tokens add_special adds (llama-server's
// tokenize_mixed). Ids must be in the vocabulary.
func (s *Server) tokenizeMixed(raw json.RawMessage, addSpecial, parseSpecial bool) ([]int32, *apiError) {
	tok := s.tok
	// Decoded into any, with numbers kept as written: unmarshaling into a
	// string or an int would take a null element silently as "" or 0, and
	// a float64 would round ids past 2^53.
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var content any
	if len(raw) > 0 {
		if err := dec.Decode(&content); err != nil {
			return nil, invalidType("content", "content must be a string or an array of strings and token ids")
		}
	}
	switch c := content.(type) {
	case nil:
		return nil, nil
	case string:
		return tok.Encode(c, addSpecial, parseSpecial), nil
	case []any:
		var ids []int32
		for i, part := range c {
			param := fmt.Sprintf("content[%d]", i)
			switch p := part.(type) {
			case string:
				ids = append(ids, tok.Encode(p, addSpecial && i == 0, parseSpecial)...)
			case json.Number:
				id, err := p.Int64()
				if err != nil {
					return nil, invalidType(param, "%s must be a string or a token id (an integer), not %s", param, p)
				}
				if e := s.checkTokenID(param, id); e != nil {
					return nil, e
				}
				ids = append(ids, int32(id))
			default:
				return nil, invalidType(param, "%s must be a string or a token id, not %s", param, jsonKind(part))
			}
		}
		return ids, nil
	}
	return nil, invalidType("content", "content must be a string or an array of strings and token ids, not %s", jsonKind(content))
}

// jsonKind names the JSON type of a decoded value, for error messages.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	}
	return "an object"
}

// checkTokenID refuses an id outside the vocabulary, naming it.
func (s *Server) checkTokenID(param string, id int64) *apiError {
	if n := s.tok.NumTokens(); id < 0 || id >= int64(n) {
		return invalid(param, "token id %d (%s) is not in the vocabulary [0, %d)", id, param, n)
	}
	return nil
}

// invalidType is a 400 error about a request parameter of the wrong JSON
// type, coded as decodeBody codes the type errors it finds.
func invalidType(param, format string, args ...any) *apiError {
	e := invalid(param, format, args...)
	e.Code = ptr("invalid_type")
	return e
}

// handleDetokenize answers POST /detokenize {"tokens": [ids]} with
// {"content": text}: the tokens' pieces, control tokens' text included (as
// llama-server writes them), as valid UTF-8.
func (s *Server) handleDetokenize(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Tokens []int64 `json:"tokens"`
	}
	if e := s.decodeBody(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	ids := make([]int32, len(req.Tokens))
	for i, id := range req.Tokens {
		if e := s.checkTokenID(fmt.Sprintf("tokens[%d]", i), id); e != nil {
			e.Param = ptr("tokens")
			writeError(w, e)
			return
		}
		ids[i] = int32(id)
	}
	text, err := s.tok.Decode(ids, true)
	if err != nil { // not expected: every id was checked above, but a failure is answered, not dropped
		writeError(w, invalid("tokens", "%v", err))
		return
	}
	if !utf8.ValidString(text) {
		// Each byte no character can be made of becomes U+FFFD, as in
		// every other text the server returns.
		text = string([]rune(text))
	}
	writeJSON(w, http.StatusOK, map[string]string{"content": text})
}

// handleApplyTemplate answers POST /apply-template: a chat request's
// body, of which messages, tools, tool_choice, reasoning_effort and
// chat_template_kwargs shape the prompt, and {"prompt": text}, the text
// /v1/chat/completions tokenizes for the same body (a forced tool call's
// opening included). The other fields are read, so a malformed one is
// refused as the chat endpoint refuses it, and otherwise ignored, as
// llama-server ignores them; the prompt's length is not checked against
// the context, so that a script can measure a prompt too long to run.
func (s *Server) handleApplyTemplate(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if e := s.decodeBody(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	if len(req.Messages) == 0 {
		writeError(w, invalid("messages", "messages must not be empty"))
		return
	}
	turn, e := chatTurnOf(&req)
	if e != nil {
		writeError(w, e)
		return
	}
	text, _, e := s.renderPrompt(turn)
	if e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"prompt": text})
}

// props is the body of GET /props, llama-server's shape.
type props struct {
	DefaultGenerationSettings generationSettings `json:"default_generation_settings"`
	TotalSlots                int                `json:"total_slots"`
	ModelPath                 string             `json:"model_path"`
	ModelAlias                string             `json:"model_alias"`
	ChatTemplate              string             `json:"chat_template"`
	BOSToken                  string             `json:"bos_token"`
	EOSToken                  string             `json:"eos_token"`
	Modalities                map[string]bool    `json:"modalities"`
	BuildInfo                 string             `json:"build_info"`
}

type generationSettings struct {
	NCtx   int                `json:"n_ctx"`
	Params generationDefaults `json:"params"`
}

// generationDefaults are the sampling settings of a request that sets
// none, in llama-server's names.
type generationDefaults struct {
	Temperature      float64 `json:"temperature"`
	TopK             int     `json:"top_k"`
	TopP             float64 `json:"top_p"`
	MinP             float64 `json:"min_p"`
	RepeatPenalty    float64 `json:"repeat_penalty"`
	RepeatLastN      int     `json:"repeat_last_n"`
	PresencePenalty  float64 `json:"presence_penalty"`
	FrequencyPenalty float64 `json:"frequency_penalty"`
	Seed             int64   `json:"seed"`
	CachePrompt      bool    `json:"cache_prompt"`
}

// defaultParams reads the defaults off sample.DefaultOptions, which
// Server.sampler starts every request from, so that /props cannot drift
// from what requests get.
func defaultParams() generationDefaults {
	o := sample.DefaultOptions(0)
	return generationDefaults{
		Temperature: float32Value(o.Temperature), TopK: o.TopK, TopP: float32Value(o.TopP), MinP: float32Value(o.MinP),
		RepeatPenalty:   float32Value(o.RepeatPenalty),
		PresencePenalty: float32Value(o.PresencePenalty), FrequencyPenalty: float32Value(o.FrequencyPenalty),
		// Presence and frequency penalties, when a request sets them,
		// count every generated token (Server.sampler): llama-server's -1.
		RepeatLastN: -1,
		// Each request without a seed draws a random one: llama-server's
		// -1 ("random").
		Seed:        -1,
		CachePrompt: true,
	}
}

// float32Value is v as the float64 its shortest decimal form reads as, so
// that 0.8f is written 0.8 and not 0.800000011920929.
func float32Value(v float32) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(float64(v), 'g', -1, 32), 64)
	return f
}

// handleProps answers GET /props with what the server knows of
// llama-server's properties. chat_template is "" for the built-in GLM-5
// format, which has no Jinja source.
func (s *Server) handleProps(w http.ResponseWriter, r *http.Request) {
	tok := s.tok
	p := props{
		DefaultGenerationSettings: generationSettings{NCtx: s.ctxSize, Params: defaultParams()},
		TotalSlots:                s.cfg.Parallel,
		ModelPath:                 s.cfg.ModelPath,
		ModelAlias:                s.cfg.ModelID,
		ChatTemplate:              s.cfg.Template.Source(),
		Modalities:                map[string]bool{"vision": false, "audio": false},
		BuildInfo:                 "glmrun",
	}
	if p.ModelPath == "" {
		p.ModelPath = s.cfg.ModelID
	}
	if id := tok.BOS(); id >= 0 {
		p.BOSToken = tok.Text(id)
	}
	if id := tok.EOS(); id >= 0 {
		p.EOSToken = tok.Text(id)
	}
	writeJSON(w, http.StatusOK, p)
}

// slotInfo is one slot in GET /slots, llama-server's shape: its id, the
// request it runs (id_task, -1 when idle), and n_cached, the tokens its KV
// cache holds (a running request's prompt and reply so far; an idle
// slot's cache, which the next request sharing its prefix reuses).
type slotInfo struct {
	ID            int       `json:"id"`
	IDTask        int64     `json:"id_task"`
	NCtx          int       `json:"n_ctx"`
	Speculative   bool      `json:"speculative"`
	IsProcessing  bool      `json:"is_processing"`
	NCached       int       `json:"n_cached"`
	NPromptTokens int       `json:"n_prompt_tokens"`       // the running request's prompt; 0 when idle
	NPromptCached int       `json:"n_prompt_tokens_cache"` // of them, those the slot held already
	NextToken     nextToken `json:"next_token"`
}

type nextToken struct {
	HasNextToken bool `json:"has_next_token"`
	NRemain      int  `json:"n_remain"` // tokens max_tokens still allows; -1: no limit but the context
	NDecoded     int  `json:"n_decoded"`
}

// publishSlots stores a snapshot of the slots for GET /slots. The
// scheduler's goroutine calls it whenever the slots change; the snapshot
// is never written after it is stored, so handlers read it without a lock
// and the scheduler never waits for a handler.
func (s *scheduler) publishSlots() {
	if s.slotIDs == nil {
		s.slotIDs = make(map[*model.Session]int)
	}
	id := func(sess *model.Session) int {
		// Sessions get ids in the order the snapshots first see them:
		// creation order, as each new session is seen by the next
		// snapshot, before another is made.
		n, ok := s.slotIDs[sess]
		if !ok {
			n = len(s.slotIDs)
			s.slotIDs[sess] = n
		}
		return n
	}
	infos := make([]slotInfo, 0, len(s.pool)+len(s.active))
	for _, seq := range s.active {
		remain := -1
		if seq.req.maxTokens > 0 {
			remain = seq.req.maxTokens - seq.generated()
		}
		infos = append(infos, slotInfo{
			ID: id(seq.sess), IDTask: seq.task, NCtx: s.ctxSize, IsProcessing: true,
			NCached: seq.prefilled + len(seq.fed), NPromptTokens: len(seq.req.prompt), NPromptCached: seq.cached,
			NextToken: nextToken{HasNextToken: true, NRemain: remain, NDecoded: seq.generated()},
		})
	}
	for _, sl := range s.pool {
		infos = append(infos, slotInfo{ID: id(sl.sess), IDTask: -1, NCtx: s.ctxSize, NCached: len(sl.tokens),
			NextToken: nextToken{NRemain: -1}})
	}
	slices.SortFunc(infos, func(a, b slotInfo) int { return a.ID - b.ID })
	s.slots.Store(&infos)
}

// handleSlots answers GET /slots with every slot created so far (slots
// are made as requests need them, up to Config.Parallel). With
// ?fail_on_no_slot=1, as in llama-server, it answers 503 when no slot is
// free for a new request.
func (s *Server) handleSlots(w http.ResponseWriter, r *http.Request) {
	infos := []slotInfo{}
	if p := s.sched.slots.Load(); p != nil {
		infos = *p
	}
	if v := r.URL.Query().Get("fail_on_no_slot"); v != "" && v != "0" && !strings.EqualFold(v, "false") {
		busy := 0
		for _, in := range infos {
			if in.IsProcessing {
				busy++
			}
		}
		if busy >= s.cfg.Parallel {
			writeError(w, &apiError{status: http.StatusServiceUnavailable, Type: "server_error",
				Code: ptr("no_slot_available"), Message: "no slot available: every slot is processing a request"})
			return
		}
	}
	writeJSON(w, http.StatusOK, infos)
}
