package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/glmrun/glmrun/tensor"
)

// withCPUs makes checkThreads see n CPUs for the test.
func withCPUs(t *testing.T, n int) {
	t.Helper()
	old := numCPU
	numCPU = func() int { return n }
	t.Cleanup(func() { numCPU = old })
}

// checkCase is one row of the flag-check tables: the arguments, and the
// error (a usage error containing errText) or, with errText "", the
// warning (containing warnText; "" means none).
type checkCase struct {
	args              []string
	errText, warnText string
}

// wantCheck compares what a check returned with c.
func wantCheck(t *testing.T, c checkCase, warnings []string, err error) {
	t.Helper()
	switch {
	case c.errText != "":
		if err == nil || !errors.Is(err, errUsage) || !strings.Contains(err.Error(), c.errText) {
			t.Errorf("%q: error %v, want a usage error with %q", c.args, err, c.errText)
		}
	case err != nil:
		t.Errorf("%q: unexpected error %v", c.args, err)
	case c.warnText == "" && len(warnings) > 0:
		t.Errorf("%q: unexpected warnings %q", c.args, warnings)
	case c.warnText != "" && (len(warnings) != 1 || !strings.Contains(warnings[0], c.warnText)):
		t.Errorf("%q: warnings %q, want one with %q", c.args, warnings, c.warnText)
	}
}

// TestGenFlagsCheck: the ranges of generate's and chat's flags, at and
// beyond each boundary.
func TestGenFlagsCheck(t *testing.T) {
	withCPUs(t, 4)
	for _, c := range []checkCase{
		{nil, "", ""}, // the defaults
		{[]string{"--temp", "0"}, "", ""},
		{[]string{"--temp", "5"}, "", ""},
		{[]string{"--temp", "-0.1"}, "--temp -0.1: want a number >= 0", ""},
		{[]string{"--temp", "NaN"}, "--temp NaN", ""},
		{[]string{"--temp", "+Inf"}, "--temp +Inf", ""},
		{[]string{"--temp", "1e39"}, "--temp 1e+39", ""}, // Inf as a float32
		{[]string{"--top-k", "0"}, "", ""},
		{[]string{"--top-k", "-1"}, "", ""},
		{[]string{"--top-k", "-2"}, "--top-k -2: want >= 0 (0 or -1: off)", ""},
		{[]string{"--top-p", "1"}, "", ""},
		{[]string{"--top-p", "0.01"}, "", ""},
		{[]string{"--top-p", "2"}, "--top-p 2: want 0 < P <= 1", ""},
		{[]string{"--top-p", "0"}, "--top-p 0", ""},
		{[]string{"--top-p", "1e-50"}, "--top-p 1e-50", ""}, // 0 as a float32
		{[]string{"--top-p", "nan"}, "--top-p NaN", ""},
		{[]string{"--min-p", "0"}, "", ""},
		{[]string{"--min-p", "1"}, "", ""},
		{[]string{"--min-p", "-1"}, "--min-p -1: want 0 <= P <= 1", ""},
		{[]string{"--min-p", "1.5"}, "--min-p 1.5", ""},
		{[]string{"--repeat-penalty", "1"}, "", ""},
		{[]string{"--repeat-penalty", "0.5"}, "", ""},
		{[]string{"--repeat-penalty", "0"}, "--repeat-penalty 0: want a number > 0 (1: off)", ""},
		{[]string{"--repeat-penalty", "-1"}, "--repeat-penalty -1", ""},
		{[]string{"--repeat-penalty", "inf"}, "--repeat-penalty +Inf", ""},
		{[]string{"--presence-penalty", "-2"}, "", ""},
		{[]string{"--presence-penalty", "2"}, "", ""},
		{[]string{"--presence-penalty", "-2.5"}, "--presence-penalty -2.5: want -2 <= X <= 2", ""},
		{[]string{"--frequency-penalty", "-0.5"}, "", ""},
		{[]string{"--frequency-penalty", "3"}, "--frequency-penalty 3", ""},
		{[]string{"--repeat-last-n", "-1"}, "", ""},
		{[]string{"--repeat-last-n", "0"}, "", ""},
		{[]string{"--repeat-last-n", "-2"}, "--repeat-last-n -2", ""},
		{[]string{"-n", "-1"}, "", ""},
		{[]string{"-n", "0"}, "", ""},
		{[]string{"-n", "-2"}, "-n -2: want >= 0, or -1 for no limit", ""},
		{[]string{"--seed", "0"}, "", ""},
		{[]string{"--seed", "-1"}, "", ""},
		{[]string{"-s", "-7"}, "--seed -7", ""},
		{[]string{"-c", "0"}, "", ""},
		{[]string{"-c", "100000"}, "", ""}, // the model's limit is checked at load
		{[]string{"-c", "-1"}, "-c (--ctx-size) -1", ""},
		{[]string{"-t", "0"}, "", ""},
		{[]string{"-t", "4"}, "", ""},
		{[]string{"-t", "-1"}, "-t (--threads) -1: want >= 1, or 0", ""},
		{[]string{"--threads", "5000"}, "-t (--threads) 5000: want at most 4096", ""},
		{[]string{"-t", "1000"}, "", "1000 worker threads for the 4 CPUs"},
		{[]string{"-t", "5"}, "", "5 worker threads for the 4 CPUs"},
		{[]string{"-t", "2", "--tp", "2"}, "", ""},
		{[]string{"-t", "2", "--tp", "3"}, "", "2 × 3 devices worker threads for the 4 CPUs"},
		{[]string{"--tp", "0"}, "--tp 0: want >= 1", ""},
		{[]string{"--backend", "cuda"}, "", ""},
		{[]string{"--backend", "tpu"}, `--backend "tpu": want cpu or cuda`, ""},
		{[]string{"--logprobs", "3"}, "", ""},
		{[]string{"--logprobs", "-1"}, "--logprobs -1", ""},
		{[]string{"--stop", "x", "--stop", ""}, `--stop ""`, ""},
		{[]string{"--logit-bias", "1-inf", "--logit-bias", "2+1.5"}, "", ""},
		{[]string{"--logit-bias", "1+inf"}, `--logit-bias "1+inf": +inf is not a bias`, ""},
		{[]string{"--logit-bias", "12"}, `--logit-bias "12"`, ""},
	} {
		fs, g, _, _, _ := newGenerateFlags(io.Discard)
		if err := fs.Parse(c.args); err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		warnings, err := g.check()
		wantCheck(t, c, warnings, err)
	}
}

// TestForwardFlagsCheck: logits' and dump's flags.
func TestForwardFlagsCheck(t *testing.T) {
	withCPUs(t, 4)
	for _, c := range []checkCase{
		{[]string{"-m", "x.gguf", "--tokens", "1,2"}, "", ""},
		{[]string{"-m", "x.gguf", "--text", "hi", "--threads", "8"}, "", "8 worker threads for the 4 CPUs"},
		{[]string{"--tokens", "1"}, "-m MODEL.gguf is required", ""},
		{[]string{"-m", "x.gguf"}, "--tokens: no token ids", ""},
		{[]string{"-m", "x.gguf", "--tokens", "1,-2"}, `--tokens: bad token id "-2"`, ""},
		{[]string{"-m", "x.gguf", "--tokens", "1", "--text", "a"}, "not both", ""},
		{[]string{"-m", "x.gguf", "--tokens", "1", "--threads", "-3"}, "--threads -3", ""},
		{[]string{"-m", "x.gguf", "--tokens", "1", "--tp", "0"}, "--tp 0", ""},
		{[]string{"-m", "x.gguf", "--tokens", "1", "--backend", "tpu"}, `--backend "tpu"`, ""},
		{[]string{"-m", "x.gguf", "--tokens", "1", "stray"}, `unexpected argument "stray"`, ""},
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		var ff forwardFlags
		ff.register(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		warnings, err := ff.check(fs)
		wantCheck(t, c, warnings, err)
	}
}

// TestServeFlagsCheck: serve's flags.
func TestServeFlagsCheck(t *testing.T) {
	withCPUs(t, 4)
	ok := serveFlags{host: "127.0.0.1", backend: "cpu", port: 8080, parallel: 4, queue: 16, tp: 1, maxBody: 1 << 20, shutdownTimeout: time.Second}
	for _, c := range []struct {
		name              string
		edit              func(*serveFlags)
		errText, warnText string
	}{
		{"defaults", func(*serveFlags) {}, "", ""},
		{"any port", func(f *serveFlags) { f.port = 0 }, "", ""},
		{"host name", func(f *serveFlags) { f.host = "localhost" }, "", ""},
		{"ipv6", func(f *serveFlags) { f.host = "::1" }, "", ""},
		{"bad host", func(f *serveFlags) { f.host = "local host" }, `--host "local host"`, ""},
		{"host with port", func(f *serveFlags) { f.host = "127.0.0.1:80" }, `--host "127.0.0.1:80"`, ""},
		{"empty host", func(f *serveFlags) { f.host = "" }, `--host ""`, ""},
		{"port", func(f *serveFlags) { f.port = 65536 }, "--port 65536 is not a TCP port", ""},
		{"parallel", func(f *serveFlags) { f.parallel = 0 }, "--parallel 0", ""},
		{"ctx", func(f *serveFlags) { f.ctxSize = -1 }, "--ctx-size -1 is negative", ""},
		{"queue", func(f *serveFlags) { f.queue = 0 }, "--queue 0", ""},
		{"max body", func(f *serveFlags) { f.maxBody = 0 }, "--max-body 0", ""},
		{"tp", func(f *serveFlags) { f.tp = 0 }, "--tp 0", ""},
		{"shutdown", func(f *serveFlags) { f.shutdownTimeout = -time.Second }, "--shutdown-timeout -1s is negative", ""},
		{"threads", func(f *serveFlags) { f.threads = -1 }, "-t (--threads) -1", ""},
		{"many threads", func(f *serveFlags) { f.threads = 6 }, "", "6 worker threads for the 4 CPUs"},
		{"backend", func(f *serveFlags) { f.backend = "tpu" }, `--backend "tpu"`, ""},
	} {
		f := ok
		c.edit(&f)
		warnings, err := f.check()
		wantCheck(t, checkCase{[]string{c.name}, c.errText, c.warnText}, warnings, err)
	}
}

// TestBenchFlagsCheck: bench's flags.
func TestBenchFlagsCheck(t *testing.T) {
	withCPUs(t, 4)
	for _, c := range []struct {
		f                 benchFlags
		errText, warnText string
	}{
		{benchFlags{nPrompt: 512, nGen: 128, reps: 3, tp: 1, backend: "cpu"}, "", ""},
		{benchFlags{nPrompt: 0, nGen: 128, reps: 1, tp: 1, backend: "cpu"}, "", ""},
		{benchFlags{nPrompt: 0, nGen: 0, reps: 1, tp: 1, backend: "cpu"}, "-p 0 -n 0: want >= 0, not both 0", ""},
		{benchFlags{nPrompt: -1, nGen: 8, reps: 1, tp: 1, backend: "cpu"}, "-p -1 -n 8", ""},
		{benchFlags{nPrompt: 1 << 62, nGen: 1 << 62, reps: 1, tp: 1, backend: "cpu"}, "want at most 2147483647 each", ""},
		{benchFlags{nPrompt: 8, reps: 0, tp: 1, backend: "cpu"}, "-r 0", ""},
		{benchFlags{nPrompt: 8, depths: []int{0, 8192}, reps: 1, tp: 1, backend: "cpu"}, "", ""},
		{benchFlags{nPrompt: 8, reps: 1, tp: 0, backend: "cpu"}, "--tp 0", ""},
		{benchFlags{nPrompt: 8, reps: 1, tp: 1, threads: -2, backend: "cpu"}, "-t -2", ""},
		{benchFlags{nPrompt: 8, reps: 1, tp: 2, threads: 4, backend: "cpu"}, "", "4 × 2 devices worker threads"},
		{benchFlags{nPrompt: 8, reps: 1, tp: 1, backend: "gpu"}, `--backend "gpu"`, ""},
	} {
		warnings, err := c.f.check()
		wantCheck(t, checkCase{[]string{fmt.Sprintf("%+v", c.f)}, c.errText, c.warnText}, warnings, err)
	}
}

// countOf counts the occurrences of sub in s, case-insensitively.
func countOf(s, sub string) int { return strings.Count(strings.ToLower(s), strings.ToLower(sub)) }

// TestFlagsCheckedBeforeLoad: a bad value is a usage error (exit 2) before
// anything is loaded or printed, in every command that takes the flag: the
// model file does not exist, and the error is about the flag, not the file;
// stdout is empty (no prompt); the message and the usage line appear once.
func TestFlagsCheckedBeforeLoad(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.gguf")
	gen := []string{"-m", missing, "-p", "Hello"}
	fwd := []string{"-m", missing, "--tokens", "1,2"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(gen, "--top-p", "2"), "--top-p 2"},
		{append(gen, "--repeat-penalty", "-1"), "--repeat-penalty -1"},
		{append(gen, "--top-k", "-5"), "--top-k -5"},
		{append(gen, "--min-p", "-1"), "--min-p -1"},
		{append(gen, "--temp", "-1"), "--temp -1"},
		{append(gen, "--presence-penalty", "9"), "--presence-penalty 9"},
		{append(gen, "-t", "99999"), "-t (--threads) 99999"},
		{append(gen, "--backend", "tpu"), `--backend "tpu"`},
		{append([]string{"generate"}, append(gen, "--frequency-penalty", "-3")...), "--frequency-penalty -3"},
		{[]string{"chat", "-m", missing, "--top-p", "0"}, "--top-p 0"},
		{[]string{"chat", "-m", missing, "--repeat-last-n", "-9"}, "--repeat-last-n -9"},
		{[]string{"serve", "-m", missing, "--port", "-1"}, "--port -1"},
		{[]string{"serve", "-m", missing, "--backend", "tpu"}, `--backend "tpu"`},
		{[]string{"serve", "-m", missing, "-t", "-1"}, "-t (--threads) -1"},
		{[]string{"bench", "-m", missing, "-r", "0"}, "-r 0"},
		{append(gen, "--spec-mtp", "-1"), "--spec-mtp -1"},
		{append(gen, "--spec-mtp", "17"), "--spec-mtp 17"},
		{[]string{"chat", "-m", missing, "--spec-mtp", "99"}, "--spec-mtp 99"},
		{[]string{"serve", "-m", missing, "--spec-mtp", "-2"}, "--spec-mtp -2"},
		{[]string{"serve", "-m", missing, "--cache-ram", "-5"}, "--cache-ram -5"},
		{[]string{"bench", "-m", missing, "--spec-mtp", "1,x"}, `--spec-mtp "1,x"`},
		{[]string{"bench", "-m", missing, "--spec-mtp", "0"}, `--spec-mtp "0"`},
		{[]string{"bench", "-m", missing, "--temp", "-1"}, "--temp -1"},
		{[]string{"bench", "-m", missing, "--backend", "x"}, `--backend "x"`},
		{append([]string{"logits"}, append(fwd, "--threads", "-1")...), "--threads -1"},
		{append([]string{"logits"}, append(fwd, "--backend", "tpu")...), `--backend "tpu"`},
		{[]string{"dump", "-m", missing, "--tokens", "1,x", "-o", t.TempDir()}, `bad token id "x"`},
		{append([]string{"dump"}, append(fwd, "-o", t.TempDir(), "--tp", "0")...), "--tp 0"},
		// -ctk in every command that runs the model.
		{append(gen, "-ctk", "q4_0"), `-ctk (--cache-type-k): unknown KV cache type "q4_0"`},
		{[]string{"chat", "-m", missing, "--cache-type-k", "f8"}, `unknown KV cache type "f8"`},
		{[]string{"serve", "-m", missing, "-ctk", "x"}, `unknown KV cache type "x"`},
		{[]string{"bench", "-m", missing, "-ctk", "x"}, `unknown KV cache type "x"`},
		{[]string{"perplexity", "-m", missing, "-f", missing, "-ctk", "x"}, `unknown KV cache type "x"`},
		{append([]string{"logits"}, append(fwd, "-ctk", "x")...), `unknown KV cache type "x"`},
		{append([]string{"dump"}, append(fwd, "-o", t.TempDir(), "-ctk", "x")...), `unknown KV cache type "x"`},
		{append(gen, "-ctk", "q8_0", "-ctv", "f16"), "-ctv f16 with -ctk q8_0"},
		// --n-cpu-moe in every command that runs the model.
		{append(gen, "--n-cpu-moe", "-1"), "--n-cpu-moe -1"},
		{[]string{"chat", "-m", missing, "--n-cpu-moe", "-2"}, "--n-cpu-moe -2"},
		{[]string{"serve", "-m", missing, "--n-cpu-moe", "-3"}, "--n-cpu-moe -3"},
		{[]string{"bench", "-m", missing, "--n-cpu-moe", "-4"}, "--n-cpu-moe -4"},
		{[]string{"perplexity", "-m", missing, "-f", missing, "--n-cpu-moe", "-5"}, "--n-cpu-moe -5"},
		{append([]string{"logits"}, append(fwd, "--n-cpu-moe", "-6")...), "--n-cpu-moe -6"},
		{append([]string{"dump"}, append(fwd, "-o", t.TempDir(), "--n-cpu-moe", "-7")...), "--n-cpu-moe -7"},
		// --collectives in every command that runs the model.
		{append(gen, "--collectives", "gloo"), `--collectives "gloo"`},
		{[]string{"chat", "-m", missing, "--collectives", "x"}, `--collectives "x"`},
		{[]string{"serve", "-m", missing, "--collectives", "P2P"}, `--collectives "P2P"`},
		{[]string{"bench", "-m", missing, "--collectives", "mpi"}, `--collectives "mpi"`},
		{[]string{"perplexity", "-m", missing, "-f", missing, "--collectives", "y"}, `--collectives "y"`},
		{append([]string{"logits"}, append(fwd, "--collectives", "z")...), `--collectives "z"`},
		{append([]string{"dump"}, append(fwd, "-o", t.TempDir(), "--collectives", "w")...), `--collectives "w"`},
	} {
		code, out, errs := runCLI(t, c.args...)
		if code != 2 || out != "" || countOf(errs, c.want) != 1 || strings.Contains(errs, "missing.gguf") {
			t.Errorf("%q: exit %d, stdout %q, stderr:\n%s\nwant exit 2, nothing on stdout, %q once and no load", c.args, code, out, errs, c.want)
		}
		if countOf(errs, "usage:") != 1 || !strings.Contains(errs, "-h\" for its flags") {
			t.Errorf("%q: want one usage line and the -h hint, stderr:\n%s", c.args, errs)
		}
	}
}

// TestUsageOnce: an unknown or malformed flag prints the error once and
// the usage once, in every command.
func TestUsageOnce(t *testing.T) {
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, args := range [][]string{{"--bogus"}, {"-bogus=1"}} {
			args := append([]string{name}, args...)
			code, out, errs := runCLI(t, args...)
			lines := strings.Split(strings.TrimSpace(errs), "\n")
			if code != 2 || out != "" || countOf(errs, "usage:") != 1 || countOf(errs, "bogus") != 1 ||
				!strings.HasPrefix(lines[0], "glmrun "+name+": ") {
				t.Errorf("%q: exit %d, stdout %q, stderr:\n%s\nwant exit 2, the error first and once, one usage line", args, code, out, errs)
			}
		}
	}
	// diff's unreadable dump exits 2 too, but is no usage error.
	if code, _, errs := runCLI(t, "diff", t.TempDir(), t.TempDir()); code != 2 || countOf(errs, "usage:") != 0 || !strings.Contains(errs, "index.json") {
		t.Errorf("diff of empty directories: exit %d, stderr:\n%s\nwant 2, the error and no usage", code, errs)
	}
	// Without a command name, generation's usage.
	code, _, errs := runCLI(t, "--bogus")
	if code != 2 || countOf(errs, "usage:") != 1 || !strings.Contains(errs, "usage: glmrun [generate]") {
		t.Errorf("--bogus: exit %d, stderr:\n%s", code, errs)
	}
}

// TestHelpCommand: "glmrun help CMD" prints exactly what "glmrun CMD -h"
// prints, for every command, and exits 0.
func TestHelpCommand(t *testing.T) {
	for name := range commands {
		code1, out1, help1 := runCLI(t, "help", name)
		code2, out2, help2 := runCLI(t, name, "-h")
		if code1 != 0 || code2 != 0 || help1 != help2 || out1 != "" || out2 != "" || !strings.HasPrefix(strings.ToLower(help1), "usage") {
			t.Errorf("help %s: exit %d, stderr:\n%s\n%s -h: exit %d, stderr:\n%s", name, code1, help1, name, code2, help2)
		}
	}
	code, _, errs := runCLI(t, "help", "serve")
	if code != 0 || !strings.Contains(errs, "-parallel") || strings.Contains(errs, "commands:") {
		t.Errorf("help serve: exit %d, stderr:\n%s", code, errs)
	}
	for _, args := range [][]string{{"help"}, {"help", "help"}, {"help", "-h"}} {
		if code, _, errs := runCLI(t, args...); code != 0 || !strings.Contains(errs, "commands:") {
			t.Errorf("%q: exit %d, stderr:\n%s", args, code, errs)
		}
	}
	if code, _, errs := runCLI(t, "help", "bogus"); code != 2 || !strings.Contains(errs, `unknown command "bogus"`) {
		t.Errorf("help bogus: exit %d, stderr:\n%s", code, errs)
	}
	if code, _, errs := runCLI(t, "help", "serve", "chat"); code != 2 || !strings.Contains(errs, "want one command") {
		t.Errorf("help serve chat: exit %d, stderr:\n%s", code, errs)
	}
}

// TestLoadErrorOnce: an error that only loading finds (a missing file, a
// context the model cannot hold) is printed once, without usage, before
// any of the prompt, with exit status 1.
func TestLoadErrorOnce(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.gguf")
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"-m", missing, "-p", "Hello"}, []string{"missing.gguf"}},
		{[]string{"chat", "-m", missing}, []string{"missing.gguf"}},
		{[]string{"bench", "-m", missing, "-p", "8", "-n", "0"}, []string{"missing.gguf"}},
		{[]string{"bench", "-m", tokModel, "-p", "8", "-n", "0", "--cpuprofile", filepath.Join(missing, "cpu.prof")}, []string{"--cpuprofile"}},
		// The bundled model's training context is 4096 and it has no RoPE
		// scaling: the library refuses -c 100000, naming both numbers.
		{[]string{"-p", "Hello", "-c", "100000", "--seed", "1"}, []string{"100000", "4096"}},
		{[]string{"chat", "-c", "100000", "--seed", "1"}, []string{"100000", "4096"}},
	} {
		code, out, errs := runChatInputless(t, c.args...)
		lines := strings.Split(strings.TrimSpace(errs), "\n")
		last := lines[len(lines)-1]
		if code != 1 || out != "" || countOf(errs, "usage:") != 0 || !strings.HasPrefix(last, "glmrun ") {
			t.Errorf("%q: exit %d, stdout %q, stderr:\n%s\nwant exit 1, nothing on stdout, one error line, no usage", c.args, code, out, errs)
		}
		for _, w := range c.want {
			if countOf(errs, w) != 1 || !strings.Contains(last, w) {
				t.Errorf("%q: want %q once, in the error line; stderr:\n%s", c.args, w, errs)
			}
		}
	}
}

// TestThreadsWarning: -t beyond the CPUs is a warning, printed before the
// model is loaded, and the run goes on.
func TestThreadsWarning(t *testing.T) {
	withCPUs(t, 4)
	missing := filepath.Join(t.TempDir(), "missing.gguf")
	code, _, errs := runCLI(t, "-m", missing, "-p", "Hello", "-t", "8", "--seed", "1")
	lines := strings.Split(errs, "\n")
	if code != 1 || !strings.HasPrefix(lines[0], "glmrun generate: warning: -t (--threads) 8: 8 worker threads for the 4 CPUs") ||
		!strings.Contains(errs, "missing.gguf") {
		t.Errorf("exit %d, stderr:\n%s\nwant the warning first, then the load error", code, errs)
	}
	code, out, errs := runCLI(t, "-p", "1 2", "-n", "2", "-t", "5", "--seed", "1")
	if code != 0 || !strings.HasPrefix(out, "1 2") || countOf(errs, "warning") != 1 {
		t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant one warning and the text", code, out, errs)
	}
}

// runChatInputless runs the CLI with chat's stdin empty.
func runChatInputless(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	old := stdin
	stdin = strings.NewReader("")
	defer func() { stdin = old }()
	return runCLI(t, args...)
}

func TestParseDepths(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
	}{
		{"0", []int{0}}, {"8192", []int{8192}}, {"32768,0,8192", []int{0, 8192, 32768}}, {"5, 5", []int{5}},
		{"-1", nil}, {"x", nil}, {"1,,2", nil}, {"4294967296", nil}, {"", nil},
	} {
		got, err := parseDepths(c.in)
		if c.want == nil {
			if err == nil || !errors.Is(err, errUsage) {
				t.Errorf("parseDepths(%q) = %v, %v; want a usage error", c.in, got, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("parseDepths(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

// TestCacheFlags: -ctk's default is f16, and -ctv must name the type -ctk
// gives.
func TestCacheFlags(t *testing.T) {
	for _, c := range []struct {
		flags cacheFlags
		want  tensor.Type
		err   string
	}{
		{cacheFlags{}, tensor.F16, ""},
		{cacheFlags{k: "Q8_0"}, tensor.Q8_0, ""},
		{cacheFlags{v: "f16"}, tensor.F16, ""},
		{cacheFlags{k: "f32", v: "f16"}, 0, "-ctv f16 with -ctk f32"},
		{cacheFlags{k: "bf16", v: "bf16"}, tensor.BF16, ""},
		{cacheFlags{k: "q4_0"}, 0, `unknown KV cache type "q4_0"`},
	} {
		got, err := c.flags.parse()
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%+v: error %v, want %q", c.flags, err, c.err)
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%+v: %v, %v; want %v", c.flags, got, err, c.want)
		}
	}
}
