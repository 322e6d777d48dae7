package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/model"
)

// pplText writes a text of about n words (random common words and
// numbers, fixed seed) to a temporary file and returns its path.
func pplText(t *testing.T, n int) string {
	t.Helper()
	words := strings.Fields("the of and to in is was for on that with as by at from his her it an were are which this be or has had not but first one their also its new after who they two been more other")
	r := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		if r.IntN(10) == 0 {
			b.WriteString(strconv.Itoa(r.IntN(1000)))
		} else {
			b.WriteString(words[r.IntN(len(words))])
		}
	}
	b.WriteByte('\n') // dropped, as llama.cpp's -f drops it
	p := filepath.Join(t.TempDir(), "text.txt")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

var (
	pplStdoutRE = regexp.MustCompile(`^\d+\.\d\d minutes\n((?:\[\d+\]\d+\.\d{4},)+)\n\n$`)
	pplChunkRE  = regexp.MustCompile(`\[(\d+)\](\d+\.\d{4}),`)
	pplFinalRE  = regexp.MustCompile(`(?m)(?:^|- ETA )Final estimate: PPL = (\d+\.\d{4}) \+/- (\d+\.\d{5})$`)
	pplInfoRE   = regexp.MustCompile(`(?m)^perplexity: calculating perplexity over (\d+) chunks, n_ctx=(\d+), batch_size=(\d+), n_seq=(\d+)$`)
)

// refPPL computes, independently of runPerplexity, the running and final
// perplexities and the error estimate of llama-perplexity's algorithm:
// each chunk of nCtx tokens in one Prefill on a new session, every
// position's logits, log-softmax in float64, the mean over the second
// halves, the error from a two-pass variance.
func refPPL(t *testing.T, modelPath, textPath string, exact, invariant bool, nCtx, maxChunks int) (running []float64, ppl, errEst float64) {
	t.Helper()
	f, tok := openTestModel(t, modelPath)
	text, err := os.ReadFile(textPath)
	if err != nil {
		t.Fatal(err)
	}
	ids := tok.Encode(strings.TrimSuffix(string(text), "\n"), true, false)
	m, err := model.New(f, model.Options{Threads: 1, Fast: !exact, BatchInvariant: invariant})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	nChunk := len(ids) / nCtx
	if maxChunks > 0 {
		nChunk = min(nChunk, maxChunks)
	}
	var nlls []float64
	for c := range nChunk {
		chunk := slices.Clone(ids[c*nCtx : (c+1)*nCtx])
		if tok.AddBOS() {
			chunk[0] = tok.BOS()
		}
		s, err := m.NewSession(model.SessionOptions{ContextSize: nCtx})
		if err != nil {
			t.Fatal(err)
		}
		rows, err := s.Prefill(chunk)
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		for j := nCtx / 2; j < nCtx-1; j++ {
			row := rows[j]
			nlls = append(nlls, logSumExp(row)-float64(row[ids[c*nCtx+j+1]]))
		}
		var tot float64
		for _, v := range nlls {
			tot += v
		}
		running = append(running, math.Exp(tot/float64(len(nlls))))
	}
	n := float64(len(nlls))
	var mean float64
	for _, v := range nlls {
		mean += v / n
	}
	var ss float64
	for _, v := range nlls {
		ss += (v - mean) * (v - mean)
	}
	ppl = math.Exp(mean)
	return running, ppl, ppl * math.Sqrt(ss/n/(n-1))
}

// near reports whether got, printed with prec decimals, is want to within
// the printing's rounding and a relative rel (the prefill's rounding).
func near(got string, want float64, prec int, rel float64) bool {
	v, err := strconv.ParseFloat(got, 64)
	return err == nil && math.Abs(v-want) <= 0.5*math.Pow(10, -float64(prec))+rel*math.Abs(want)
}

// TestPerplexity runs "glmrun perplexity" on glm5-mini and checks the
// output's format against llama-perplexity's and its numbers against
// refPPL, on both paths and with batches that cut the chunks.
func TestPerplexity(t *testing.T) {
	text := pplText(t, 600) // about 900 tokens: 14 chunks of 64
	for _, c := range []struct {
		name            string
		args            []string
		exact           bool
		nCtx, chunks    int
		batchSize, nSeq int
	}{
		{"fast", []string{"-c", "64"}, false, 64, 0, 2048, 32},
		// Batches cut the chunks into other pieces than the reference's
		// whole-chunk passes: bit for bit the same only batch-invariant.
		{"fast pieces", []string{"-c", "33", "-b", "10", "-ub", "4", "--batch-invariant"}, false, 33, 0, 10, 1},
		{"exact", []string{"-c", "64", "--exact", "--chunks", "3"}, true, 64, 3, 2048, 32},
		{"exact pieces", []string{"-c", "64", "-b", "100", "-ub", "24", "--exact", "--chunks", "2"}, true, 64, 2, 64, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"perplexity", "-ctk", "f32", "-m", tokModel, "-f", text, "-t", "1"}, c.args...)
			code, out, errs := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("%q: exit %d, stderr:\n%s", args, code, errs)
			}
			sm := pplStdoutRE.FindStringSubmatch(out)
			fm := pplFinalRE.FindStringSubmatch(errs)
			im := pplInfoRE.FindStringSubmatch(errs)
			if sm == nil || fm == nil || im == nil || !strings.HasPrefix(errs, "perplexity: tokenizing the input ..\n") ||
				!strings.Contains(errs, " seconds per pass - ETA ") {
				t.Fatalf("output not llama-perplexity's:\nstdout:\n%s\nstderr:\n%s", out, errs)
			}
			running, ppl, errEst := refPPL(t, tokModel, text, c.exact, slices.Contains(c.args, "--batch-invariant"), c.nCtx, c.chunks)
			if want := fmt.Sprintf("%d %d %d %d", len(running), c.nCtx, c.batchSize, c.nSeq); strings.Join(im[1:], " ") != want {
				t.Errorf("info line %q, want chunks, n_ctx, batch_size, n_seq %s", im[0], want)
			}
			got := pplChunkRE.FindAllStringSubmatch(sm[1], -1)
			if len(got) != len(running) {
				t.Fatalf("%d chunk values, want %d: %s", len(got), len(running), sm[1])
			}
			for i, g := range got {
				if g[1] != strconv.Itoa(i+1) || !near(g[2], running[i], 4, 1e-5) {
					t.Errorf("chunk value %s, want [%d]%.4f", g[0], i+1, running[i])
				}
			}
			if !near(fm[1], ppl, 4, 1e-5) || !near(fm[2], errEst, 5, 1e-4) {
				t.Errorf("%s; want PPL = %.4f +/- %.5f", fm[0], ppl, errEst)
			}
			if g := got[len(got)-1][2]; g != fm[1] {
				t.Errorf("last running value %s, final %s: want the same", g, fm[1])
			}
		})
	}
}

// TestPerplexityErrors: bad flags are usage errors (exit 2) before anything
// is read or loaded; bad input exits 1 with a message naming the file and
// the numbers.
func TestPerplexityErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.gguf")
	text := pplText(t, 600)
	short := filepath.Join(dir, "short.txt")
	empty := filepath.Join(dir, "empty.txt")
	os.WriteFile(short, []byte("hello world\n"), 0o644)
	os.WriteFile(empty, []byte("\n"), 0o644)
	for _, c := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"-m", missing}, 2, []string{"-f FILE is required"}},
		{[]string{"-m", missing, "-f", text, "-c", "2"}, 2, []string{"-c (--ctx-size) 2: want >= 3"}},
		{[]string{"-m", missing, "-f", text, "-c", "0"}, 2, []string{"-c (--ctx-size) 0"}},
		{[]string{"-m", missing, "-f", text, "-b", "0"}, 2, []string{"-b (--batch-size) 0"}},
		{[]string{"-m", missing, "-f", text, "-ub", "-1"}, 2, []string{"-ub (--ubatch-size) -1"}},
		{[]string{"-m", missing, "-f", text, "--chunks", "0"}, 2, []string{"--chunks 0"}},
		{[]string{"-m", missing, "-f", text, "-t", "-1"}, 2, []string{"-t (--threads) -1"}},
		{[]string{"-m", missing, "-f", text, "--tp", "0"}, 2, []string{"--tp 0"}},
		{[]string{"-m", missing, "-f", text, "--backend", "tpu"}, 2, []string{`--backend "tpu"`}},
		{[]string{"-m", missing, "-f", text, "extra"}, 2, []string{`unexpected argument "extra"`}},
		{[]string{"-m", missing, "-f", filepath.Join(dir, "nope.txt")}, 1, []string{"nope.txt", "no such file"}},
		{[]string{"-m", missing, "-f", empty}, 1, []string{"empty.txt", "empty"}},
		{[]string{"-m", missing, "-f", text}, 1, []string{"missing.gguf"}},
		{[]string{"-m", tokModel, "-f", short, "-c", "64"}, 1, []string{"short.txt", "tokenizes to only 6 tokens", "context of 64 (-c)", "at least 128"}},
		{[]string{"-m", tokModel, "-f", text, "-c", "5000"}, 1, []string{"text.txt", "at least 10000"}},
		{[]string{"-m", tokModel, "-f", text, "-c", "3", "--chunks", "1"}, 1, []string{"score 1 token"}},
		// The bundled model's training context is 4096.
		{[]string{"-m", tokModel, "-f", pplText(t, 9000), "-c", "5000", "--chunks", "1"}, 1, []string{"-c 5000", "4096"}},
	} {
		args := append([]string{"perplexity"}, c.args...)
		code, out, errs := runCLI(t, args...)
		lines := strings.Split(strings.TrimSpace(errs), "\n")
		msg := lines[0]
		if c.code == 1 {
			msg = lines[len(lines)-1]
		}
		ok := code == c.code && out == "" && strings.HasPrefix(msg, "glmrun perplexity: ") && countOf(errs, "usage:") == map[int]int{1: 0, 2: 1}[c.code]
		for _, w := range c.want {
			ok = ok && strings.Contains(msg, w)
		}
		if c.code == 2 {
			ok = ok && !strings.Contains(errs, "missing.gguf") && !strings.Contains(errs, "tokenizing")
		}
		if !ok {
			t.Errorf("%q: exit %d, stdout %q, stderr:\n%s\nwant exit %d, nothing on stdout, an error line with %q", args, code, out, errs, c.code, c.want)
		}
	}
}

// TestPerplexityFlagsCheck: the ranges of perplexity's flags, the
// defaults llama-perplexity's, and the plan it derives from -c, -b, -ub and
// --chunks.
func TestPerplexityFlagsCheck(t *testing.T) {
	withCPUs(t, 4)
	for _, c := range []checkCase{
		{[]string{"-f", "x"}, "", ""},
		{[]string{"-f", "x", "-c", "3", "-b", "1", "-ub", "1", "--chunks", "1"}, "", ""},
		{[]string{"-f", "x", "-t", "8"}, "", "8 worker threads for the 4 CPUs"},
		{nil, "-f FILE is required", ""},
		{[]string{"-f", "x", "-c", "2"}, "-c (--ctx-size) 2: want >= 3", ""},
		{[]string{"-f", "x", "--ctx-size", "-1"}, "-c (--ctx-size) -1", ""},
		{[]string{"-f", "x", "-c", "3000000000"}, "want at most 2147483647", ""},
		{[]string{"-f", "x", "--batch-size", "0"}, "-b (--batch-size) 0: want >= 1", ""},
		{[]string{"-f", "x", "--ubatch-size", "0"}, "-ub (--ubatch-size) 0: want >= 1", ""},
		{[]string{"-f", "x", "--chunks", "-2"}, "--chunks -2: want >= 1, or -1", ""},
		{[]string{"-f", "x", "--threads", "5000"}, "-t (--threads) 5000", ""},
		{[]string{"-f", "x", "--tp", "0"}, "--tp 0: want >= 1", ""},
		{[]string{"-f", "x", "--backend", "gpu"}, `--backend "gpu"`, ""},
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var p pplFlags
		p.register(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		warnings, err := p.check()
		wantCheck(t, c, warnings, err)
	}
	for _, c := range []struct {
		args                                       []string
		nTokens                                    int
		nCtx, nBatch, nUbatch, nSeq, nChunk, first int
	}{
		{nil, 2000, 512, 2048, 512, 4, 3, 256}, // llama-perplexity's defaults
		{[]string{"-b", "1000"}, 2000, 512, 512, 512, 1, 3, 256},
		{[]string{"-b", "1500"}, 2000, 512, 1024, 512, 2, 3, 256},
		{[]string{"-b", "300", "-ub", "1024"}, 2000, 512, 300, 300, 1, 3, 256},
		{[]string{"-c", "65", "-b", "130", "-ub", "20", "--chunks", "4"}, 2000, 65, 130, 20, 2, 4, 32},
		{[]string{"-c", "64", "--chunks", "100"}, 200, 64, 2048, 512, 32, 3, 32},
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		var p pplFlags
		p.register(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		got := newPPLPlan(c.nTokens, &p)
		want := pplPlan{nCtx: c.nCtx, nBatch: c.nBatch, nUbatch: c.nUbatch, nSeq: c.nSeq, nChunk: c.nChunk, first: c.first}
		if got != want {
			t.Errorf("%q, %d tokens: plan %+v, want %+v", c.args, c.nTokens, got, want)
		}
	}
}

// fakePPLSession records the pieces a chunk is run in; its logits are a
// fixed function of the position and the vocabulary index.
type fakePPLSession struct {
	pos   int
	calls []string
}

const fakeVocab = 11

func fakeLogit(pos, v int) float32 { return float32(3 * math.Sin(float64(7*pos+3*v))) }

func (s *fakePPLSession) Reset() { s.pos = 0; s.calls = append(s.calls, "reset") }

func (s *fakePPLSession) run(kind string, tokens []int32) [][]float32 {
	s.calls = append(s.calls, fmt.Sprintf("%s@%d%v", kind, s.pos, tokens))
	rows := make([][]float32, len(tokens))
	for i := range rows {
		rows[i] = make([]float32, fakeVocab)
		for v := range rows[i] {
			rows[i][v] = fakeLogit(s.pos+i, v)
		}
	}
	s.pos += len(tokens)
	return rows
}

func (s *fakePPLSession) Prefill(tokens []int32) ([][]float32, error) {
	return s.run("all", tokens), nil
}

func (s *fakePPLSession) PrefillLast(dst []float32, tokens []int32) ([]float32, error) {
	rows := s.run("last", tokens)
	return rows[len(rows)-1], nil
}

// TestScoreChunk: a chunk runs from position 0 in llama.cpp's pieces,
// BOS replacing its first token when the vocabulary adds BOS, and the NLLs
// of tokens first+1 … nCtx−1 are added.
func TestScoreChunk(t *testing.T) {
	tokens := make([]int32, 25)
	for i := range tokens {
		tokens[i] = int32(i % fakeVocab)
	}
	// -c 10 -b 4 -ub 3: logical batches [0,4) [4,8) [8,10), physical
	// ones of at most 3 within them; positions 5 … 8 are scored.
	p := pplFlags{ctx: 10, batch: 4, ubatch: 3, chunks: -1}
	pl := newPPLPlan(len(tokens), &p)
	for _, c := range []struct {
		chunk  int
		addBOS bool
		calls  []string
	}{
		{0, false, []string{"reset", "last@0[0 1 2]", "last@3[3]", "all@4[4 5 6]", "all@7[7]", "all@8[8 9]"}},
		{1, true, []string{"reset", "last@0[99 0 1]", "last@3[2]", "all@4[3 4 5]", "all@7[6]", "all@8[7 8]"}},
	} {
		s := &fakePPLSession{}
		var st pplStats
		if err := scoreChunk(s, pl, tokens, c.chunk, c.addBOS, 99, nil, &st); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(s.calls, c.calls) {
			t.Errorf("chunk %d: calls %q, want %q", c.chunk, s.calls, c.calls)
		}
		var want pplStats
		for j := 5; j <= 8; j++ {
			row := make([]float64, fakeVocab)
			mx := math.Inf(-1)
			for v := range row {
				row[v] = float64(fakeLogit(j, v))
				mx = max(mx, row[v])
			}
			var sum float64
			for _, x := range row {
				sum += math.Exp(x - mx)
			}
			want.add(mx + math.Log(sum) - row[tokens[c.chunk*10+j+1]])
		}
		if st.count != 4 || math.Abs(st.nll-want.nll) > 1e-5 || math.Abs(st.nll2-want.nll2) > 1e-5 {
			t.Errorf("chunk %d: stats %+v, want %+v", c.chunk, st, want)
		}
	}
}

// TestPPLStats: the final estimate and error are llama-perplexity's, and
// C's printf spelling of NaN and infinities.
func TestPPLStats(t *testing.T) {
	var st pplStats
	for _, v := range []float64{1, 2, 3, 4} {
		st.add(v)
	}
	ppl, e, ok := st.final()
	// mean 2.5, mean of squares 7.5, variance 1.25, /3, sqrt.
	if want := math.Exp(2.5); !ok || math.Abs(ppl-want) > 1e-12 || math.Abs(e-want*math.Sqrt(1.25/3)) > 1e-12 {
		t.Errorf("final %v ± %v (%v)", ppl, e, ok)
	}
	var same pplStats
	same.add(2)
	same.add(2)
	if _, _, ok := same.final(); ok {
		t.Error("zero variance: want no error estimate")
	}
	for _, c := range []struct {
		v    float64
		want string
	}{{1.23456, "1.2346"}, {math.NaN(), "nan"}, {math.Inf(1), "inf"}, {math.Inf(-1), "-inf"}} {
		if got := cFloat(c.v, 4); got != c.want {
			t.Errorf("cFloat(%v) = %q, want %q", c.v, got, c.want)
		}
	}
}

// TestPerplexityMatchesLlamaCpp: on the held-out text of the trained-model
// data, glmrun's estimate is llama-perplexity's (build 11669,
// testdata/refs/NAME[.ARGS].llama-perplexity.txt, made by
// tools/perplexity-ref.sh) within 1% on the fast path and 0.1% with
// --exact. The fast path quantizes activations before the Q8_0 products as
// llama.cpp's CPU path does; --exact keeps them in float32, so it is the
// same model without that rounding. The trained tiny GLM-5 runs with each
// KV cache type against llama-perplexity with the same -ctk and -ctv
// (llama.cpp's default is f16, as glmrun's).
func TestPerplexityMatchesLlamaCpp(t *testing.T) {
	if testing.Short() {
		t.Skip("scores 20 chunks of 512 tokens several times")
	}
	type run struct {
		name string
		args []string
		rel  float64
	}
	for _, c := range []struct {
		model, ref string
		runs       []run
	}{
		{"glm5-mini.Q8_0", "glm5-mini.Q8_0", []run{{"fast", nil, 0.01}, {"exact", []string{"--exact"}, 0.001}}},
		// All seven 1- to 3-bit i-quants (tools/iq-formats.sh). --exact is
		// compared with llama.cpp on the file's dequantized F32 image: both
		// then multiply the same float32 weights with float32 activations.
		{"glm5-mini.IQ-mix", "glm5-mini.IQ-mix", []run{{"fast", nil, 0.01}}},
		{"glm5-mini.IQ-mix", "glm5-mini.IQ-mix.deq-F32", []run{{"exact", []string{"--exact"}, 0.001}}},
		{"glm5-tiny.Q8_0", "glm5-tiny.Q8_0", []run{{"f16", nil, 0.01}}},
		{"glm5-tiny.Q8_0", "glm5-tiny.Q8_0.ctk-f32-ctv-f32", []run{{"f32", []string{"-ctk", "f32"}, 0.01}}},
		{"glm5-tiny.Q8_0", "glm5-tiny.Q8_0.ctk-bf16-ctv-bf16", []run{{"bf16", []string{"-ctk", "bf16"}, 0.01}}},
		{"glm5-tiny.Q8_0", "glm5-tiny.Q8_0.ctk-q8_0-ctv-q8_0", []run{{"q8_0", []string{"-ctk", "q8_0", "-ctv", "q8_0"}, 0.01}}},
	} {
		ref, err := os.ReadFile(filepath.Join("..", "..", "testdata", "refs", c.ref+".llama-perplexity.txt"))
		if err != nil {
			t.Fatal(err)
		}
		want := finalPPL(t, string(ref))
		for _, tc := range c.runs {
			t.Run(c.model+"/"+tc.name, func(t *testing.T) {
				args := append([]string{"perplexity", "-m", filepath.Join("..", "..", "testdata", "models", c.model+".gguf"),
					"-f", filepath.Join("..", "..", "testdata", "tinyglm", "heldout.txt"), "-c", "512", "--chunks", "20"}, tc.args...)
				code, _, errs := runCLI(t, args...)
				if code != 0 {
					t.Fatalf("exit %d: %s", code, errs)
				}
				got := finalPPL(t, errs)
				if d := math.Abs(got-want) / want; d > tc.rel {
					t.Errorf("PPL %.4f, llama-perplexity %.4f: %.3f%% apart, want at most %.1f%%", got, want, 100*d, 100*tc.rel)
				} else {
					t.Logf("PPL %.4f, llama-perplexity %.4f (%.4f%% apart)", got, want, 100*d)
				}
			})
		}
	}
}

var finalRE = regexp.MustCompile(`Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)`)

func finalPPL(t *testing.T, s string) float64 {
	t.Helper()
	m := finalRE.FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no final estimate in %q", s[max(0, len(s)-400):])
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// glmDSAWidths are the synth flags of a model with GLM-5's attention and
// indexer widths (64 heads, kv_lora 512, rope 64; 32 indexer heads of 128,
// top_k 2048) and small everything else: 0.11 GB at Q8_0.
var glmDSAWidths = []string{"--arch", "glm-dsa", "-layers", "2", "-embd", "1024", "-ffn", "1024", "-expert-ffn", "256",
	"-experts", "4", "-experts-used", "2", "-vocab", "4096", "-q-lora", "512", "-ctx", "8192", "-mix", "Q8_0"}

// TestSparseAttentionMatchesLlamaCpp: at GLM-5's attention widths, one
// 6144-token chunk scores positions 3072-6143, each of which attends to the
// 2048 keys its indexer picks out of thousands; glmrun's perplexity is
// llama-perplexity's (testdata/refs/glm-dsa-widths.c-6144-chunks-1.llama-perplexity.txt,
// made by tools/perplexity-ref.sh) within the fast path's 1%. Attending
// to every key instead (the same file with top_k 8192) moves it by 2.5%.
func TestSparseAttentionMatchesLlamaCpp(t *testing.T) {
	if testing.Short() {
		t.Skip("a 6144-token prefill at GLM-5's attention widths")
	}
	path := filepath.Join(t.TempDir(), "glm-dsa-widths.gguf")
	if code, _, errs := runCLI(t, append([]string{"synth", "-o", path}, glmDSAWidths...)...); code != 0 {
		t.Fatalf("synth: exit %d: %s", code, errs)
	}
	ref, err := os.ReadFile(filepath.Join("..", "..", "testdata", "refs", "glm-dsa-widths.c-6144-chunks-1.llama-perplexity.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := finalPPL(t, string(ref))
	code, _, errs := runCLI(t, "perplexity", "-m", path, "-f", filepath.Join("..", "..", "testdata", "tinyglm", "heldout.txt"),
		"-c", "6144", "--chunks", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	got := finalPPL(t, errs)
	if d := math.Abs(got-want) / want; d > 0.01 {
		t.Errorf("PPL %.4f, llama-perplexity %.4f: %.3f%% apart, want at most 1%%", got, want, 100*d)
	} else {
		t.Logf("PPL %.4f, llama-perplexity %.4f (%.4f%% apart)", got, want, 100*d)
	}
}
