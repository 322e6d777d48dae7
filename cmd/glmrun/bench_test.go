package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestSynthBench: glmrun synth writes a small model of the reference
// shape's kind, and glmrun bench measures it (and the bundled model):
// the JSON has positive speeds, one sample per repetition and the peak
// RSS; the table names both tests. Bad flags are usage errors.
func TestSynthBench(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	code, out, errs := runCLI(t, "synth", "-o", path, "-layers", "2", "-embd", "256", "-vocab", "2048",
		"-heads", "4", "-q-lora", "256", "-kv-lora", "256", "-nope", "64", "-rope", "32", "-v", "64",
		"-ffn", "512", "-expert-ffn", "256", "-experts", "8", "-experts-used", "2",
		"-tokenizer", "../../testdata/models/glm5-mini.Q8_0.gguf")
	if code != 0 || !strings.Contains(out, "deepseek2 2 blocks, Q4_K_M") {
		t.Fatalf("synth: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	// The GLM-5 kind: glm-dsa with the indexer, top_k below the bench's
	// prompt so that attention is sparse.
	dsa := filepath.Join(t.TempDir(), "tiny-dsa.gguf")
	code, out, errs = runCLI(t, "synth", "-arch", "glm-dsa", "-o", dsa, "-layers", "2", "-embd", "256", "-vocab", "2048",
		"-heads", "4", "-q-lora", "256", "-kv-lora", "256", "-nope", "64", "-rope", "32", "-v", "64",
		"-ffn", "512", "-expert-ffn", "256", "-experts", "8", "-experts-used", "2",
		"-indexer-heads", "4", "-indexer-dim", "64", "-indexer-top-k", "8",
		"-tokenizer", "../../testdata/models/glm5-mini.Q8_0.gguf")
	if code != 0 || !strings.Contains(out, "glm-dsa 2 blocks, Q4_K_M") {
		t.Fatalf("synth -arch glm-dsa: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	for _, m := range []string{path, dsa, "../../testdata/models/glm5-mini.Q4_K_M.gguf"} {
		code, out, errs = runCLI(t, "bench", "-m", m, "-p", "16", "-n", "4", "-t", "2", "-r", "2", "--json")
		if code != 0 {
			t.Fatalf("bench %s: exit %d, %s", m, code, errs)
		}
		var r benchResult
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("bench %s: %v in %q", m, err, out)
		}
		if r.PPTokensPerS <= 0 || r.TGTokensPerS <= 0 || len(r.PPSamples) != 2 || len(r.TGSamples) != 2 ||
			r.Threads != 2 || r.PeakRSSBytes <= 0 || r.Model != filepath.Base(m) || r.Path != "fast" {
			t.Errorf("bench %s: %+v", m, r)
		}
	}
	code, out, _ = runCLI(t, "bench", "-m", path, "-p", "8", "-n", "2", "-r", "1", "--exact")
	if code != 0 || !strings.Contains(out, "| pp8 |") || !strings.Contains(out, "| tg2 |") || !strings.Contains(out, "exact") {
		t.Errorf("bench table: exit %d, %q", code, out)
	}
	// Depth: the tests run after -d tokens already in the context, which
	// must fit it with the tests' tokens.
	code, out, errs = runCLI(t, "bench", "-m", path, "-p", "8", "-n", "2", "-d", "20", "-r", "2")
	if code != 0 || !strings.Contains(out, "| pp8 @ d20 |") || !strings.Contains(out, "| tg2 @ d20 |") {
		t.Errorf("bench -d 20: exit %d, %q, %s", code, out, errs)
	}
	code, out, errs = runCLI(t, "bench", "-m", path, "-p", "8", "-n", "2", "-d", "20", "-r", "1", "--json")
	var r benchResult
	if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil || r.NDepth != 20 || r.Depth != 20 || r.PPTokensPerS <= 0 || r.TGTokensPerS <= 0 {
		t.Errorf("bench -d 20 --json: exit %d, %v, %+v, %s", code, err, r, errs)
	}
	// Several depths: one table row per test and depth, a JSON list.
	code, out, errs = runCLI(t, "bench", "-m", path, "-p", "8", "-n", "2", "-d", "20,0", "-r", "1")
	if code != 0 || !strings.Contains(out, "| pp8 |") || !strings.Contains(out, "| tg2 @ d20 |") {
		t.Errorf("bench -d 20,0: exit %d, %q, %s", code, out, errs)
	}
	code, out, errs = runCLI(t, "bench", "-m", path, "-p", "8", "-n", "2", "-d", "0,20", "-r", "1", "--json")
	var rs []benchResult
	if err := json.Unmarshal([]byte(out), &rs); code != 0 || err != nil || len(rs) != 2 || rs[0].NDepth != 0 || rs[1].NDepth != 20 || rs[1].Depth != 20 ||
		rs[1].PPTokensPerS <= 0 || rs[1].TGTokensPerS <= 0 || len(rs[1].PPSamples) != 1 {
		t.Errorf("bench -d 0,20 --json: exit %d, %v, %+v, %s", code, err, rs, errs)
	}
	if code, _, errs := runCLI(t, "bench", "-m", path, "-d", "0,20", "--spec-mtp", "2"); code != 2 || !strings.Contains(errs, "want one") {
		t.Errorf("bench --spec-mtp with two depths: exit %d, %s", code, errs)
	}
	if code, _, errs := runCLI(t, "bench", "-m", "../../testdata/models/glm5-mini.Q8_0.gguf", "-p", "8", "-n", "2", "-d", "5000"); code != 1 || !strings.Contains(errs, "context size 5010") {
		t.Errorf("bench -d beyond the training context: exit %d, %s", code, errs)
	}
	if code, _, errs := runCLI(t, "synth", "-o", path, "-arch", "glm-dsa", "-indexer-dim", "16"); code != 1 || !strings.Contains(errs, "bad indexer") {
		t.Errorf("synth with an indexer narrower than the rope dims: exit %d, %s", code, errs)
	}
	for _, args := range [][]string{{"bench", "-r", "0"}, {"bench", "-d", "-1"}, {"bench", "-p", "0", "-n", "0"}, {"synth"}, {"synth", "-o", path, "-mix", "Q2_K"},
		{"synth", "-o", path, "-arch", "llama"}} {
		if code, _, _ := runCLI(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
