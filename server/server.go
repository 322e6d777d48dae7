package server

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/glmrun/glmrun"
	"github.com/glmrun/glmrun/model"
	"github.com/glmrun/glmrun/model/chat"
	"github.com/glmrun/glmrun/model/tokenizer"
)

// Defaults of Config's zero fields.
const (
	DefaultParallel     = 4
	DefaultContextSize  = model.DefaultContextSize // where the memory available is unknown
	DefaultQueueSize    = 64
	DefaultMaxBodyBytes = 16 << 20
)

// Config configures a Server.
type Config struct {
	// Model is the model to serve, loaded with glmrun.Load (required): the
	// server runs its engine (Model.Engine), tokenizer and chat template.
	// The server does not own it, and its steps and KV cache slots do not
	// take the Model's lock: the Model must stay open while the server
	// runs, until Server.Close has returned and the handlers have ended
	// (http.Server.Shutdown), since glmrun.Model.Close unmaps the weights
	// and frees the slots. Close the Model after the Server.
	Model *glmrun.Model
	// Template overrides the chat template; nil means the model's
	// (Model.Template: the file's, or the built-in GLM-5 format when the
	// file has none). A file whose chat template does not parse
	// (Model.TemplateErr) is served only with an override.
	Template *chat.Template
	// ModelID names the model in /v1/models and in responses; requests
	// naming another model get 404 (an empty "model" is accepted).
	ModelID string
	// Parallel is the number of sequences that decode together, each with
	// its own KV cache slot; 0 means DefaultParallel.
	Parallel int
	// ContextSize is each sequence's number of positions (prompt and
	// reply); 0 means the model's training context, lowered so that
	// Parallel KV caches fit in three quarters of the memory available
	// (model.Model.FitContext; ContextNote says when). Each of the
	// Parallel slots allocates its KV cache for this many positions once,
	// the first when New runs.
	ContextSize int
	// QueueSize is the number of requests that may wait for a slot; more
	// get 503. 0 means DefaultQueueSize.
	QueueSize int
	// ModelPath is the model's file, which GET /props reports as
	// model_path; empty means ModelID.
	ModelPath string
	// APIKey, when set, is required as "Authorization: Bearer KEY" on the
	// /v1/ endpoints and llama-server's /tokenize, /detokenize,
	// /apply-template, /props and /slots (GET /health and GET /metrics
	// stay open, as in vLLM); the scheme is case-insensitive, as HTTP
	// defines it. Anthropic's /v1/messages endpoints also take it as
	// "x-api-key: KEY".
	APIKey string
	// Special renders control tokens (<|assistant|>, <think>, <tool_call>,
	// ...) as their text in replies, as llama-server --special does. By
	// default they never appear in content, reasoning_content or a
	// completion's text: the reply markup is parsed into reasoning and
	// tool calls and removed, and other control tokens are dropped. With
	// Special the markup is still parsed, and what the parser does not
	// consume stays in the text.
	Special bool
	// MaxBodyBytes limits request bodies; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Stepper runs the decode steps; nil means BatchStepper.
	Stepper Stepper
	// SpecDraft turns on speculative decoding with the model's MTP block
	// (the Model must be loaded with it: glmrun.Options.SpecDraft > 0): a
	// sequence drafts
	// up to SpecDraft tokens per step and the trunk checks them in one
	// pass. A request lowers it with speculative.n_max (0: off), and
	// speculation is off for a request whose penalties are on.
	SpecDraft int
	// PrefixCacheBytes is the host memory of the prefix cache, which keeps
	// the KV cache rows (latents and indexer keys) of prompts that ran, in
	// blocks of PrefixCacheBlock tokens, for any later request that starts
	// with the same tokens, on any slot. 0 means a quarter of the memory
	// available, at most 8 GiB; negative turns it off. It is off with
	// SpecDraft: an MTP session's rows cannot be moved.
	PrefixCacheBytes int64
	// PrefixCacheBlock is the tokens per prefix-cache block; 0 means
	// DefaultPrefixCacheBlock.
	PrefixCacheBlock int
}

// Server is the HTTP API. Create it with New, serve it with net/http (it is
// an http.Handler) and stop it with Close.
type Server struct {
	cfg     Config               // Template set (the override or the model's)
	tok     *tokenizer.Tokenizer // cfg.Model.Tokenizer()
	sched   *scheduler
	metrics *metrics
	mux     *http.ServeMux
	created int64
	ctxSize int
	// slotBytes is the device memory of one slot's KV cache.
	slotBytes int64
	ctxNote   string         // why the default context is below the training context
	markers   map[int32]byte // chat requests' markup control tokens; nil with Config.Special

	// script, when set (tests only), gives the tokens a request emits
	// instead of sampled ones, from its prompt.
	script func(prompt []int32) []int32
}

// New checks cfg and starts the scheduler.
func New(cfg Config) (*Server, error) {
	if cfg.Model == nil {
		return nil, errors.New("server: Config.Model is required (a model loaded with glmrun.Load)")
	}
	engine, tok := cfg.Model.Engine(), cfg.Model.Tokenizer()
	if cfg.Template == nil {
		if err := cfg.Model.TemplateErr(); err != nil {
			return nil, fmt.Errorf("server: the model's chat template is not usable (set Config.Template to serve it with another): %w", err)
		}
		cfg.Template = cfg.Model.Template()
	}
	if cfg.ModelID == "" {
		cfg.ModelID = "glmrun"
	}
	if cfg.Parallel < 0 || cfg.ContextSize < 0 || cfg.QueueSize < 0 || cfg.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("server: negative setting (parallel %d, context %d, queue %d, body limit %d)",
			cfg.Parallel, cfg.ContextSize, cfg.QueueSize, cfg.MaxBodyBytes)
	}
	if cfg.Parallel == 0 {
		cfg.Parallel = DefaultParallel
	}
	if cfg.QueueSize == 0 {
		cfg.QueueSize = DefaultQueueSize
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	mc := engine.Config()
	var ctxNote string
	if cfg.ContextSize == 0 {
		cfg.ContextSize, ctxNote = engine.FitContext(cfg.Model.CacheType(), cfg.SpecDraft > 0, cfg.Parallel)
	}
	if cfg.ContextSize < 2 {
		return nil, fmt.Errorf("server: context size %d is too small", cfg.ContextSize)
	}
	if n, v := mc.VocabSize, tok.NumTokens(); n < v {
		return nil, fmt.Errorf("server: the tokenizer has %d tokens but the model's output only %d", v, n)
	}
	if cfg.Stepper == nil {
		cfg.Stepper = &BatchStepper{}
	}
	switch {
	case cfg.SpecDraft < 0:
		return nil, fmt.Errorf("server: negative SpecDraft %d", cfg.SpecDraft)
	case cfg.SpecDraft > 0 && !engine.HasMTP():
		return nil, fmt.Errorf("server: SpecDraft %d needs the model's MTP block, which %s was loaded without: load it with glmrun.Options.SpecDraft > 0",
			cfg.SpecDraft, cfg.Model.Path())
	}
	if cfg.PrefixCacheBlock < 0 {
		return nil, fmt.Errorf("server: negative PrefixCacheBlock %d", cfg.PrefixCacheBlock)
	}
	// Allocate one slot now, so that a context too large for memory fails
	// here rather than on the first request.
	probe, err := engine.NewSession(model.SessionOptions{ContextSize: cfg.ContextSize, MTP: cfg.SpecDraft > 0, CacheType: cfg.Model.CacheType()})
	if err != nil {
		return nil, fmt.Errorf("server: KV cache of %d positions: %w", cfg.ContextSize, err)
	}
	s := &Server{cfg: cfg, tok: tok, metrics: newMetrics(), created: time.Now().Unix(), ctxSize: cfg.ContextSize, slotBytes: probe.CacheBytes(),
		ctxNote: ctxNote}
	if !cfg.Special {
		s.markers = markupMarkers(tok)
	}
	s.sched = newScheduler(engine, tok, cfg.ContextSize, cfg.Parallel, cfg.QueueSize, cfg.Special, cfg.Stepper, s.metrics)
	s.sched.mtp = cfg.SpecDraft > 0
	s.sched.cacheType = cfg.Model.CacheType()
	if cfg.PrefixCacheBytes >= 0 && cfg.SpecDraft == 0 {
		budget, block := cfg.PrefixCacheBytes, cfg.PrefixCacheBlock
		if budget == 0 {
			budget = defaultPrefixCacheBytes()
		}
		if block == 0 {
			block = DefaultPrefixCacheBlock
		}
		s.sched.pc = newPrefixCache(block, probe.CacheValues(), budget, s.metrics)
	}
	s.sched.pool = append(s.sched.pool, slot{sess: probe})
	s.sched.nSess = 1
	s.sched.publishSlots() // before the loop runs, which owns the slots from then on
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("/v1/chat/completions", s.post(s.handleChat))
	s.mux.HandleFunc("/v1/completions", s.post(s.handleCompletions))
	s.mux.HandleFunc("/v1/messages", s.anthropicPost(s.handleMessages))
	s.mux.HandleFunc("/v1/messages/count_tokens", s.anthropicPost(s.handleCountTokens))
	s.mux.HandleFunc("/v1/messages/", s.handleMessagesNotFound)
	s.mux.HandleFunc("/v1/models", s.get(s.handleModels))
	s.mux.HandleFunc("/v1/models/{id...}", s.get(s.handleModel))
	s.mux.HandleFunc("/health", s.get(s.handleHealth))
	s.mux.HandleFunc("/metrics", s.get(s.handleMetrics))
	s.mux.HandleFunc("/tokenize", s.post(s.handleTokenize))
	s.mux.HandleFunc("/detokenize", s.post(s.handleDetokenize))
	s.mux.HandleFunc("/apply-template", s.post(s.handleApplyTemplate))
	s.mux.HandleFunc("/props", s.get(s.handleProps))
	s.mux.HandleFunc("/slots", s.get(s.handleSlots))
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{status: http.StatusNotFound, Type: "invalid_request_error",
			Message: fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path), Code: ptr("not_found")})
	})
	go s.sched.run()
	return s, nil
}

// ContextNote says why the context size is below the model's training
// context when Config.ContextSize asked for the default and the slots'
// caches did not fit (empty otherwise).
func (s *Server) ContextNote() string { return s.ctxNote }

// SlotCacheBytes returns the device memory one slot's KV cache takes
// (Config.Parallel slots are allocated as requests need them).
func (s *Server) SlotCacheBytes() int64 { return s.slotBytes }

// ContextSize returns the number of positions of each sequence.
func (s *Server) ContextSize() int { return s.ctxSize }

// Close stops the scheduler: requests still running or queued end with an
// error (a stream gets an error event). It does not close listeners; call
// http.Server.Shutdown first to let running requests finish.
func (s *Server) Close() error {
	s.sched.close()
	return nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
	defer func() {
		path := r.URL.Path
		if strings.HasPrefix(path, "/v1/models/") {
			path = "/v1/models/{id}"
		}
		switch path {
		case "/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/messages/count_tokens",
			"/v1/models", "/v1/models/{id}", "/health", "/metrics",
			"/tokenize", "/detokenize", "/apply-template", "/props", "/slots":
		default:
			path = "other"
		}
		s.metrics.request(path, rec.code)
	}()
	if (strings.HasPrefix(r.URL.Path, "/v1/") || isLlamaPath(r.URL.Path)) && s.cfg.APIKey != "" && !s.authorized(r) {
		rec.Header().Set("WWW-Authenticate", `Bearer realm="glmrun"`)
		if messagesPath(r.URL.Path) {
			writeAnthropicError(rec, &apiError{status: http.StatusUnauthorized,
				Message: "invalid or missing API key: send the header x-api-key: <key> or Authorization: Bearer <key>"})
			return
		}
		writeError(rec, &apiError{status: http.StatusUnauthorized, Type: "invalid_request_error",
			Message: "invalid or missing API key: send the header Authorization: Bearer <key>", Code: ptr("invalid_api_key")})
		return
	}
	s.mux.ServeHTTP(rec, r)
}

// authorized reports whether r carries the API key as a bearer token. The
// scheme is matched case-insensitively (RFC 9110, section 11.1), so
// "bearer KEY" and "BEARER KEY" pass too. Anthropic's endpoints also take
// the key as "x-api-key: KEY", the header Anthropic's clients send; the
// OpenAI ones keep to the one header OpenAI's clients send.
func (s *Server) authorized(r *http.Request) bool {
	if messagesPath(r.URL.Path) {
		if k := strings.TrimSpace(r.Header.Get("X-Api-Key")); k != "" &&
			subtle.ConstantTimeCompare([]byte(k), []byte(s.cfg.APIKey)) == 1 {
			return true
		}
	}
	scheme, key, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(key)), []byte(s.cfg.APIKey)) == 1
}

func (s *Server) post(h http.HandlerFunc) http.HandlerFunc { return method(http.MethodPost, h) }
func (s *Server) get(h http.HandlerFunc) http.HandlerFunc  { return method(http.MethodGet, h) }

func method(m string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != m && !(m == http.MethodGet && r.Method == http.MethodHead) {
			w.Header().Set("Allow", m)
			writeError(w, &apiError{status: http.StatusMethodNotAllowed, Type: "invalid_request_error",
				Message: fmt.Sprintf("%s %s is not allowed; use %s", r.Method, r.URL.Path, m), Code: ptr("method_not_allowed")})
			return
		}
		h(w, r)
	}
}

// statusRecorder remembers the status code for the metrics.
type statusRecorder struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wrote {
		r.code, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's Flush.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, modelList{Object: "list", Data: []modelCard{s.card()}})
}

func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	if e := s.checkModel(r.PathValue("id")); e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, s.card())
}

func (s *Server) card() modelCard {
	return modelCard{ID: s.cfg.ModelID, Object: "model", Created: s.created, OwnedBy: "glmrun"}
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"status":           "ok",
		"slots":            s.cfg.Parallel,
		"active_sequences": s.metrics.active.Load(),
		"queue_depth":      s.metrics.queueDepth.Load(),
	})
}

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	s.metrics.write(w, s.cfg.Parallel, s.cfg.QueueSize)
}

// checkModel accepts an empty name, the model's id, and its file name.
func (s *Server) checkModel(name string) *apiError {
	if name == "" || name == s.cfg.ModelID || strings.TrimSuffix(name, ".gguf") == s.cfg.ModelID {
		return nil
	}
	return &apiError{status: http.StatusNotFound, Type: "invalid_request_error", Param: ptr("model"),
		Code:    ptr("model_not_found"),
		Message: fmt.Sprintf("the model %q does not exist; this server runs %q", name, s.cfg.ModelID)}
}

// decodeBody reads a JSON request body into v.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, v any) *apiError {
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	b, err := io.ReadAll(body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &apiError{status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error",
				Code:    ptr("request_too_large"),
				Message: fmt.Sprintf("the request body is larger than %d bytes", mbe.Limit)}
		}
		return &apiError{status: http.StatusBadRequest, Type: "invalid_request_error", Code: ptr("invalid_body"),
			Message: fmt.Sprintf("reading the request body: %v", err)}
	}
	if err := json.Unmarshal(b, v); err != nil {
		e := &apiError{status: http.StatusBadRequest, Type: "invalid_request_error", Code: ptr("invalid_json"),
			Message: fmt.Sprintf("the request body is not valid JSON for this endpoint: %v", err)}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			e.Param = ptr(te.Field)
			e.Code = ptr("invalid_type")
		}
		return e
	}
	return nil
}

// marshal encodes v as JSON without HTML escaping ("<think>" stays
// readable, as OpenAI writes it).
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := marshal(v)
	if err != nil {
		code = http.StatusInternalServerError
		b, _ = json.Marshal(errorBody{apiError{Type: "server_error", Message: err.Error()}})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.status, errorBody{*e})
}

// invalid is a 400 error about the request parameter param.
func invalid(param, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, Type: "invalid_request_error", Param: ptr(param),
		Code: ptr("invalid_value"), Message: fmt.Sprintf(format, args...)}
}

// busy is the 503 answer to a request the queue has no room for.
func busy() *apiError {
	return &apiError{status: http.StatusServiceUnavailable, Type: "server_error", Code: ptr("server_busy"),
		Message: "the server is busy: every slot is taken and the queue is full; retry later"}
}

// runError turns a failed generation into an API error.
func runError(err error) *apiError {
	if errors.Is(err, errShutdown) {
		return &apiError{status: http.StatusServiceUnavailable, Type: "server_error", Code: ptr("shutting_down"), Message: err.Error()}
	}
	if errors.Is(err, model.ErrContextFull) {
		// The scheduler keeps prompt and reply within the context, so this
		// should not happen; if it does, the request asked for too much.
		return &apiError{status: http.StatusBadRequest, Type: "invalid_request_error",
			Code: ptr("context_length_exceeded"), Message: err.Error()}
	}
	return &apiError{status: http.StatusInternalServerError, Type: "server_error", Code: ptr("internal_error"), Message: err.Error()}
}

func ptr[T any](v T) *T { return &v }

// newID returns a random id with the given prefix, as OpenAI's
// "chatcmpl-..." and "call_...".
func newID(prefix string) string {
	return fmt.Sprintf("%s%016x%08x", prefix, rand.Uint64(), rand.Uint32())
}
