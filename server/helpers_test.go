package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/glmrun/glmrun"
	"github.com/glmrun/glmrun/model"
	"github.com/glmrun/glmrun/model/chat"
	"github.com/glmrun/glmrun/model/tokenizer"
)

// testModelPath is the bundled GLM-5-shaped model (random weights, GLM-5's
// vocabulary, special tokens and chat template).
const testModelPath = "../testdata/models/glm5-mini.Q8_0.gguf"

// testModelID is the id the test servers give the model.
const testModelID = "glm5-mini"

// loaded is a model loaded with glmrun.Load, as glmrun serve loads it, and
// what the tests read of it. The bundled one is loaded once for the whole
// test binary (the model is immutable and shared by every server).
type loaded struct {
	g    *glmrun.Model        // what Config.Model takes
	m    *model.Model         // g.Engine()
	tok  *tokenizer.Tokenizer // g.Tokenizer()
	tmpl *chat.Template       // g.Template(), the file's own
}

// The fast products (Exact false), as glmrun serve uses by default; one
// worker per kernel keeps the goroutines few under -race.
var loadOnce = sync.OnceValues(func() (*loaded, error) {
	return loadModelFile(testModelPath, glmrun.Options{Threads: 1})
})

// loadModelFile loads a model through glmrun.Load; the file must have a
// chat template of its own that parses.
func loadModelFile(path string, opts glmrun.Options) (*loaded, error) {
	g, err := glmrun.Load(path, opts)
	if err != nil {
		return nil, err
	}
	if err := g.TemplateErr(); err != nil {
		g.Close()
		return nil, err
	}
	if g.Template().Builtin() {
		g.Close()
		return nil, fmt.Errorf("%s has no chat template (tokenizer.chat_template)", path)
	}
	return &loaded{g: g, m: g.Engine(), tok: g.Tokenizer(), tmpl: g.Template()}, nil
}

func testModel(t testing.TB) *loaded {
	t.Helper()
	l, err := loadOnce()
	if err != nil {
		t.Fatalf("loading %s: %v", testModelPath, err)
	}
	return l
}

// testServer is a Server behind an httptest server, with an OpenAI client.
type testServer struct {
	s      *Server
	url    string
	client openai.Client
	tok    *tokenizer.Tokenizer
}

// newTestServer starts a server on the bundled model; edit changes its
// Config, script (optional) scripts the tokens requests emit.
func newTestServer(t testing.TB, edit func(*Config), script func([]int32) []int32) *testServer {
	t.Helper()
	l := testModel(t)
	cfg := Config{Model: l.g, ModelID: testModelID, Parallel: 4, ContextSize: 512}
	if edit != nil {
		edit(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.script = script
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		s.Close()
		hs.Close()
	})
	opts := []option.RequestOption{option.WithBaseURL(hs.URL + "/v1/"), option.WithMaxRetries(0)}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	} else {
		opts = append(opts, option.WithAPIKey("unused"))
	}
	return &testServer{s: s, url: hs.URL, client: openai.NewClient(opts...), tok: cfg.Model.Tokenizer()}
}

// eogBias bans every end-of-generation token, so that greedy runs go on to
// max_tokens.
func eogBias(tok *tokenizer.Tokenizer) map[string]int64 {
	b := make(map[string]int64)
	for id := range int32(tok.NumTokens()) {
		if tok.IsEOG(id) {
			b[itoa(id)] = -100
		}
	}
	return b
}

func itoa(id int32) string {
	b, _ := json.Marshal(id)
	return string(b)
}

// scriptFor returns a script hook: every request emits the tokens of text
// (special-token text parsed), then end, an end-of-generation token.
func scriptFor(tok *tokenizer.Tokenizer, text, end string) func([]int32) []int32 {
	ids := tok.Encode(text, false, true)
	if end != "" {
		id, ok := tok.ID(end)
		if !ok {
			panic("no token " + end)
		}
		ids = append(ids, id)
	}
	return func([]int32) []int32 { return ids }
}

// do sends a request with an optional body and headers and returns the
// status, the headers and the body.
func do(t testing.TB, method, url, body string, header map[string]string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// post sends a raw request and returns the status and decoded JSON body.
func post(t testing.TB, url, path, body string, header map[string]string) (int, map[string]any) {
	t.Helper()
	h := map[string]string{"Content-Type": "application/json"}
	for k, v := range header {
		h[k] = v
	}
	status, _, b := do(t, http.MethodPost, url+path, body, h)
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: status %d, body is not JSON: %q", path, status, b)
	}
	return status, v
}

// get fetches url+path and returns the status and body.
func get(t testing.TB, url, path string) (int, []byte) {
	t.Helper()
	status, _, b := do(t, http.MethodGet, url+path, "", nil)
	return status, b
}

// waitFor polls cond until it holds or a few seconds pass.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// gateStepper is a Stepper that waits for a token on gate before each step.
type gateStepper struct {
	gate chan struct{}
}

func (g *gateStepper) Step(sessions []*model.Session, tokens []int32) ([][]float32, []error) {
	<-g.gate
	return SequentialStepper{}.Step(sessions, tokens)
}

// sseLines reads a raw SSE body into its data payloads.
func sseLines(t testing.TB, body []byte) []string {
	t.Helper()
	var out []string
	for _, ev := range bytes.Split(body, []byte("\n\n")) {
		if len(ev) == 0 {
			continue
		}
		data, ok := bytes.CutPrefix(ev, []byte("data: "))
		if !ok {
			t.Fatalf("SSE event %q does not start with \"data: \"", ev)
		}
		out = append(out, string(data))
	}
	return out
}

var _ = context.Background

// replyScript is scriptFor's script, except for a prompt that ends with a
// forced tool call's opening (tool_choice): that one gets the rest of a
// get_weather call for Paris, which the forced call's grammar lets through.
func replyScript(tok *tokenizer.Tokenizer, text, end string) func([]int32) []int32 {
	const call = "<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>"
	plain, named, any := scriptFor(tok, text, end), scriptFor(tok, call, end), scriptFor(tok, "get_weather"+call, end)
	return func(p []int32) []int32 {
		s, _ := tok.Decode(p, true)
		switch {
		case strings.HasSuffix(s, "<tool_call>get_weather"):
			return named(p)
		case strings.HasSuffix(s, "<tool_call>"):
			return any(p)
		}
		return plain(p)
	}
}
