package glmrun

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/glmrun/glmrun/internal/testmodels"
)

// loadOwn loads a model of the test's own, which it may close (testModel's
// are shared by the whole binary).
func loadOwn(t *testing.T) *Model {
	t.Helper()
	m, err := Load(testmodels.Path(t, mini), Options{ContextSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// closedCalls are the Session methods that need the KV cache, each
// returning its error.
var closedCalls = []struct {
	name string
	call func(s *Session) error
}{
	{"Prompt", func(s *Session) error { return s.Prompt("1 2 3") }},
	{"PromptTokens", func(s *Session) error { return s.PromptTokens(p1[:4]) }},
	{"Append", func(s *Session) error { return s.Append(" 4") }},
	{"AppendTokens", func(s *Session) error { return s.AppendTokens(p1[:2]) }},
	{"Reset", func(s *Session) error { return s.Reset() }},
	{"Generate", func(s *Session) error {
		_, _, _, err := collect(s.Generate(context.Background(), GenerateOptions{MaxTokens: 4}))
		return err
	}},
	{"Chat", func(s *Session) error {
		_, _, _, err := collect(s.Chat(context.Background(), []Message{{Role: "user", Content: "Hi"}},
			ChatOptions{GenerateOptions: GenerateOptions{MaxTokens: 4}}))
		return err
	}},
}

// checkClosed runs every method on s and wants ErrClosed from those that
// need the cache and no panic from the others.
func checkClosed(t *testing.T, s *Session, want string) {
	t.Helper()
	for _, c := range closedCalls {
		if err := c.call(s); !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want ErrClosed (%q)", c.name, err, want)
		}
	}
	if n := s.Cached(); n != 0 {
		t.Errorf("Cached = %d after close", n)
	}
	if s.ContextSize() != 64 {
		t.Errorf("ContextSize = %d after close, want the size it had", s.ContextSize())
	}
	_ = s.Tokens()
	_ = s.Stats()
	if err := s.Close(); err != nil {
		t.Errorf("second Session.Close: %v", err)
	}
}

// TestSessionClosed: every method of a closed Session returns an error
// wrapping ErrClosed, none panics, and Close is idempotent.
func TestSessionClosed(t *testing.T) {
	m := testModel(t, mini)
	s := newSession(t, m, 64)
	if err := s.PromptTokens(p1); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := collect(s.Generate(context.Background(), GenerateOptions{MaxTokens: 2})); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkClosed(t, s, "session is closed")
}

// TestModelClosed: after Model.Close its Sessions and NewSession fail with
// ErrClosed instead of reading the unmapped file, and closing the sessions
// and the model again does nothing.
func TestModelClosed(t *testing.T) {
	m := loadOwn(t)
	s, err := m.NewSession(SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PromptTokens(p1); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	checkClosed(t, s, "model is closed")
	if _, err := m.NewSession(SessionOptions{}); !errors.Is(err, ErrClosed) {
		t.Errorf("NewSession after Model.Close: %v, want ErrClosed", err)
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Model.Close: %v", err)
	}
	// What needs no weights still works.
	if ids := m.Tokenize("1 2"); len(ids) == 0 {
		t.Error("Tokenize after Close gave nothing")
	}
	if m.Config().Layers == 0 {
		t.Error("Config after Close is empty")
	}
}

// TestCloseRacesGenerate closes the Model (and, in the other case, one
// Session) while generations run in other goroutines: each ends with
// ErrClosed or a normal stop, never a crash, and Close returns only after
// the steps in flight. Run under -race in CI.
func TestCloseRacesGenerate(t *testing.T) {
	for _, closeModel := range []bool{true, false} {
		name := "Session.Close"
		if closeModel {
			name = "Model.Close"
		}
		t.Run(name, func(t *testing.T) {
			m := loadOwn(t)
			const n = 3
			var sessions []*Session
			for range n {
				s, err := m.NewSession(SessionOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if err := s.PromptTokens(p1[:4]); err != nil {
					t.Fatal(err)
				}
				sessions = append(sessions, s)
			}
			started := make(chan struct{}, n)
			release := make(chan struct{}) // closed just before the Close
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i, s := range sessions {
				wg.Add(1)
				go func() {
					defer wg.Done()
					first := true
					for _, err := range s.Generate(context.Background(), GenerateOptions{IgnoreEOS: true}) {
						if first {
							started <- struct{}{}
							<-release
							first = false
						}
						if err != nil {
							errs[i] = err
						}
					}
				}()
			}
			for range n {
				<-started
			}
			close(release)
			if closeModel {
				if err := m.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				for _, s := range sessions {
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
				}
			}
			wg.Wait()
			closed := 0
			for i, err := range errs {
				if errors.Is(err, ErrClosed) {
					closed++
				}
				// A generation may also have filled its context first.
				if err != nil && !errors.Is(err, ErrClosed) {
					t.Errorf("session %d: %v, want ErrClosed", i, err)
				}
				if err == nil && sessions[i].Stats().Stop != StopContext {
					t.Errorf("session %d ended with %q and no error", i, sessions[i].Stats().Stop)
				}
			}
			if closed == 0 {
				t.Error("every generation ended before the Close: the test raced nothing")
			}
		})
	}
}

// TestCloseInLoop: closing the session from the loop body ends the
// generation with ErrClosed at the next step.
func TestCloseInLoop(t *testing.T) {
	m := testModel(t, mini)
	s := newSession(t, m, 64)
	if err := s.PromptTokens(p1[:4]); err != nil {
		t.Fatal(err)
	}
	n := 0
	var last error
	for _, err := range s.Generate(context.Background(), GenerateOptions{IgnoreEOS: true}) {
		if err != nil {
			last = err
			break
		}
		if n++; n == 2 {
			s.Close()
		}
	}
	if n != 2 || !errors.Is(last, ErrClosed) {
		t.Errorf("%d tokens, error %v; want 2 and ErrClosed", n, last)
	}
}

// TestTextValidUTF8 forces byte-level tokens that cannot form characters
// (a lone lead byte 0xC3 again and again, lone continuation bytes): every
// Token.Text is valid UTF-8, each bad byte one U+FFFD, while
// RawBytes gives the bytes themselves, as Detokenize does.
func TestTextValidUTF8(t *testing.T) {
	m := testModel(t, mini)
	tok := m.Tokenizer()
	byteToken := func(b string) int32 {
		for id := range int32(tok.NumTokens()) {
			if tok.Piece(id, false) == b {
				return id
			}
		}
		t.Fatalf("no token for %q", b)
		return -1
	}
	for _, c := range []struct {
		name   string
		pieces []string // forced, equally likely: greedy takes the first best
	}{
		{"lone lead bytes", []string{"\xc3"}},
		{"lone continuation bytes", []string{"\xa9"}},
		{"an invalid byte", []string{"\xff"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			bias := map[int32]float32{}
			for _, p := range c.pieces {
				bias[byteToken(p)] = 1000
			}
			for _, raw := range []bool{false, true} {
				s := newSession(t, m, 64)
				defer s.Close()
				if err := s.PromptTokens(p1[:4]); err != nil {
					t.Fatal(err)
				}
				opts := GenerateOptions{MaxTokens: 6, RawBytes: raw}
				opts.LogitBias = bias
				var texts []string
				var ids []int32
				for tk, err := range s.Generate(context.Background(), opts) {
					if err != nil {
						t.Fatal(err)
					}
					texts = append(texts, tk.Text)
					ids = append(ids, tk.ID)
				}
				got := strings.Join(texts, "")
				want, err := m.Detokenize(ids)
				if err != nil {
					t.Fatal(err)
				}
				if raw {
					if got != want {
						t.Errorf("RawBytes: %q, want the bytes %q", got, want)
					}
					continue
				}
				for i, x := range texts {
					if !utf8.ValidString(x) {
						t.Errorf("Token %d Text %q is not valid UTF-8", i, x)
					}
				}
				if want := string([]rune(want)); got != want {
					t.Errorf("texts %q, want %q: each invalid byte one U+FFFD", got, want)
				}
				if !strings.Contains(got, "\uFFFD") {
					t.Errorf("texts %q have no U+FFFD: the test forced no invalid byte", got)
				}
			}
		})
	}
}
