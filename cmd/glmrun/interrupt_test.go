package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestMain runs the CLI itself when the test re-executes its own binary
// (GLMRUN_TEST_MAIN=1), so that a test can send it real signals.
func TestMain(m *testing.M) {
	if os.Getenv("GLMRUN_TEST_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestWatchInterrupts: the first signal cancels the context (an
// interrupt, for interrupted), the second exits with 130; after stop,
// neither happens, and a context canceled by stop is no interrupt.
func TestWatchInterrupts(t *testing.T) {
	exits := make(chan int, 2)
	exit := func(code int) { exits <- code }
	canceled := fmt.Errorf("glmrun: generation stopped: %w", context.Canceled)

	sigs := make(chan os.Signal, 2)
	ctx, stop := watchInterrupts(context.Background(), sigs, exit)
	sigs <- os.Interrupt
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the first interrupt did not cancel the context")
	}
	if !interrupted(ctx, canceled) || interrupted(ctx, errors.New("other")) || interrupted(ctx, nil) {
		t.Error("interrupted: want true for the context's cancellation only")
	}
	select {
	case code := <-exits:
		t.Fatalf("exit(%d) after one interrupt", code)
	case <-time.After(50 * time.Millisecond):
	}
	sigs <- os.Interrupt
	select {
	case code := <-exits:
		if code != 130 {
			t.Errorf("second interrupt: exit(%d), want 130", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second interrupt did not exit")
	}
	stop()
	stop() // twice is fine

	sigs = make(chan os.Signal, 2)
	ctx, stop = watchInterrupts(context.Background(), sigs, exit)
	stop()
	sigs <- os.Interrupt
	sigs <- os.Interrupt
	time.Sleep(50 * time.Millisecond)
	if len(exits) != 0 {
		t.Error("exit after stop")
	}
	if ctx.Err() == nil || interrupted(ctx, canceled) {
		t.Errorf("after stop: ctx.Err %v, interrupted %v; want canceled, not interrupted", ctx.Err(), interrupted(ctx, canceled))
	}
}

// fakeInterrupts replaces signal delivery for the test; send delivers an
// interrupt to the channel of the latest interruptible.
func fakeInterrupts(t *testing.T) (send func()) {
	t.Helper()
	var mu sync.Mutex
	var cur chan<- os.Signal
	oldNotify, oldStop, oldExit := notifyInterrupt, stopInterrupt, exitProcess
	notifyInterrupt = func(c chan<- os.Signal) { mu.Lock(); cur = c; mu.Unlock() }
	stopInterrupt = func(c chan<- os.Signal) {}
	exitProcess = func(code int) { t.Errorf("exit(%d)", code) }
	t.Cleanup(func() { notifyInterrupt, stopInterrupt, exitProcess = oldNotify, oldStop, oldExit })
	return func() {
		mu.Lock()
		defer mu.Unlock()
		select {
		case cur <- os.Interrupt:
		default:
		}
	}
}

// onFirstWrite is a writer that calls f at its first write, then collects.
type onFirstWrite struct {
	once sync.Once
	f    func()
	bytes.Buffer
}

func (w *onFirstWrite) Write(p []byte) (int, error) {
	w.once.Do(w.f)
	return w.Buffer.Write(p)
}

// TestGenerateInterrupt: Ctrl-C once the text has started stops the
// generation: no error line, the timings with "stopped: interrupted",
// exit status 0. Without it the same run goes on to the context's end.
func TestGenerateInterrupt(t *testing.T) {
	send := fakeInterrupts(t)
	out := &onFirstWrite{f: send}
	var errb bytes.Buffer
	args := []string{"-p", "1 2 3", "-n", "-1", "--ignore-eos", "--no-display-prompt", "--seed", "1", "-c", "4096"}
	code := run(args, out, &errb)
	errs := errb.String()
	if code != 0 || out.Len() == 0 {
		t.Errorf("exit %d, stdout %q; want 0 and some text", code, out.String())
	}
	if !strings.Contains(errs, "eval time") || !strings.Contains(errs, "stopped: interrupted after") ||
		strings.Contains(errs, "context canceled") || strings.Contains(errs, "glmrun generate:") {
		t.Errorf("stderr:\n%s\nwant the timings, \"stopped: interrupted\" and no error", errs)
	}
}

// TestChatInterrupt: Ctrl-C stops the reply, not the chat: the next line
// gets its reply, and the chat ends normally.
func TestChatInterrupt(t *testing.T) {
	send := fakeInterrupts(t)
	old := stdin
	stdin = strings.NewReader("Hi\nAgain\n")
	defer func() { stdin = old }()
	out := &onFirstWrite{f: send}
	var errb bytes.Buffer
	code := run([]string{"chat", "--no-think", "-n", "200", "--ignore-eos", "--temp", "0"}, out, &errb)
	errs := errb.String()
	if code != 0 || strings.Count(errs, "reply interrupted") != 1 || !strings.Contains(errs, "eval time") {
		t.Errorf("exit %d, stderr:\n%s\nwant 0, one interrupted reply and the timings", code, errs)
	}
	// The second reply ran to -n: 200 tokens of the first one's text at
	// most were cut, so there are two reply lines.
	if lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"); len(lines) < 2 {
		t.Errorf("stdout %q: want two replies", out.String())
	}
}

// TestGenerateSIGINT sends a real SIGINT to a glmrun process generating
// without limit: it stops, prints the timings and exits 0.
func TestGenerateSIGINT(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no SIGINT to send")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-p", "1 2 3", "-n", "-1", "--ignore-eos", "--no-display-prompt", "--seed", "1", "-c", "4096")
	cmd.Env = append(os.Environ(), "GLMRUN_TEST_MAIN=1")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The first byte of text: generation is running.
	br := bufio.NewReader(stdout)
	if _, err := br.ReadByte(); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("no output: %v; stderr:\n%s", err, errb.String())
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	// Read the rest (so that it never blocks on stdout) until it exits.
	drained := make(chan struct{})
	go func() { io.Copy(io.Discard, br); close(drained) }()
	select {
	case <-drained:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-drained
		cmd.Wait()
		t.Fatalf("still running a minute after SIGINT; stderr:\n%s", errb.String())
	}
	err = cmd.Wait()
	errs := errb.String()
	if err != nil || !strings.Contains(errs, "stopped: interrupted after") || strings.Contains(errs, "context canceled") {
		t.Errorf("wait: %v (want exit 0), stderr:\n%s", err, errs)
	}
}
