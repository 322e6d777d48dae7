package main

import (
	"bytes"
	"os"
	"runtime"
	"strings"
	"testing"
)

// TestIsTerminal: only a terminal is one. /dev/null is a character device
// but not a terminal, and progress lines that redraw themselves with "\r"
// must not go to it, nor to a pipe or a file.
func TestIsTerminal(t *testing.T) {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	file, err := os.Create(t.TempDir() + "/log")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	for name, x := range map[string]any{"/dev/null": null, "pipe": w, "file": file, "buffer": &bytes.Buffer{}, "nil": nil} {
		if isTerminal(x) {
			t.Errorf("%s: isTerminal true", name)
		}
	}
	// A small model shows no progress unless stderr is a terminal.
	if progressFor(tokModel, null) != nil {
		t.Error("progress for a small model with stderr /dev/null")
	}
	if runtime.GOOS != "linux" {
		return
	}
	// A pseudo-terminal is one (its master answers tcgetattr on Linux),
	// and gets the progress line that redraws itself.
	pty, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer pty.Close()
	if !isTerminal(pty) {
		t.Fatal("/dev/ptmx: isTerminal false")
	}
	if progressFor(tokModel, pty) == nil {
		t.Error("no progress with stderr a terminal")
	}
}

// TestSynthProgress: synth's progress line is for terminals only.
func TestSynthProgress(t *testing.T) {
	path := t.TempDir() + "/tiny.gguf"
	code, out, errs := runCLI(t, "synth", "-o", path, "-layers", "1", "-dense-lead", "1", "-embd", "64", "-vocab", "1100",
		"-heads", "2", "-q-lora", "64", "-kv-lora", "64", "-nope", "32", "-rope", "16", "-v", "32", "-ffn", "64",
		"-tokenizer", tokModel, "-mix", "Q8_0")
	if code != 0 || !strings.Contains(out, "deepseek2 1 blocks") || errs != "" {
		t.Errorf("synth: exit %d, stdout %q, stderr %q (want no progress on a non-terminal)", code, out, errs)
	}
	if code, _, errs := runCLI(t, "synth", "-o", t.TempDir()+"/no/such/dir/x.gguf", "-tokenizer", tokModel); code != 2 || !strings.Contains(errs, "does not exist") {
		t.Errorf("synth -o into a missing directory: exit %d, stderr %q", code, errs)
	}
}
