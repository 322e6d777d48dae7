package server

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/glmrun/glmrun"
	"github.com/glmrun/glmrun/internal/testmodels"
	"github.com/glmrun/glmrun/model"
)

var invariantModels sync.Map // path -> *loaded

// invariantModel loads a model with batch-invariant products, so that a
// prompt run in other chunks gives the same bits.
func invariantModel(t *testing.T, path string) *loaded {
	t.Helper()
	if l, ok := invariantModels.Load(path); ok {
		return l.(*loaded)
	}
	l, err := loadModelFile(path, glmrun.Options{Threads: 1, BatchInvariant: true})
	if err != nil {
		t.Fatal(err)
	}
	invariantModels.Store(path, l)
	return l
}

// TestPrefixCacheAgent replays a conversation as an agent sends it (the
// whole history every turn) with another request between turns taking
// the only slot, so that only the prefix cache can serve the history:
// from turn 2 on the history is not run again (cached_tokens, within one
// block), and the reply's log-probabilities equal, bit for bit, those of a
// server that runs every prompt cold. On glm5-mini-sparse (top_k 8) the
// restored prefixes are far longer than top_k: the indexer keys come back
// with the latents.
func TestPrefixCacheAgent(t *testing.T) {
	const block = 8
	for _, name := range []string{"glm5-mini.Q8_0", "glm5-mini-sparse.Q8_0"} {
		t.Run(name, func(t *testing.T) {
			l := invariantModel(t, testmodels.Path(t, name))
			reply := func(turn int) string {
				return fmt.Sprintf("Here is what turn %d found: the answer is %d.", turn, 40+turn)
			}
			script := func(prompt []int32) []int32 {
				text, _ := l.tok.Decode(prompt, true)
				turn := strings.Count(text, "<|user|>")
				return scriptFor(l.tok, reply(turn), "<|user|>")(prompt)
			}
			cfg := func(c *Config) {
				c.Model, c.Parallel, c.ContextSize = l.g, 1, 1024
				c.PrefixCacheBlock = block
			}
			warm := newTestServer(t, cfg, script)
			cold := newTestServer(t, func(c *Config) { cfg(c); c.PrefixCacheBytes = -1 }, script)
			var msgs []openai.ChatCompletionMessageParamUnion
			prev := 0 // tokens the previous turn's slot held: prompt and fed reply
			for turn := 1; turn <= 4; turn++ {
				msgs = append(msgs, openai.UserMessage(fmt.Sprintf("Turn %d: look at file_%d.go and tell me what it does.", turn, turn)))
				p := openai.ChatCompletionNewParams{Model: testModelID, Messages: msgs, Temperature: openai.Float(0),
					Logprobs: openai.Bool(true), TopLogprobs: openai.Int(3)}
				noThinking(&p)
				w, err := warm.client.Chat.Completions.New(context.Background(), p)
				if err != nil {
					t.Fatal(err)
				}
				c, err := cold.client.Chat.Completions.New(context.Background(), p, option.WithJSONSet("cache_prompt", false))
				if err != nil {
					t.Fatal(err)
				}
				cached := int(w.Usage.PromptTokensDetails.CachedTokens)
				if turn > 1 && (cached < prev-block || cached%block != 0) {
					t.Fatalf("turn %d: %d of %d prompt tokens cached, want the %d of the history but the last block's rest",
						turn, cached, w.Usage.PromptTokens, prev)
				}
				if c.Usage.PromptTokensDetails.CachedTokens != 0 {
					t.Fatalf("turn %d: the cold server found %d tokens cached", turn, c.Usage.PromptTokensDetails.CachedTokens)
				}
				wl, cl := w.Choices[0].Logprobs.Content, c.Choices[0].Logprobs.Content
				if w.Choices[0].Message.Content != reply(turn) || len(wl) != len(cl) || len(wl) == 0 {
					t.Fatalf("turn %d: reply %q with %d logprobs, cold %d", turn, w.Choices[0].Message.Content, len(wl), len(cl))
				}
				for i := range wl {
					if math.Float64bits(wl[i].Logprob) != math.Float64bits(cl[i].Logprob) {
						t.Fatalf("turn %d token %d: logprob %v with the prefix cache, %v cold", turn, i, wl[i].Logprob, cl[i].Logprob)
					}
					for j := range wl[i].TopLogprobs {
						if wl[i].TopLogprobs[j].Token != cl[i].TopLogprobs[j].Token || wl[i].TopLogprobs[j].Logprob != cl[i].TopLogprobs[j].Logprob {
							t.Fatalf("turn %d token %d: top %d differs", turn, i, j)
						}
					}
				}
				prev = int(w.Usage.PromptTokens) + int(w.Usage.CompletionTokens) - 1 // the end token is not fed
				msgs = append(msgs, openai.AssistantMessage(reply(turn)))
				// Another client takes the only slot.
				o := openai.ChatCompletionNewParams{Model: testModelID, Messages: userMsg(fmt.Sprintf("Something else entirely, number %d.", turn)),
					MaxTokens: openai.Int(2)}
				if _, err := warm.client.Chat.Completions.New(context.Background(), o); err != nil {
					t.Fatal(err)
				}
			}
			m := metricsOf(t, warm)
			if m["glmrun_prefix_cache_bytes"] <= 0 || m["glmrun_prefix_cache_hits_total"] <= 0 {
				t.Fatalf("metrics: bytes %v, hits %v", m["glmrun_prefix_cache_bytes"], m["glmrun_prefix_cache_hits_total"])
			}
		})
	}
}

// TestPrefixCacheEviction: with room for a few blocks, older prompts' blocks
// go (counted in the metrics), the held bytes stay within the budget, and
// the most recent prompt is still found.
func TestPrefixCacheEviction(t *testing.T) {
	const block = 8
	l := testModel(t)
	probe, err := l.m.NewSession(model.SessionOptions{ContextSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	blockBytes := int64(4 * block * probe.CacheValues())
	probe.Close()
	budget := 12 * blockBytes
	ts := newTestServer(t, func(c *Config) { c.Parallel = 1; c.PrefixCacheBlock = block; c.PrefixCacheBytes = budget }, nil)
	prompt := func(i int) string {
		return fmt.Sprintf("Prompt %d: %s", i, strings.Repeat(fmt.Sprintf("w%d ", i), 20))
	}
	complete := func(i int) openai.CompletionUsage {
		c, err := ts.client.Completions.New(context.Background(), openai.CompletionNewParams{Model: testModelID,
			Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt(i))}, MaxTokens: openai.Int(1)})
		if err != nil {
			t.Fatal(err)
		}
		return c.Usage
	}
	for i := range 4 {
		complete(i)
	}
	m := metricsOf(t, ts)
	if m["glmrun_prefix_cache_evictions_total"] == 0 || m["glmrun_prefix_cache_bytes"] > float64(budget) {
		t.Fatalf("evictions %v, bytes %v (budget %d)", m["glmrun_prefix_cache_evictions_total"], m["glmrun_prefix_cache_bytes"], budget)
	}
	// The slot holds prompt 3; prompt 2's blocks come from the cache only
	// if they survived, and prompt 0's did not.
	complete(9) // takes the slot
	if u := complete(0); u.PromptTokensDetails.CachedTokens > block {
		t.Fatalf("prompt 0: %d tokens cached after its blocks were evicted", u.PromptTokensDetails.CachedTokens)
	}
	complete(9)
	if u := complete(0); u.PromptTokensDetails.CachedTokens < block {
		t.Fatalf("prompt 0 again, just cached: %d tokens cached", u.PromptTokensDetails.CachedTokens)
	}
}
