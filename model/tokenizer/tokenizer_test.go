package tokenizer

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
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

// refRun is the part of a llama.cpp reference run (testdata README §4.3)
// that concerns the tokenizer.
type refRun struct {
	Prompt          []int32  `json:"prompt"`
	PromptPieces    []string `json:"prompt_pieces"`
	PromptPiecesHex []string `json:"prompt_pieces_hex"`
	Greedy          []struct {
		ID       int32  `json:"id"`
		PieceHex string `json:"piece_hex"`
	} `json:"greedy"`
}

// TestPieces checks token -> bytes against the pieces llama.cpp printed
// for the golden prompts and greedy continuations (P2 holds byte tokens
// that are not valid UTF-8 on their own).
func TestPieces(t *testing.T) {
	tok := load(t, glm5Mini)
	for _, p := range []string{"P1", "P2"} {
		t.Run(p, func(t *testing.T) {
			var ref refRun
			if err := json.Unmarshal(readGz(t, "refs/glm5-mini.Q8_0.deq-F32."+p+".json.gz"), &ref); err != nil {
				t.Fatal(err)
			}
			if len(ref.Prompt) == 0 || len(ref.Prompt) != len(ref.PromptPiecesHex) || len(ref.Greedy) == 0 {
				t.Fatalf("bad ref: %d ids, %d pieces, %d greedy", len(ref.Prompt), len(ref.PromptPiecesHex), len(ref.Greedy))
			}
			check := func(id int32, wantHex string) {
				t.Helper()
				if got := hex.EncodeToString([]byte(tok.Piece(id, true))); got != wantHex {
					t.Errorf("Piece(%d) = %s, want %s", id, got, wantHex)
				}
			}
			var all []byte
			for i, id := range ref.Prompt {
				check(id, ref.PromptPiecesHex[i])
				b, _ := hex.DecodeString(ref.PromptPiecesHex[i])
				all = append(all, b...)
			}
			for _, g := range ref.Greedy {
				check(g.ID, g.PieceHex)
			}
			s, err := tok.Decode(ref.Prompt, false)
			if err != nil || s != string(all) {
				t.Errorf("Decode(prompt) = %q, %v; want %q", s, err, all)
			}
		})
	}
}

// TestGoldenPrompt: P1's text tokenizes to the P1 prompt ids.
func TestGoldenPrompt(t *testing.T) {
	tok := load(t, glm5Mini)
	var ref refRun
	if err := json.Unmarshal(readGz(t, "refs/glm5-mini.Q8_0.deq-F32.P1.json.gz"), &ref); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(ref.PromptPieces, "")
	if text != "1 2 3 4 5 6 7 8 9 10" {
		t.Fatalf("P1 text %q", text)
	}
	for _, parse := range []bool{true, false} {
		if got := tok.Encode(text, true, parse); !slices.Equal(got, ref.Prompt) {
			t.Errorf("Encode(%q, parseSpecial=%v) = %v, want %v", text, parse, got, ref.Prompt)
		}
	}
}

func TestSpecialIDs(t *testing.T) {
	tok := load(t, glm5Mini)
	// testdata README §6.1.
	for _, c := range []struct {
		name      string
		got, want int32
	}{
		{"BOS", tok.BOS(), 958}, {"EOS", tok.EOS(), 956}, {"EOT", tok.EOT(), 963},
		{"EOM", tok.EOM(), 965}, {"UNK", tok.UNK(), 956}, {"PAD", tok.PAD(), 956},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	if got, want := tok.EOGs(), []int32{956, 963, 965}; !slices.Equal(got, want) {
		t.Errorf("EOGs = %v, want %v", got, want)
	}
	if tok.NumTokens() != 1024 || tok.Pre() != "glm4" || tok.AddBOS() || tok.AddEOS() {
		t.Errorf("NumTokens %d, Pre %q, AddBOS %v, AddEOS %v", tok.NumTokens(), tok.Pre(), tok.AddBOS(), tok.AddEOS())
	}
	if id, ok := tok.ID("<think>"); !ok || id != 966 || tok.Type(id) != TypeControl || tok.Text(id) != "<think>" {
		t.Errorf("<think>: id %d %v, type %d, text %q", id, ok, tok.Type(id), tok.Text(id))
	}
	if tok.Type(977) != TypeUnused || tok.Piece(977, true) != "" {
		t.Errorf("[PAD977]: type %d, piece %q", tok.Type(977), tok.Piece(977, true))
	}
	if tok.Piece(966, false) != "" || tok.Piece(966, true) != "<think>" {
		t.Errorf("control piece: %q without specials, %q with", tok.Piece(966, false), tok.Piece(966, true))
	}
	for _, id := range []int32{-1, 1024} {
		if tok.Piece(id, true) != "" || tok.Text(id) != "" || tok.Type(id) != TypeUndefined {
			t.Errorf("id %d out of range: piece %q text %q type %d", id, tok.Piece(id, true), tok.Text(id), tok.Type(id))
		}
		if _, err := tok.Decode([]int32{1, id}, true); err == nil {
			t.Errorf("Decode with id %d: no error", id)
		}
	}
}
