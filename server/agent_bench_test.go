package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/glmrun/glmrun"
	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/model/chat"
	"github.com/glmrun/glmrun/model/synth"
)

// BenchmarkAgentPrefixCache replays an agent's 10-turn conversation (each
// turn sends the whole history: about 200 new tokens of user text a turn,
// 2,000 tokens of history by the end, a scripted 40-token reply) on the
// synthetic GLM-4.7-Flash reference shape (see BenchmarkDecode; 2 of its
// blocks here), with another client's request taking the only slot between
// turns, with the prefix cache and without it (cache_prompt false). It
// reports the prompt tokens run (prefill/turn) and the time to the first
// streamed token per turn, first and last turn.
//
//	go test ./server -run '^$' -bench AgentPrefixCache -benchtime 1x
func BenchmarkAgentPrefixCache(b *testing.B) {
	m := syntheticFlash(b)
	tok := m.Tokenizer()
	reply := strings.Repeat("The function reads the file, checks it and returns. ", 4)
	for _, cached := range []bool{true, false} {
		b.Run(fmt.Sprintf("prefix-cache=%v", cached), func(b *testing.B) {
			ts := newTestServer(b, func(c *Config) {
				c.Model, c.Template, c.Parallel, c.ContextSize = m, chat.GLM5(), 1, 4096
			}, scriptFor(tok, reply, "<|user|>"))
			var opts []option.RequestOption
			if !cached {
				opts = append(opts, option.WithJSONSet("cache_prompt", false))
			}
			for b.Loop() {
				var msgs []openai.ChatCompletionMessageParamUnion
				var prefill int64
				var first, last time.Duration
				for turn := 1; turn <= 10; turn++ {
					msgs = append(msgs, openai.UserMessage(fmt.Sprintf("Turn %d. %s", turn,
						strings.Repeat(fmt.Sprintf("Look at handler_%d.go, line %d, and the tests next to it. ", turn, 10*turn), 5))))
					p := openai.ChatCompletionNewParams{Model: testModelID, Messages: msgs,
						StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}}
					noThinking(&p)
					start := time.Now()
					s := ts.client.Chat.Completions.NewStreaming(context.Background(), p, opts...)
					var ttft time.Duration
					for s.Next() {
						ch := s.Current()
						if ttft == 0 && len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != "" {
							ttft = time.Since(start)
						}
						if ch.Usage.PromptTokens > 0 {
							prefill += ch.Usage.PromptTokens - ch.Usage.PromptTokensDetails.CachedTokens
						}
					}
					if err := s.Err(); err != nil {
						var apiErr *openai.Error
						if errors.As(err, &apiErr) {
							b.Fatalf("turn %d: %v: %s", turn, err, apiErr.RawJSON())
						}
						b.Fatal(err)
					}
					if turn == 1 {
						first = ttft
					}
					last = ttft
					msgs = append(msgs, openai.AssistantMessage(reply))
					o := openai.ChatCompletionNewParams{Model: testModelID, Messages: userMsg("Another client."), MaxTokens: openai.Int(1)}
					if _, err := ts.client.Chat.Completions.New(context.Background(), o); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(prefill)/10, "prefill/turn")
				b.ReportMetric(first.Seconds()*1000, "ms-ttft-turn1")
				b.ReportMetric(last.Seconds()*1000, "ms-ttft-turn10")
			}
		})
	}
}

// syntheticFlash writes and loads 2 blocks of the synthetic GLM-4.7-Flash
// reference shape (Q4_K_M, the test model's 151k vocabulary), with the fast
// products, as glmrun serve runs.
func syntheticFlash(b *testing.B) *glmrun.Model {
	tf, err := gguf.Open(testModelPath)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "glm47flash-synthetic.Q4_K_M.gguf")
	_, err = synth.Write(path, synth.Options{Shape: synth.Flash(2), Mix: synth.MixQ4KM, Seed: 1,
		Name: "glm47flash-synthetic", Tokenizer: tf})
	tf.Close()
	if err != nil {
		b.Fatal(err)
	}
	debug.FreeOSMemory()
	m, err := glmrun.Load(path, glmrun.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	return m
}

// BenchmarkStructuredDecode measures what the grammar mask costs a decode
// step: the same sampled replies on the synthetic GLM-4.7-Flash shape (2
// blocks, 151k vocabulary), free and constrained by a JSON schema (an
// object with a string and an integer), reporting milliseconds per token
// after the first (the prompt's prefill left out) and tokens per reply.
//
//	go test ./server -run '^$' -bench StructuredDecode -benchtime 1x
func BenchmarkStructuredDecode(b *testing.B) {
	m := syntheticFlash(b)
	const schema = `{"type": "object", "properties": {"note": {"type": "string"}, "count": {"type": "integer"}}, "required": ["note", "count"]}`
	for _, tc := range []struct{ name, format string }{
		{"free", ""},
		{"json_schema", `, "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": ` + schema + `}}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ts := newTestServer(b, func(c *Config) {
				c.Model, c.Template, c.Parallel, c.ContextSize = m, chat.GLM5(), 1, 1024
			}, nil)
			for b.Loop() {
				var perTok time.Duration
				tokens := 0
				for seed := 1; seed <= 4; seed++ {
					body := fmt.Sprintf(`{"messages": [{"role": "user", "content": "Write a note."}], "max_tokens": 48, "temperature": 1, "seed": %d, "stream": true, "stream_options": {"include_usage": true}, "chat_template_kwargs": {"enable_thinking": false}%s}`, seed, tc.format)
					d, n := streamTiming(b, ts, body)
					perTok += d
					tokens += n
				}
				b.ReportMetric(perTok.Seconds()*1000/float64(tokens-4), "ms/token")
				b.ReportMetric(float64(tokens)/4, "tokens/reply")
			}
		})
	}
}

// streamTiming posts a streamed chat request and returns the time from its
// first content chunk to its end and the number of tokens generated.
func streamTiming(b *testing.B, ts *testServer, body string) (time.Duration, int) {
	req, err := http.NewRequest(http.MethodPost, ts.url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		b.Fatalf("status %d: %s", resp.StatusCode, msg)
	}
	sc := bufio.NewScanner(resp.Body)
	var first time.Time
	n := 0
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: {") {
			continue
		}
		if first.IsZero() && strings.Contains(line, `"content"`) {
			first = time.Now()
		}
		if strings.Contains(line, `"completion_tokens"`) {
			var c struct {
				Usage struct {
					CompletionTokens int `json:"completion_tokens"`
				} `json:"usage"`
			}
			if err := json.Unmarshal([]byte(line[len("data: "):]), &c); err == nil {
				n = c.Usage.CompletionTokens
			}
		}
	}
	if first.IsZero() || n == 0 {
		b.Fatalf("no content or no usage in the stream of %s", body)
	}
	return time.Since(first), n
}
