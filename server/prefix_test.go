package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestPrefixReuse: a request starts from the longest prefix of its prompt
// that a free slot's KV cache holds, reports it as OpenAI's
// usage.prompt_tokens_details.cached_tokens and in /metrics, and answers
// what it answers from a cold cache; cache_prompt false opts out.
func TestPrefixReuse(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.Parallel = 1 }, nil)
	base := make([]int32, 30)
	for i := range base {
		base[i] = int32(16 + i%10)
	}
	run := func(prompt []int32, cache *bool) (text string, cached int) {
		t.Helper()
		ids, _ := json.Marshal(prompt)
		body := fmt.Sprintf(`{"model": %q, "prompt": %s, "max_tokens": 4, "temperature": 0`, testModelID, ids)
		if cache != nil {
			body += fmt.Sprintf(`, "cache_prompt": %v`, *cache)
		}
		code, v := post(t, ts.url, "/v1/completions", body+"}", nil)
		if code != http.StatusOK {
			t.Fatalf("status %d: %v", code, v)
		}
		usage := v["usage"].(map[string]any)
		details, ok := usage["prompt_tokens_details"].(map[string]any)
		if !ok {
			t.Fatalf("usage %v has no prompt_tokens_details", usage)
		}
		choice := v["choices"].([]any)[0].(map[string]any)
		return choice["text"].(string), int(details["cached_tokens"].(float64))
	}
	no := false
	edited := append(append([]int32(nil), base...), 40, 41, 42, 43, 44)
	for _, c := range []struct {
		name   string
		prompt []int32
		cache  *bool
		want   int
	}{
		{"cold", base, nil, 0},
		{"same prompt: all but its last token", base, nil, len(base) - 1},
		{"extended prompt", edited, nil, len(base)},
		{"opted out", edited, &no, 0},
		{"diverging after 10 tokens", append(append([]int32(nil), base[:10]...), 50, 51, 52), nil, 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			text, cached := run(c.prompt, c.cache)
			if cached != c.want {
				t.Errorf("cached_tokens %d, want %d", cached, c.want)
			}
			cold, _ := run(c.prompt, &no)
			if text != cold {
				t.Errorf("text %q, from a cold cache %q", text, cold)
			}
		})
	}
	_, body := get(t, ts.url, "/metrics")
	for _, want := range []string{"glmrun_prefix_cache_queries_total", "glmrun_prefix_cache_hits_total"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	var hits int
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "glmrun_prefix_cache_hits_total "); ok {
			fmt.Sscan(v, &hits)
		}
	}
	// The hits of the runs that used the cache (the cold re-runs add none).
	if want := len(base) - 1 + len(base) + 10; hits != want {
		t.Errorf("prefix cache hits %d, want %d", hits, want)
	}
}
