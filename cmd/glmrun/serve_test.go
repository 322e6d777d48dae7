package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/internal/testmodels"
)

// syncBuffer is a bytes.Buffer safe for the server goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestServeFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"port", []string{"--port", "70000"}, 2, "not a TCP port"},
		{"parallel", []string{"--parallel", "0"}, 2, "--parallel 0"},
		{"ctx", []string{"--ctx-size", "-1"}, 2, "--ctx-size -1 is negative"},
		{"ctx short", []string{"-c", "-2"}, 2, "--ctx-size -2 is negative"},
		{"queue", []string{"--queue", "0"}, 2, "--queue 0"},
		{"args", []string{"extra"}, 2, "unexpected arguments"},
		{"unknown flag", []string{"--nope"}, 2, "nope"},
		{"backend", []string{"--port", "0", "--backend", "tpu"}, 2, `--backend "tpu": want cpu or cuda`},
		{"missing model", []string{"-m", "/nonexistent.gguf"}, 1, "nonexistent.gguf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(append([]string{"serve"}, tc.args...), &stdout, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d mentioning %q", code, stderr.String(), tc.code, tc.want)
			}
		})
	}
}

// TestServeGraceful runs the server on the bundled model, checks the API
// key and a chat request, then stops it (as SIGTERM does) while a stream
// is running: the stream finishes and serve returns nil (exit 0).
func TestServeGraceful(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	addrc := make(chan string, 1)
	errc := make(chan error, 1)
	var stderr syncBuffer
	go func() {
		errc <- serve(ctx, []string{"--port", "0", "--ctx-size", "256", "--parallel", "2", "--api-key", "k3y", "--alias", "mini"},
			&stderr, func(addr string) { addrc <- addr })
	}()
	var base string
	select {
	case addr := <-addrc:
		base = "http://" + addr
	case err := <-errc:
		t.Fatalf("serve: %v (%s)", err, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start")
	}
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Fatalf("listening on %s, want loopback", base)
	}

	do := func(body string, key string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := do(`{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}`, "")
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no key: %d", resp.StatusCode)
	}
	resp = do(`{"model": "mini", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}`, "k3y")
	var c struct {
		Model string `json:"model"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.StatusCode != 200 || c.Model != "mini" || c.Usage.CompletionTokens == 0 {
		t.Fatalf("chat: %d %v %+v", resp.StatusCode, err, c)
	}
	resp.Body.Close()

	// A stream in flight when the signal comes finishes: the bundled
	// model's end-of-generation tokens are banned, so it runs to
	// max_tokens.
	var bias []string
	for _, id := range bundledTokenizer(t).EOGs() {
		bias = append(bias, fmt.Sprintf(`"%d": -100`, id))
	}
	resp = do(`{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 40, "stream": true,
		"logit_bias": {`+strings.Join(bias, ", ")+`}}`, "k3y")
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	stop()
	rest, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("reading the stream after shutdown began: %v", err)
	}
	if !strings.Contains(string(rest), `"finish_reason":"length"`) || !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Fatalf("the stream did not finish: ...%s", rest[max(0, len(rest)-300):])
	}
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("serve returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not return after shutdown")
	}
	if !strings.Contains(stderr.String(), "shutting down") {
		t.Fatalf("stderr: %s", stderr.String())
	}
}

// TestServeChatTemplate: serve loads through glmrun.Load and keeps its
// messages about the file's chat template: one that does not parse is an
// error naming the file and the key (exit 1, nothing listens), and a file
// without one is served with the built-in GLM-5 format after a warning.
func TestServeChatTemplate(t *testing.T) {
	f, err := gguf.Open(testmodels.Path(t, "glm5-mini.Q8_0"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	write := func(name string, edit func(w *gguf.Writer)) string {
		w := gguf.NewWriterFrom(f)
		edit(w)
		path := filepath.Join(dir, name)
		if err := w.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		return path
	}
	bad := write("bad-template.gguf", func(w *gguf.Writer) {
		w.SetKV("tokenizer.chat_template", gguf.String("{% if %}"))
	})
	none := write("no-template.gguf", func(w *gguf.Writer) { w.RemoveKV("tokenizer.chat_template") })

	// serve stops as soon as it listens, should it start at all.
	run := func(path string) (string, bool, error) {
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		var out syncBuffer
		listened := false
		err := serve(ctx, []string{"-m", path, "--port", "0", "--ctx-size", "64", "--parallel", "1"}, &out,
			func(string) { listened = true; stop() })
		return out.String(), listened, err
	}
	out, listened, err := run(bad)
	if err == nil || listened || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "tokenizer.chat_template") {
		t.Errorf("bad template: listened %v, error %v; want an error naming the file and tokenizer.chat_template (stderr %q)", listened, err, out)
	}
	out, listened, err = run(none)
	if err != nil || !listened {
		t.Fatalf("no template: listened %v, serve: %v (%s)", listened, err, out)
	}
	if want := none + " has no chat template; using the built-in GLM-5 format"; !strings.Contains(out, want) {
		t.Errorf("no template: stderr %q does not say %q", out, want)
	}
}
