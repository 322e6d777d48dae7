// Command glmrun loads GLM-5 / DeepSeek MLA models from GGUF files, inspects
// them and runs them.
//
// Usage:
//
//	glmrun [-m MODEL.gguf] -p PROMPT [flags]   generate text (llama-cli style)
//	glmrun <command> [flags] [args]
//
// Without -m, the bundled tiny random-weights model is used. Run
// "glmrun help" for the list of commands and the generation flags.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// command is one glmrun sub-command. run gets the arguments after the
// command name and writes its results to stdout; errors go back to main,
// which prints them and sets the exit status.
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
}

// commands lists every sub-command; each lives in its own file.
var commands = map[string]command{
	"logits":     {"print a token sequence's logits as JSON (prefill or decode path)", runLogits},
	"generate":   {"generate text from a prompt (the default: glmrun -m MODEL -p TEXT)", runGenerate},
	"chat":       {"chat with a model on standard input, its chat template applied", runChat},
	"inspect":    {"show a GGUF file's architecture, hyper-parameters, tokenizer and tensors", runInspect},
	"tensor":     {"write one tensor, dequantized to float32, as a .npy file", runTensor},
	"dump":       {"run tokens through a model and write its hidden states (.npy + index.json)", runDump},
	"diff":       {"compare two hidden-state dumps (glmrun or llama.cpp) and name the first divergent tensor", runDiff},
	"tokenize":   {"print the token ids of a text (special tokens parsed, as llama-tokenize)", runTokenize},
	"detokenize": {"print the text of token ids", runDetokenize},
	"serve":      {"serve the model over an OpenAI-compatible HTTP API (continuous batching)", runServe},
	"bench":      {"measure prompt processing and generation speed (tokens/s, as llama-bench)", runBench},
	"perplexity": {"compute a text's perplexity over chunks of -c tokens, as llama-perplexity", runPerplexity},
	"synth":      {"write a synthetic deepseek2 model with random weights (GLM-4.7-Flash shape) for benchmarks", runSynth},
	"convert":    {"convert a Hugging Face GLM-5 / GLM-4.7-Flash / DeepSeek-V3 checkpoint to GGUF as llama.cpp does", runConvert},
	"quantize":   {"quantize an F32/F16/BF16 model to Q8_0, Q6_K, Q5_K_M or Q4_K_M as llama-quantize does", runQuantize},
}

// errUsage marks an error caused by bad flags or arguments (exit status 2).
var errUsage = errors.New("usage")

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || (args[0] == "help" && len(args) == 1) {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	name, rest := args[0], args[1:]
	if name == "help" {
		// "glmrun help CMD" is "glmrun CMD -h": the same text from the same
		// code, so the two cannot drift apart.
		if len(rest) > 1 {
			fmt.Fprintf(stderr, "glmrun help: want one command, have %q\n", rest)
			return 2
		}
		if rest[0] == "help" || strings.HasPrefix(rest[0], "-") {
			usage(stderr)
			return 0
		}
		name, rest = rest[0], []string{"-h"}
	}
	if strings.HasPrefix(name, "-") {
		// Flags first and no command: generation, as llama-cli.
		name, rest = "generate", args
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "glmrun: unknown command %q\n", name)
		usage(stderr)
		return 2
	}
	if err := cmd.run(rest, stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		// The message once; the "glmrun: " and "usage: " of wrapped errors
		// would only repeat what the prefix and the synopsis say.
		msg := strings.TrimPrefix(err.Error(), "glmrun: ")
		if errors.Is(err, errUsage) {
			fmt.Fprintf(stderr, "glmrun %s: %s\n", name, strings.TrimPrefix(msg, errUsage.Error()+": "))
			// diff's trouble (an unreadable dump) exits 2 as well, but the
			// command line was right: no usage for it.
			if !errors.As(err, new(troubleError)) {
				printSynopsis(stderr, name, cmd)
			}
			return 2
		}
		fmt.Fprintf(stderr, "glmrun %s: %s\n", name, msg)
		return 1
	}
	return 0
}

// printSynopsis prints the usage line(s) of a command's -h text and where
// the flags are described, after a usage error: one short usage print
// under the error rather than pages of flags that would scroll it away.
// The synopsis is read from the command's own -h output (which parses
// nothing and loads nothing), so that it is always the one -h shows.
func printSynopsis(w io.Writer, name string, cmd command) {
	var help strings.Builder
	cmd.run([]string{"-h"}, io.Discard, &help)
	var lines []string
	for line := range strings.SplitSeq(help.String(), "\n") {
		if len(lines) == 0 && !strings.HasPrefix(strings.ToLower(line), "usage") {
			continue
		}
		if strings.TrimSpace(line) == "" {
			break
		}
		lines = append(lines, line)
	}
	if len(lines) > 0 {
		fmt.Fprintln(w, strings.Join(lines, "\n"))
	}
	fmt.Fprintf(w, "Run \"glmrun %s -h\" for its flags.\n", name)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, `usage: glmrun [-m MODEL.gguf] -p PROMPT [flags]   generate text (flags below)
       glmrun <command> [flags] [args]

commands:`)
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "  %-10s %s\n", name, commands[name].summary)
	}
	fmt.Fprintln(w, "\nRun \"glmrun <command> -h\" or \"glmrun help <command>\" for a command's flags.\n\ngeneration flags (glmrun [generate]; chat takes the same but -p, -f and --no-display-prompt):")
	fs, _, _, _, _ := newGenerateFlags(w)
	fs.PrintDefaults()
}

// newFlagSet returns a flag set that reports errors instead of exiting, so
// that bad flags come back to run as errors.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("glmrun "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseFlags parses args with fs and wraps a failure as a usage error.
// The flag package's own printing is silenced while it parses: on an error
// it would print the message and the whole usage, and run prints the
// message (and a synopsis) again; on -h the usage is printed here, once.
func parseFlags(fs *flag.FlagSet, args []string) error {
	usage, out := fs.Usage, fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.Usage = usage
	fs.SetOutput(out)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			if fs.Usage != nil {
				fs.Usage()
			} else {
				fmt.Fprintf(out, "usage of %s:\n", fs.Name())
				fs.PrintDefaults()
			}
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return nil
}
