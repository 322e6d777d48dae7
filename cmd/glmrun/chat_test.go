package main

import (
	"context"
	"strings"
	"testing"

	"github.com/glmrun/glmrun"
)

// runChatInput runs "glmrun chat" in-process with input on stdin.
func runChatInput(t *testing.T, input string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	old := stdin
	stdin = strings.NewReader(input)
	defer func() { stdin = old }()
	return runCLI(t, append([]string{"chat"}, args...)...)
}

// libraryReplies holds the same conversation through the library.
func libraryReplies(t *testing.T, system string, users []string, opts glmrun.ChatOptions) []string {
	t.Helper()
	m, err := glmrun.Load(tokModel, glmrun.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s, err := m.NewSession(glmrun.SessionOptions{ContextSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []glmrun.Message
	if system != "" {
		msgs = append(msgs, glmrun.Message{Role: "system", Content: system})
	}
	var replies []string
	for _, u := range users {
		msgs = append(msgs, glmrun.Message{Role: "user", Content: u})
		var b strings.Builder
		for tok, err := range s.Chat(context.Background(), msgs, opts) {
			if err != nil {
				t.Fatal(err)
			}
			b.WriteString(tok.Text)
		}
		replies = append(replies, b.String())
		msgs = append(msgs, glmrun.Message{Role: "assistant", Content: strings.TrimSpace(b.String())})
	}
	return replies
}

func TestChat(t *testing.T) {
	// The CLI prints the raw bytes (RawBytes), as llama-cli: its replies
	// are the library's with RawBytes, \x86 and all, not U+FFFD.
	opts := glmrun.ChatOptions{GenerateOptions: glmrun.GenerateOptions{MaxTokens: 5, IgnoreEOS: true, RawBytes: true}, NoThinking: true}
	want := libraryReplies(t, "Be brief.", []string{"Hi", "And again?"}, opts)
	flags := []string{"-m", tokModel, "--no-think", "-n", "5", "--ignore-eos", "--temp", "0", "--system", "Be brief."}
	for _, c := range []struct {
		name, input string
	}{
		{"exit", "Hi\n\nAnd again?\n/exit\nnot read\n"},
		{"eof", "Hi\r\nAnd again?"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := runChatInput(t, c.input, flags...)
			if code != 0 || out != want[0]+"\n"+want[1]+"\n" {
				t.Errorf("exit %d, stdout %q, want %q; stderr:\n%s", code, out, want, errs)
			}
			if !strings.Contains(errs, "eval time") || strings.Contains(errs, "not read") {
				t.Errorf("stderr:\n%s", errs)
			}
		})
	}
}

func TestChatThinking(t *testing.T) {
	// With thinking on, a forced </think> (a control token, so printed only
	// once, by chat itself) ends the reasoning. 967 is glm5-mini's </think>.
	code, out, errs := runChatInput(t, "Hi\n", "-m", tokModel, "-n", "3", "--temp", "0", "--logit-bias", "967+1000", "--ignore-eos")
	if code != 0 || out != "</think>\n" {
		t.Errorf("exit %d, stdout %q; stderr:\n%s", code, out, errs)
	}
	// No input, no reply, whatever the model: the bundled one (no -m).
	code, out, errs = runChatInput(t, "", "-n", "3")
	if code != 0 || out != "" {
		t.Errorf("empty input: exit %d, stdout %q; stderr:\n%s", code, out, errs)
	}
}

func TestChatErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown flag", []string{"--bogus"}, 2, "bogus"},
		{"argument", []string{"hello"}, 2, "stdin"},
		{"missing model", []string{"-m", "nope.gguf"}, 1, "nope.gguf"},
		{"context too small", []string{"-c", "4"}, 1, "context size 4"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, errs := runChatInput(t, "Hi\n", c.args...)
			if code != c.code || !strings.Contains(errs, c.want) {
				t.Errorf("exit %d (want %d), stderr:\n%s", code, c.code, errs)
			}
		})
	}
}
