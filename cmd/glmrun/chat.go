package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/glmrun/glmrun"
)

// stdin is where chat reads the user's lines (a variable for tests).
var stdin io.Reader = os.Stdin

const chatUsage = `usage: glmrun chat [-m MODEL.gguf] [--system TEXT] [--no-think] [flags]

Chats with the model: reads a line from standard input, renders the
conversation with the model's chat template (the built-in GLM-5 one if the
file has none), streams the reply to stdout and waits for the next line.
/exit or the end of input ends the chat (standard input need not be a
terminal: "echo Hi | glmrun chat" works). Each turn reuses the KV cache of
the previous ones. Without -m, the bundled tiny random-weights model is used.
-n limits each reply; timings go to stderr at the end. Ctrl-C stops the
reply being written, not the chat.

flags:
`

// runChat is an interactive chat on stdin/stdout.
func runChat(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("chat", stderr)
	g := &genFlags{}
	g.register(fs)
	system := fs.String("system", "", "system prompt `TEXT`")
	fs.StringVar(system, "sys", "", "same as --system `TEXT`")
	noThink := fs.Bool("no-think", false, "answer without thinking (the template's enable_thinking = false)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), chatUsage)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q (chat reads its input from stdin)", errUsage, fs.Arg(0))
	}
	warnings, err := g.check()
	if err != nil {
		return err
	}
	printWarnings(stderr, "chat", warnings)
	gen, err := g.options(stderr)
	if err != nil {
		return err
	}
	gen.RawBytes = true // chat prints only text, whatever --logprobs says
	opts := glmrun.ChatOptions{GenerateOptions: gen, NoThinking: *noThink}
	m, s, err := g.load(stderr, "chat")
	if err != nil {
		return err
	}
	defer m.Close()
	var msgs []glmrun.Message
	if *system != "" {
		msgs = append(msgs, glmrun.Message{Role: "system", Content: *system})
	}
	endThink, hasEndThink := m.Tokenizer().ID("</think>")

	sc := bufio.NewScanner(stdin)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	tty := isTerminal(stdin)
	out := newFlushWriter(stdout)
	var total glmrun.Stats
	start := time.Now()
	for {
		if tty {
			out.WriteString("> ")
			out.Flush()
		}
		if !sc.Scan() {
			break
		}
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(line) == "/exit" {
			break
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		msgs = append(msgs, glmrun.Message{Role: "user", Content: line})
		// Ctrl-C stops the reply, not the chat (a second one ends it, with
		// status 130); at the "> " prompt it ends glmrun, as usual.
		ctx, stop := interruptible(context.Background())
		var reply, reasoning strings.Builder
		thinking := !*noThink && hasEndThink
		var genErr error
		for t, err := range s.Chat(ctx, msgs, opts) {
			if err != nil {
				genErr = err
				break
			}
			switch {
			case thinking && t.ID == endThink:
				// Shown even when </think> is a control token.
				thinking = false
				out.WriteString("</think>")
			case thinking:
				reasoning.WriteString(t.Text)
				out.WriteString(t.Text)
			default:
				reply.WriteString(t.Text)
				out.WriteString(t.Text)
			}
			if err := out.Flush(); err != nil {
				stop()
				return err
			}
		}
		stop()
		out.WriteString("\n")
		if err := out.Flush(); err != nil {
			return err
		}
		st := s.Stats()
		total.PromptTokens += st.PromptTokens
		total.PromptTime += st.PromptTime
		total.Generated += st.Generated
		total.EvalTokens += st.EvalTokens
		total.EvalTime += st.EvalTime
		total.Stop = st.Stop
		if genErr != nil {
			if interrupted(ctx, genErr) {
				fmt.Fprintln(stderr, "glmrun: reply interrupted")
			} else {
				printTimings(stderr, m, total, time.Since(start))
				return genErr
			}
		}
		msgs = append(msgs, glmrun.Message{
			Role:             "assistant",
			Content:          strings.TrimSpace(reply.String()),
			ReasoningContent: strings.TrimSpace(reasoning.String()),
		})
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading standard input: %w", err)
	}
	total.Stop = glmrun.StopNone
	printTimings(stderr, m, total, time.Since(start))
	return nil
}
