package glmrun

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/internal/testmodels"
	"github.com/glmrun/glmrun/model/chat"
	"github.com/glmrun/glmrun/model/sample"
	"github.com/glmrun/glmrun/model/tokenizer"
	"github.com/glmrun/glmrun/tensor"
)

// goldenRef is the part of a llama.cpp logits ref the generation tests use.
type goldenRef struct {
	Prompt       []int32 `json:"prompt"`
	PromptLogits []struct {
		Top [][3]float64 `json:"top"` // [id, logit, logprob]
	} `json:"prompt_logits"`
	Greedy []struct {
		ID int32 `json:"id"`
	} `json:"greedy"`
}

func loadRef(t *testing.T, model string) goldenRef {
	t.Helper()
	var ref goldenRef
	if err := json.Unmarshal(testmodels.Ref(t, model+".deq-F32.P1"), &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Prompt) == 0 || len(ref.Greedy) == 0 {
		t.Fatalf("%s: ref without prompt or greedy ids", model)
	}
	return ref
}

func (r goldenRef) greedyIDs() []int32 {
	ids := make([]int32, len(r.Greedy))
	for i, g := range r.Greedy {
		ids[i] = g.ID
	}
	return ids
}

// models caches loaded test models for the whole test binary: they are
// read-only and shared by every test, as an application shares one Model.
var models = struct {
	sync.Mutex
	m map[string]*Model
}{m: map[string]*Model{}}

func testModel(t testing.TB, name string) *Model {
	t.Helper()
	models.Lock()
	defer models.Unlock()
	if m, ok := models.m[name]; ok {
		return m
	}
	m, err := Load(testmodels.Path(t, name), Options{ContextSize: 64, Exact: true})
	if err != nil {
		t.Fatal(err)
	}
	models.m[name] = m
	return m
}

// collect runs a generation and returns its ids, text and last error.
func collect(seq func(func(Token, error) bool)) (ids []int32, text string, last Token, err error) {
	var b strings.Builder
	for tok, e := range seq {
		if e != nil {
			err = e
			break
		}
		ids = append(ids, tok.ID)
		b.WriteString(tok.Text)
		last = tok
	}
	return ids, b.String(), last, err
}

func newSession(t testing.TB, m *Model, ctx int) *Session {
	t.Helper()
	s, err := m.NewSession(SessionOptions{ContextSize: ctx})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const mini = "glm5-mini.Q8_0"

var p1 = []int32{16, 220, 17, 220, 18, 220, 19, 220, 20, 220, 21, 220, 22, 220, 23, 220, 24, 220, 16, 15}

func TestGreedyGolden(t *testing.T) {
	for _, name := range []string{"glm5-mini.Q8_0", "ds2-mini.Q8_0", "glm5-dense.Q8_0"} {
		t.Run(name, func(t *testing.T) {
			ref := loadRef(t, name)
			m := testModel(t, name)
			s := newSession(t, m, 64)
			if err := s.PromptTokens(ref.Prompt); err != nil {
				t.Fatal(err)
			}
			want := ref.greedyIDs()
			ids, _, last, err := collect(s.Generate(context.Background(), GenerateOptions{
				MaxTokens: len(want), IgnoreEOS: true, TopLogprobs: 5,
			}))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids, want) {
				t.Errorf("greedy ids %v, llama.cpp %v", ids, want)
			}
			if last.Stop != StopLength {
				t.Errorf("stop %q, want %q", last.Stop, StopLength)
			}
			st := s.Stats()
			if st.PromptTokens != len(ref.Prompt) || st.Generated != len(want) || st.EvalTokens != len(want)-1 {
				t.Errorf("stats %+v", st)
			}
			if got := s.Tokens(); !slices.Equal(got, append(slices.Clone(ref.Prompt), want...)) {
				t.Errorf("sequence %v", got)
			}
		})
	}
}

// TestTensorParallel splits glm5-mini over 2 and 4 (virtual CPU) devices:
// the greedy ids stay llama.cpp's.
func TestTensorParallel(t *testing.T) {
	ref := loadRef(t, mini)
	for _, tp := range []int{2, 4} {
		m, err := Load(testmodels.Path(t, mini), Options{TensorParallel: tp, ContextSize: 64, Exact: true})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		s := newSession(t, m, 0)
		if err := s.PromptTokens(ref.Prompt); err != nil {
			t.Fatal(err)
		}
		ids, _, _, err := collect(s.Generate(context.Background(), GenerateOptions{MaxTokens: len(ref.Greedy), IgnoreEOS: true}))
		if err != nil || !slices.Equal(ids, ref.greedyIDs()) {
			t.Errorf("tp %d: ids %v (error %v), llama.cpp %v", tp, ids, err, ref.greedyIDs())
		}
	}
}

func TestLogprobsGolden(t *testing.T) {
	ref := loadRef(t, mini)
	s := newSession(t, testModel(t, mini), 64)
	if err := s.PromptTokens(ref.Prompt); err != nil {
		t.Fatal(err)
	}
	top := ref.PromptLogits[len(ref.PromptLogits)-1].Top
	for tok, err := range s.Generate(context.Background(), GenerateOptions{MaxTokens: 1, TopLogprobs: len(top)}) {
		if err != nil {
			t.Fatal(err)
		}
		if len(tok.Top) != len(top) {
			t.Fatalf("%d alternatives, want %d", len(tok.Top), len(top))
		}
		for i, r := range top {
			if tok.Top[i].ID != int32(r[0]) || math.Abs(tok.Top[i].Logprob-r[2]) > 1e-3 {
				t.Errorf("top %d: %+v, llama.cpp id %g logprob %g", i, tok.Top[i], r[0], r[2])
			}
		}
		if tok.ID != int32(top[0][0]) || math.Abs(tok.Logprob-top[0][2]) > 1e-3 {
			t.Errorf("chosen %d logprob %g, llama.cpp %g %g", tok.ID, tok.Logprob, top[0][0], top[0][2])
		}
	}
}

func TestSeed(t *testing.T) {
	m := testModel(t, mini)
	run := func(seed uint64) ([]int32, string) {
		s := newSession(t, m, 64)
		if err := s.PromptTokens(p1); err != nil {
			t.Fatal(err)
		}
		opts := GenerateOptions{SampleOptions: sample.DefaultOptions(seed), MaxTokens: 16, IgnoreEOS: true}
		ids, text, _, err := collect(s.Generate(context.Background(), opts))
		if err != nil {
			t.Fatal(err)
		}
		return ids, text
	}
	ids42, text42 := run(42)
	for range 2 {
		if ids, text := run(42); !slices.Equal(ids, ids42) || text != text42 {
			t.Fatalf("seed 42 gave %v then %v", ids42, ids)
		}
	}
	differ := 0
	for seed := uint64(1); seed <= 4; seed++ {
		if ids, _ := run(seed); !slices.Equal(ids, ids42) {
			differ++
		}
	}
	if differ == 0 {
		t.Errorf("seeds 1-4 all gave seed 42's %v", ids42)
	}
}

// TestStopString stops on a string that spans two generated tokens.
func TestStopString(t *testing.T) {
	m := testModel(t, mini)
	gen := func(opts GenerateOptions) ([]Token, error) {
		s := newSession(t, m, 64)
		if err := s.PromptTokens(p1); err != nil {
			t.Fatal(err)
		}
		var toks []Token
		for tok, err := range s.Generate(context.Background(), opts) {
			if err != nil {
				return toks, err
			}
			toks = append(toks, tok)
		}
		return toks, nil
	}
	full, err := gen(GenerateOptions{MaxTokens: 16, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	// Find two neighbouring tokens with text and stop on the last
	// character of the first and the first of the second.
	var text strings.Builder
	stop, k := "", -1
	for i := 1; i < len(full) && k < 0; i++ {
		a, b := full[i-1].Text, full[i].Text
		text.WriteString(a)
		if a != "" && b != "" && !strings.ContainsRune(a+b, '\uFFFD') {
			ra, rb := []rune(a), []rune(b)
			stop, k = string(ra[len(ra)-1])+string(rb[0]), i
		}
	}
	if k < 0 {
		t.Fatalf("no two neighbouring text tokens in %+v", full)
	}
	whole := ""
	for _, tok := range full {
		whole += tok.Text
	}
	want := whole[:strings.Index(whole, stop)]
	got, err := gen(GenerateOptions{MaxTokens: 16, IgnoreEOS: true, Stop: []string{stop}})
	if err != nil {
		t.Fatal(err)
	}
	var gotText strings.Builder
	for _, tok := range got {
		gotText.WriteString(tok.Text)
	}
	last := got[len(got)-1]
	if gotText.String() != want || last.Stop != StopString || len(got) > k+1 {
		t.Errorf("stop %q: %d tokens %q (stop %q), want %q within %d tokens", stop, len(got), gotText.String(), last.Stop, want, k+1)
	}
}

func TestStops(t *testing.T) {
	m := testModel(t, mini)
	eos := m.Tokenizer().EOS()
	for _, c := range []struct {
		name     string
		ctx      int
		opts     GenerateOptions
		n        int
		stop     StopReason
		wantLast int32 // -1: any
	}{
		{"max tokens", 64, GenerateOptions{MaxTokens: 5}, 5, StopLength, -1},
		{"eos", 64, GenerateOptions{MaxTokens: 5, SampleOptions: SampleOptions{LogitBias: map[int32]float32{eos: 1000}}}, 1, StopEOG, eos},
		{"eos sampled", 64, GenerateOptions{MaxTokens: 5, SampleOptions: SampleOptions{Temperature: 1, Seed: 3, LogitBias: map[int32]float32{eos: 1000}}}, 1, StopEOG, eos},
		{"ignore eos", 64, GenerateOptions{MaxTokens: 3, IgnoreEOS: true, SampleOptions: SampleOptions{LogitBias: map[int32]float32{eos: 1000}}}, 3, StopLength, eos},
		{"context full", 24, GenerateOptions{}, 4, StopContext, -1},
		{"prompt fills context", 20, GenerateOptions{}, 0, StopContext, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSession(t, m, c.ctx)
			if err := s.PromptTokens(p1); err != nil {
				t.Fatal(err)
			}
			ids, text, last, err := collect(s.Generate(context.Background(), c.opts))
			if err != nil {
				t.Fatal(err)
			}
			if len(ids) != c.n || s.Stats().Stop != c.stop || (c.n > 0 && last.Stop != c.stop) {
				t.Errorf("%d tokens %v ending %q (stats %q), want %d ending %q", len(ids), ids, last.Stop, s.Stats().Stop, c.n, c.stop)
			}
			if c.wantLast >= 0 && (len(ids) == 0 || ids[len(ids)-1] != c.wantLast) {
				t.Errorf("ids %v, want the last %d", ids, c.wantLast)
			}
			if c.stop == StopEOG && text != "" {
				t.Errorf("EOS emitted text %q", text)
			}
		})
	}
}

func TestCancel(t *testing.T) {
	m := testModel(t, mini)
	s := newSession(t, m, 64)
	if err := s.PromptTokens(p1); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	var gotErr error
	for _, err := range s.Generate(ctx, GenerateOptions{}) {
		if err != nil {
			gotErr = err
			break
		}
		if n++; n == 3 {
			cancel()
		}
	}
	if n != 3 || !errors.Is(gotErr, context.Canceled) || s.Stats().Stop != StopCanceled {
		t.Errorf("%d tokens, error %v, stop %q; want 3, context.Canceled", n, gotErr, s.Stats().Stop)
	}
	// Already canceled: nothing runs.
	pos := s.Cached()
	ids, _, _, err := collect(s.Generate(ctx, GenerateOptions{}))
	if len(ids) != 0 || !errors.Is(err, context.Canceled) || s.Cached() != pos {
		t.Errorf("canceled context: ids %v, error %v", ids, err)
	}
	// Breaking out of the loop.
	if err := s.PromptTokens(p1); err != nil {
		t.Fatal(err)
	}
	for range s.Generate(context.Background(), GenerateOptions{}) {
		break
	}
	if st := s.Stats(); st.Stop != StopBreak || st.Generated != 1 {
		t.Errorf("after break: %+v", st)
	}
}

// TestConcurrentSessions runs sessions on one model from several
// goroutines (run with -race) and checks each against a sequential run.
func TestConcurrentSessions(t *testing.T) {
	m := testModel(t, mini)
	prompts := [][]int32{p1, p1[:7], {963, 39, 72, 964}, p1[5:]}
	gen := func(i int) ([]int32, error) {
		s, err := m.NewSession(SessionOptions{ContextSize: 48})
		if err != nil {
			return nil, err
		}
		if err := s.PromptTokens(prompts[i]); err != nil {
			return nil, err
		}
		opts := GenerateOptions{SampleOptions: sample.DefaultOptions(uint64(i)), MaxTokens: 8, IgnoreEOS: true}
		ids, _, _, err := collect(s.Generate(context.Background(), opts))
		return ids, err
	}
	want := make([][]int32, len(prompts))
	for i := range prompts {
		ids, err := gen(i)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = ids
	}
	got := make([][]int32, len(prompts))
	errs := make([]error, len(prompts))
	var wg sync.WaitGroup
	for i := range prompts {
		wg.Go(func() { got[i], errs[i] = gen(i) })
	}
	wg.Wait()
	for i := range prompts {
		if errs[i] != nil || !slices.Equal(got[i], want[i]) {
			t.Errorf("session %d: %v (error %v), sequential %v", i, got[i], errs[i], want[i])
		}
	}
}

// chatCase is one conversation of the chat-template ref.
type chatCase struct {
	Messages  []chat.Message  `json:"messages"`
	Kwargs    map[string]bool `json:"chat_template_kwargs"`
	Prompt    string          `json:"prompt"`
	PromptIDs []int32         `json:"prompt_ids"`
	Tools     json.RawMessage `json:"tools"`
}

func TestChatTemplate(t *testing.T) {
	var ref struct {
		Cases []chatCase `json:"cases"`
	}
	if err := json.Unmarshal(testmodels.Ref(t, "glm5-mini.chat-template-cases"), &ref); err != nil {
		t.Fatal(err)
	}
	m := testModel(t, mini)
	n := 0
	for i, c := range ref.Cases {
		if len(c.Tools) > 0 || len(c.PromptIDs) > 40 {
			continue
		}
		if _, ok := c.Kwargs["enable_thinking"]; len(c.Kwargs) > 1 || len(c.Kwargs) == 1 && !ok {
			continue
		}
		n++
		opts := ChatOptions{GenerateOptions: GenerateOptions{MaxTokens: 2}}
		if e, ok := c.Kwargs["enable_thinking"]; ok && !e {
			opts.NoThinking = true
		}
		prompt, err := m.RenderChat(c.Messages, opts)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		direct, err := m.Template().Render(c.Messages, chat.Options{AddGenerationPrompt: true, NoThinking: opts.NoThinking})
		if err != nil {
			t.Fatal(err)
		}
		if prompt != c.Prompt || prompt != direct {
			t.Errorf("case %d: rendered %q, chat.Render %q, llama.cpp %q", i, prompt, direct, c.Prompt)
		}
		s := newSession(t, m, 64)
		ids, _, _, err := collect(s.Chat(context.Background(), c.Messages, opts))
		if err != nil {
			t.Fatal(err)
		}
		if seq := s.Tokens(); len(ids) != 2 || !slices.Equal(seq[:len(seq)-2], c.PromptIDs) {
			t.Errorf("case %d: sequence %v, want llama.cpp's prompt %v and 2 tokens", i, seq, c.PromptIDs)
		}
	}
	if n < 2 {
		t.Fatalf("only %d chat cases used", n)
	}
}

// TestChatTurns holds a conversation through Chat alone: the model's reply
// is forced to end at once (an EOG token, <|user|>), so the next rendered
// turn extends the cached tokens and only its new tokens are run.
func TestChatTurns(t *testing.T) {
	m := testModel(t, mini)
	s := newSession(t, m, 128)
	opts := ChatOptions{GenerateOptions: GenerateOptions{MaxTokens: 4}, NoThinking: true}
	opts.LogitBias = map[int32]float32{m.Tokenizer().EOT(): 1000}
	msgs := []Message{{Role: "user", Content: "Hi"}}
	chatTurn := func(turn int) {
		t.Helper()
		ids, text, last, err := collect(s.Chat(context.Background(), msgs, opts))
		if err != nil || len(ids) != 1 || last.Stop != StopEOG || text != "" {
			t.Fatalf("turn %d: ids %v, text %q, stop %q, error %v", turn, ids, text, last.Stop, err)
		}
	}
	chatTurn(0)
	for turn, user := range []string{"Again", "And again"} {
		msgs = append(msgs, Message{Role: "assistant", Content: ""}, Message{Role: "user", Content: user})
		prompt, err := m.RenderChat(msgs, opts)
		if err != nil {
			t.Fatal(err)
		}
		want := len(m.Tokenizer().Encode(prompt, false, true)) - s.Cached()
		chatTurn(turn + 1)
		if got := s.Stats().PromptTokens; got != want || want > 8 {
			t.Errorf("turn %d: ran %d prompt tokens, want the %d new ones", turn+1, got, want)
		}
	}
}

// TestChatReuse checks that the second turn of a conversation runs only its
// new tokens and continues as a fresh session would.
func TestChatReuse(t *testing.T) {
	m := testModel(t, mini)
	opts := ChatOptions{GenerateOptions: GenerateOptions{MaxTokens: 6, IgnoreEOS: true}, NoThinking: true}
	msgs := []Message{{Role: "user", Content: "Hi"}}
	s := newSession(t, m, 128)
	_, reply, _, err := collect(s.Chat(context.Background(), msgs, opts))
	if err != nil {
		t.Fatal(err)
	}
	before, cached := s.Tokens(), s.Cached()
	if cached != len(before)-1 {
		t.Errorf("after a reply the cache holds %d of %d tokens, want all but the last", cached, len(before))
	}
	// The model's tokens become the assistant turn; render the next turn
	// from them exactly (the template text of the reply re-tokenizes to the
	// same ids only by luck with random weights, so append them directly).
	turn2 := append(slices.Clone(before), m.Tokenize("<|user|>Again<|assistant|></think>")...)
	if err := s.PromptTokens(turn2); err != nil {
		t.Fatal(err)
	}
	ids2, _, _, err := collect(s.Generate(context.Background(), opts.GenerateOptions))
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.PromptTokens != len(turn2)-cached {
		t.Errorf("second turn ran %d prompt tokens, want the %d new ones", st.PromptTokens, len(turn2)-cached)
	}
	fresh := newSession(t, m, 128)
	if err := fresh.PromptTokens(turn2); err != nil {
		t.Fatal(err)
	}
	ids3, _, _, err := collect(fresh.Generate(context.Background(), opts.GenerateOptions))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids2, ids3) {
		t.Errorf("second turn %v, fresh session %v (reply %q)", ids2, ids3, reply)
	}
	// A prompt that diverges restarts the cache and still works.
	if err := s.PromptTokens(p1); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := collect(s.Generate(context.Background(), GenerateOptions{MaxTokens: 1})); err != nil || s.Stats().PromptTokens != len(p1) {
		t.Errorf("diverging prompt: error %v, stats %+v", err, s.Stats())
	}
}

func TestProgress(t *testing.T) {
	var calls [][2]int64
	m, err := Load(testmodels.Path(t, mini), Options{Progress: func(done, total int64) {
		calls = append(calls, [2]int64{done, total})
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if len(calls) < 2 || calls[0][0] != 0 {
		t.Fatalf("progress calls %v", calls)
	}
	last := calls[len(calls)-1]
	if last[0] != last[1] || last[1] < 10_000_000 {
		t.Errorf("last progress %v, want done = total = the tensor bytes (~10 MiB)", last)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	src := testmodels.Path(t, mini)
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriterFrom(f)
	for _, kv := range f.KVs {
		if strings.HasPrefix(kv.Key, "tokenizer.") {
			w.RemoveKV(kv.Key)
		}
	}
	noTok := filepath.Join(dir, "notok.gguf")
	if err := w.WriteFile(noTok); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.gguf")
	for _, c := range []struct {
		name string
		path string
		opts Options
		want []string
		is   error
	}{
		{"missing file", missing, Options{}, []string{"missing.gguf"}, nil},
		{"no tokenizer", noTok, Options{}, []string{"notok.gguf", "no tokenizer"}, tokenizer.ErrNoTokenizer},
		{"cuda", src, Options{Backend: "cuda"}, []string{"cuda", "no CUDA driver"}, nil},
		{"unknown backend", src, Options{Backend: "tpu"}, []string{`"tpu"`}, nil},
		{"tensor parallel not dividing", src, Options{TensorParallel: 3}, []string{"3 devices", "8 attention heads"}, nil},
		{"negative tensor parallel", src, Options{TensorParallel: -1}, []string{"tensor parallelism -1"}, nil},
		{"negative context", src, Options{ContextSize: -1}, []string{"context size"}, nil},
		{"unknown cache type", src, Options{CacheType: "q4_0"}, []string{"Options.CacheType", `"q4_0"`}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.opts.Backend == "cuda" { // no driver, even on a GPU machine
				t.Setenv("GLMRUN_LIBCUDA", filepath.Join(dir, "no-libcuda.so.1"))
			}
			m, err := Load(c.path, c.opts)
			if err == nil {
				m.Close()
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("error %v is not %v", err, c.is)
			}
		})
	}
}

func TestSessionErrors(t *testing.T) {
	m := testModel(t, mini)
	s := newSession(t, m, 16)
	if err := s.PromptTokens(p1); !errors.Is(err, ErrContextFull) || !strings.Contains(err.Error(), "20 tokens") {
		t.Errorf("prompt longer than the context: %v", err)
	}
	if err := s.PromptTokens([]int32{1, 5000}); err == nil || !strings.Contains(err.Error(), "5000") {
		t.Errorf("token outside the vocabulary: %v", err)
	}
	if _, _, _, err := collect(s.Generate(context.Background(), GenerateOptions{})); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("generate from nothing: %v", err)
	}
	if err := s.PromptTokens(p1[:10]); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendTokens(p1[:10]); !errors.Is(err, ErrContextFull) {
		t.Errorf("append past the context: %v", err)
	}
	if _, err := m.NewSession(SessionOptions{ContextSize: -2}); err == nil {
		t.Error("negative context size accepted")
	}
}

func TestPromptText(t *testing.T) {
	m := testModel(t, mini)
	s := newSession(t, m, 64)
	if err := s.Prompt("1 2 3 4 5 6 7 8 9 10"); err != nil {
		t.Fatal(err)
	}
	if got := s.Tokens(); !slices.Equal(got, p1) {
		t.Errorf("Prompt tokens %v, want %v", got, p1)
	}
	if err := s.Append(" 1"); err != nil {
		t.Fatal(err)
	}
	if got := s.Tokens(); len(got) != len(p1)+2 {
		t.Errorf("after Append: %v", got)
	}
	text, err := m.Detokenize(s.Tokens())
	if err != nil || text != "1 2 3 4 5 6 7 8 9 10 1" {
		t.Errorf("Detokenize: %q, %v", text, err)
	}
}

// TestCacheType: a Model's sessions store their KV cache in
// Options.CacheType, f16 by default (llama.cpp's), and its size follows.
func TestCacheType(t *testing.T) {
	sizes := map[string]int64{}
	for _, name := range []string{"", "f32", "f16", "bf16"} {
		m, err := Load(testmodels.Path(t, mini), Options{CacheType: name, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		s, err := m.NewSession(SessionOptions{ContextSize: 64})
		if err != nil {
			t.Fatal(err)
		}
		sizes[name] = s.CacheBytes()
		if err := s.PromptTokens([]int32{1, 2, 3}); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, err := range s.Generate(context.Background(), GenerateOptions{MaxTokens: 4}) {
			if err != nil {
				t.Fatalf("cache type %q: %v", name, err)
			}
			n++
		}
		if n == 0 {
			t.Errorf("cache type %q: no tokens", name)
		}
		m.Close()
	}
	if sizes[""] != sizes["f16"] || sizes["f16"] != sizes["bf16"] || 2*sizes["f16"] != sizes["f32"] {
		t.Errorf("cache bytes %v: want f16 by default, half of f32's", sizes)
	}
}

// TestRepackedBytes: a fast-path model reports the weights its CPU device
// repacked (where the CPU has packed kernels for the bundled Q8_0 file),
// and NoRepack, BatchInvariant and Exact load none.
func TestRepackedBytes(t *testing.T) {
	_, packs := tensor.PackedGemm(tensor.Q8_0)
	for _, tc := range []struct {
		name string
		opts Options
		want bool
	}{
		{"default", Options{Threads: 1}, packs},
		{"no-repack", Options{Threads: 1, NoRepack: true}, false},
		{"batch-invariant", Options{Threads: 1, BatchInvariant: true}, false},
		{"exact", Options{Threads: 1, Exact: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Load(testmodels.Path(t, mini), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if got := m.RepackedBytes() > 0; got != tc.want {
				t.Errorf("RepackedBytes %d, want repacked %v", m.RepackedBytes(), tc.want)
			}
		})
	}
}
