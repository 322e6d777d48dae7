package server

import (
	"fmt"
	"sync"
	"testing"

	"github.com/glmrun/glmrun"
)

// tinyPath is the trained model, whose MTP block drafts tokens worth keeping.
const tinyPath = "../testdata/models/glm5-tiny.Q8_0.gguf"

// tinyServer starts a server on the trained model with batch-invariant
// products, drafting specDraft tokens per step (0: no MTP block loaded).
func tinyServer(t *testing.T, specDraft int) *testServer {
	t.Helper()
	l, err := loadModelFile(tinyPath, glmrun.Options{Threads: 1, BatchInvariant: true, SpecDraft: specDraft})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.g.Close() }) // registered first, so it runs after the server's Close
	return newTestServer(t, func(c *Config) {
		c.Model = l.g
		c.SpecDraft = specDraft
		c.Parallel = 4
	}, nil)
}

// TestServerSpeculative sends greedy chat requests at once to a server that
// speculates, half of them with speculation turned off per request
// (speculative.n_max 0), so that speculating and plainly decoding
// sequences share the scheduler; every reply equals the one a server
// without speculation gives, and the drafts show in /metrics.
func TestServerSpeculative(t *testing.T) {
	plain, spec := tinyServer(t, 0), tinyServer(t, 3)
	const n = 8
	bodies := make([]string, n)
	for i := range bodies {
		nmax := ""
		if i%2 == 1 {
			nmax = `, "speculative.n_max": 0`
		}
		bodies[i] = fmt.Sprintf(`{"model": %q, "messages": [{"role": "user", "content": "What is %d + %d?"}], "temperature": 0, "max_tokens": %d%s}`,
			testModelID, 100+i*37, 20+i*11, 30+i*5, nmax)
	}
	type result struct {
		status int
		body   map[string]any
	}
	run := func(ts *testServer, concurrent bool) []result {
		out := make([]result, n)
		var wg sync.WaitGroup
		for i := range bodies {
			f := func() {
				s, b := post(t, ts.url, "/v1/chat/completions", bodies[i], nil)
				out[i] = result{s, b}
			}
			if concurrent {
				wg.Go(f)
			} else {
				f()
			}
		}
		wg.Wait()
		return out
	}
	want, got := run(plain, false), run(spec, true)
	for i := range want {
		w, g := want[i], got[i]
		if w.status != 200 || g.status != 200 {
			t.Fatalf("request %d: status %d without speculation, %d with", i, w.status, g.status)
		}
		wm := w.body["choices"].([]any)[0].(map[string]any)["message"]
		gm := g.body["choices"].([]any)[0].(map[string]any)["message"]
		// (cached_tokens differ: the requests run one by one or at once.)
		wu, gu := w.body["usage"].(map[string]any)["completion_tokens"], g.body["usage"].(map[string]any)["completion_tokens"]
		if fmt.Sprint(wm) != fmt.Sprint(gm) || wu != gu {
			t.Errorf("request %d: with speculation %v (%v tokens), without %v (%v tokens)", i, gm, gu, wm, wu)
		}
	}
	m := metricsOf(t, spec)
	drafted, kept := m["glmrun_spec_draft_tokens_total"], m["glmrun_spec_draft_tokens_accepted_total"]
	if drafted <= 0 || kept <= 0 || kept > drafted {
		t.Errorf("metrics: %g drafted, %g kept", drafted, kept)
	}
	t.Logf("%g drafted, %g kept (%.0f%%)", drafted, kept, 100*kept/drafted)
	if d := metricsOf(t, plain)["glmrun_spec_draft_tokens_total"]; d != 0 {
		t.Errorf("a server without speculation drafted %g tokens", d)
	}
	// Bad values are refused, naming the field.
	status, body := post(t, spec.url, "/v1/chat/completions",
		fmt.Sprintf(`{"model": %q, "messages": [{"role": "user", "content": "Hi"}], "speculative.n_max": -1}`, testModelID), nil)
	if status != 400 || fmt.Sprint(body["error"].(map[string]any)["param"]) != "speculative.n_max" {
		t.Errorf("speculative.n_max -1: %d %v", status, body)
	}
}
