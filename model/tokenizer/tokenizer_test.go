package tokenizer

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/glmrun/glmrun/gguf"
)

const testdata = "../../testdata"

// vocabs caches the tokenizers loaded by tests (the vocabularies take a
// while to decompress and build).
var vocabs struct {
	sync.Mutex
	m map[string]*Tokenizer
}

// openGGUF parses a GGUF file of testdata, gunzipping *.gz in memory.
func openGGUF(tb testing.TB, rel string) *gguf.File {
	tb.Helper()
	path := filepath.Join(testdata, rel)
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			tb.Fatalf("%s: %v", path, err)
		}
		if data, err = io.ReadAll(zr); err != nil {
			tb.Fatalf("%s: %v", path, err)
		}
	}
	f, err := gguf.Parse(path, data)
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

// load returns the tokenizer of testdata file rel, built once per test binary.
func load(tb testing.TB, rel string) *Tokenizer {
	tb.Helper()
	vocabs.Lock()
	defer vocabs.Unlock()
	if t, ok := vocabs.m[rel]; ok {
		return t
	}
	t, err := New(openGGUF(tb, rel))
	if err != nil {
		tb.Fatal(err)
	}
	if vocabs.m == nil {
		vocabs.m = make(map[string]*Tokenizer)
	}
	vocabs.m[rel] = t
	return t
}

func readGz(tb testing.TB, rel string) []byte {
	tb.Helper()
	f, err := os.Open(filepath.Join(testdata, rel))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		tb.Fatalf("%s: %v", rel, err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		tb.Fatalf("%s: %v", rel, err)
	}
	return b
}

const glm5Mini = "models/glm5-mini.Q8_0.gguf"

// vectorFiles are llama.cpp's tokenizer test vocabularies (testdata README §6.2).
var vectorFiles = []struct {
	name, pre string
	cases     int
}{
	{"vocab-llama3.gguf", "llama-bpe", 46},
	{"vocab-qwen3.gguf", "qwen2", 46},
	{"vocab-deepseek-v3.gguf", "deepseek-v3", 50},
	{"ggml-vocab-deepseek-llm.gguf", "deepseek-llm", 46},
	{"ggml-vocab-deepseek-coder.gguf", "deepseek-coder", 46},
	{"ggml-vocab-gpt-2.gguf", "gpt-2", 46},
}

// readVectors returns the inputs and expected ids of a .inp/.out pair.
func readVectors(t *testing.T, name string) ([]string, [][]int32) {
	t.Helper()
	inp, err := os.ReadFile(filepath.Join(testdata, "tokenizers", name+".inp"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(filepath.Join(testdata, "tokenizers", name+".out"))
	if err != nil {
		t.Fatal(err)
	}
	const sep = "\n__ggml_vocab_test__\n"
	texts := strings.Split(string(inp), sep)
	if texts[len(texts)-1] != "" {
		t.Fatalf("%s.inp does not end with the separator", name)
	}
	texts = texts[:len(texts)-1]
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(texts) {
		t.Fatalf("%s: %d inputs, %d output lines", name, len(texts), len(lines))
	}
	ids := make([][]int32, len(lines))
	for i, line := range lines {
		for _, f := range strings.Fields(line) {
			id, err := strconv.ParseInt(f, 10, 32)
			if err != nil {
				t.Fatalf("%s.out line %d: %v", name, i+1, err)
			}
			ids[i] = append(ids[i], int32(id))
		}
	}
	return texts, ids
}

func TestVectors(t *testing.T) {
	for _, vf := range vectorFiles {
		t.Run(vf.pre, func(t *testing.T) {
			tok := load(t, "tokenizers/"+vf.name+".gz")
			if tok.Pre() != vf.pre {
				t.Errorf("pre = %q, want %q", tok.Pre(), vf.pre)
			}
			texts, want := readVectors(t, vf.name)
			if len(texts) != vf.cases {
				t.Errorf("%d cases, want %d", len(texts), vf.cases)
			}
			for i, text := range texts {
				got := tok.Encode(text, false, false)
				if !slices.Equal(got, want[i]) && !(len(got) == 0 && len(want[i]) == 0) {
					t.Errorf("case %d %q:\n got %v\nwant %v", i, text, got, want[i])
				}
			}
		})
	}
}

// tokenizerCases is refs/glm5-mini.tokenizer-cases.json.
type tokenizerCases struct {
	AddBOS bool `json:"add_bos"`
	Cases  []struct {
		Text              string  `json:"text"`
		IDsParseSpecial   []int32 `json:"ids_parse_special"`
		IDsNoParseSpecial []int32 `json:"ids_no_parse_special"`
	} `json:"cases"`
}

func TestGLM5MiniCases(t *testing.T) {
	tok := load(t, glm5Mini)
	var tc tokenizerCases
	if err := json.Unmarshal(readGz(t, "refs/glm5-mini.tokenizer-cases.json.gz"), &tc); err != nil {
		t.Fatal(err)
	}
	if len(tc.Cases) == 0 {
		t.Fatal("no cases")
	}
	if tc.AddBOS || tok.AddBOS() {
		t.Fatalf("add_bos: refs %v, tokenizer %v; both should be false", tc.AddBOS, tok.AddBOS())
	}
	for i, c := range tc.Cases {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			if got := tok.Encode(c.Text, true, true); !slices.Equal(got, c.IDsParseSpecial) {
				t.Errorf("parse special %q:\n got %v\nwant %v", c.Text, got, c.IDsParseSpecial)
			}
			if got := tok.Encode(c.Text, true, false); !slices.Equal(got, c.IDsNoParseSpecial) {
				t.Errorf("no parse special %q:\n got %v\nwant %v", c.Text, got, c.IDsNoParseSpecial)
			}
			// Both tokenizations decode back to the text when control
			// tokens are rendered.
			for _, ids := range [][]int32{c.IDsParseSpecial, c.IDsNoParseSpecial} {
				if s, err := tok.Decode(ids, true); err != nil || s != c.Text {
					t.Errorf("Decode(%v, true) = %q, %v; want %q", ids, s, err, c.Text)
				}
			}
		})
	}
}
