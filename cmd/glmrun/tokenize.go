package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/model/tokenizer"
)

// runTokenize prints the token ids of a text, like llama.cpp's
// llama-tokenize --ids: special-token text is parsed by default and BOS is
// added when the model asks for it.
func runTokenize(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("tokenize", stderr)
	var modelFlag string
	fs.StringVar(&modelFlag, "m", "", "model `FILE.gguf` (default: the bundled "+defaultModelRel+")")
	fs.StringVar(&modelFlag, "model", "", "same as -m `FILE.gguf`")
	noParse := fs.Bool("no-parse-special", false, "tokenize special-token text (<|user|>, [gMASK], ...) as plain text")
	noBOS := fs.Bool("no-bos", false, "never add BOS, even if the model asks for it")
	file := fs.String("f", "", "read the text from `FILE` (- for standard input) instead of the arguments")
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: glmrun tokenize [flags] TEXT...

Prints the token ids of TEXT (the arguments joined by single spaces) on one
line, separated by spaces. Special tokens written in the text are parsed,
as llama-tokenize does; BOS is added if the model's tokenizer asks for it.
Use -- before a TEXT that starts with '-'.

flags:`)
		fs.PrintDefaults()
	}
	pos, err := parseFlagsAnywhere(fs, args)
	if err != nil {
		return err
	}
	var text string
	switch {
	case *file != "" && len(pos) > 0:
		return fmt.Errorf("%w: give the text either with -f or as arguments, not both", errUsage)
	case *file != "":
		b, err := readTextFile(*file)
		if err != nil {
			return err
		}
		text = string(b)
	case len(pos) == 0:
		return fmt.Errorf("%w: no text to tokenize", errUsage)
	default:
		text = strings.Join(pos, " ")
	}
	tok, err := loadTokenizer(modelFlag)
	if err != nil {
		return err
	}
	ids := tok.Encode(text, !*noBOS, !*noParse)
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatInt(int64(id), 10))
	}
	b.WriteByte('\n')
	_, err = io.WriteString(stdout, b.String())
	return err
}

// runDetokenize prints the text of token ids.
func runDetokenize(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("detokenize", stderr)
	var modelFlag string
	fs.StringVar(&modelFlag, "m", "", "model `FILE.gguf` (default: the bundled "+defaultModelRel+")")
	fs.StringVar(&modelFlag, "model", "", "same as -m `FILE.gguf`")
	noSpecial := fs.Bool("no-special", false, "leave control tokens (<|user|>, [gMASK], ...) out instead of printing their text")
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: glmrun detokenize [flags] ID...

Prints the text of the token ids (separated by spaces or commas; "[1, 2]"
as printed by llama-tokenize works too), followed by a newline. Control
tokens are printed as their text unless --no-special is given.

flags:`)
		fs.PrintDefaults()
	}
	pos, err := parseFlagsAnywhere(fs, args)
	if err != nil {
		return err
	}
	ids, err := parseIDs(pos)
	if err != nil {
		return err
	}
	tok, err := loadTokenizer(modelFlag)
	if err != nil {
		return err
	}
	text, err := tok.Decode(ids, !*noSpecial)
	if err != nil {
		return err
	}
	_, err = io.WriteString(stdout, text+"\n")
	return err
}

// parseIDs reads token ids from arguments such as "1 2 3", "1,2,3" or
// "[1, 2, 3]".
func parseIDs(args []string) ([]int32, error) {
	var ids []int32
	for _, a := range args {
		for _, f := range strings.FieldsFunc(a, func(r rune) bool {
			return r == ',' || r == '[' || r == ']' || r == ' ' || r == '\t' || r == '\n'
		}) {
			id, err := strconv.ParseInt(f, 10, 32)
			if err != nil || id < 0 {
				return nil, fmt.Errorf("%w: %q is not a token id", errUsage, f)
			}
			ids = append(ids, int32(id))
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("%w: no token ids to detokenize", errUsage)
	}
	return ids, nil
}

// loadTokenizer opens the model (the bundled one if path is "") and builds
// its tokenizer; only the metadata is read.
func loadTokenizer(path string) (*tokenizer.Tokenizer, error) {
	path, err := modelPath(path)
	if err != nil {
		return nil, err
	}
	f, tok, err := openModelFile(path)
	if err != nil {
		return nil, err
	}
	f.Close()
	return tok, nil
}

// openModelFile opens the GGUF file at path and builds its tokenizer; the
// caller closes the file.
func openModelFile(path string) (*gguf.File, *tokenizer.Tokenizer, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, nil, err
	}
	tok, err := tokenizer.New(f)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, tok, nil
}

// readTextFile reads name, or standard input for "-".
func readTextFile(name string) ([]byte, error) {
	if name == "-" {
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return nil, fmt.Errorf("reading standard input: %w", err)
		}
		return b, nil
	}
	return os.ReadFile(name)
}
