package server

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/glmrun/glmrun/model"
)

// fullStepper fails every decode step with the error of a session whose
// context is full: it decodes each token into a one-position session that
// holds a token already.
type fullStepper struct {
	m    *model.Model
	once sync.Once
	full *model.Session
	err  error
}

func (f *fullStepper) Step(sessions []*model.Session, tokens []int32) ([][]float32, []error) {
	f.once.Do(func() {
		if f.full, f.err = f.m.NewSession(model.SessionOptions{ContextSize: 1}); f.err == nil {
			_, f.err = f.full.Decode(1)
		}
	})
	errs := make([]error, len(sessions))
	for i, tok := range tokens {
		errs[i] = f.err
		if errs[i] == nil {
			_, errs[i] = f.full.Decode(tok)
		}
	}
	return make([][]float32, len(sessions)), errs
}

// TestContextFullError: a sequence whose cache has no room left ends its
// request with a 400 context_length_exceeded error (an event in a stream).
func TestContextFullError(t *testing.T) {
	st := &fullStepper{m: testModel(t).m}
	t.Cleanup(func() { // after the server's cleanup has stopped the scheduler
		if st.full != nil {
			st.full.Close()
		}
	})
	ts := newTestServer(t, func(c *Config) { c.Stepper = st }, nil)
	const body = `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "temperature": 0`
	status, b := post(t, ts.url, "/v1/chat/completions", body+`}`, nil)
	if status != http.StatusBadRequest {
		t.Fatalf("status %d, want 400: %v", status, b)
	}
	checkErrorBody(t, b, "", "context_length_exceeded")
	if msg := b["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "context is full") {
		t.Errorf("message %q does not say the context is full", msg)
	}

	resp, err := http.Post(ts.url+"/v1/chat/completions", "application/json", strings.NewReader(body+`, "stream": true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	lines := sseLines(t, raw)
	if len(lines) == 0 || !strings.Contains(lines[len(lines)-1], `"code":"context_length_exceeded"`) {
		t.Errorf("stream %q does not end with a context_length_exceeded error", lines)
	}
}

// TestDefaultContext: without a context size each slot gets the model's
// training context capped at DefaultContextSize.
func TestDefaultContext(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.ContextSize = 0; c.Parallel = 1 }, nil)
	want := min(testModel(t).m.Config().ContextLength, DefaultContextSize)
	if got := ts.s.ContextSize(); got != want {
		t.Errorf("ContextSize %d, want %d", got, want)
	}
}
