package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// tinyModel is the trained model, which has an MTP block worth drafting with.
const tinyModel = "../../testdata/models/glm5-tiny.Q8_0.gguf"

// TestGenerateSpecMTP: --spec-mtp prints plain decoding's text with greedy
// batch-invariant decoding, and reports the drafts on stderr.
func TestGenerateSpecMTP(t *testing.T) {
	args := []string{"-m", tinyModel, "-p", "1 2 3 4 5 6 7 8 9 10", "-n", "40", "--temp", "0", "--batch-invariant", "--ignore-eos"}
	code, plain, errs := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("plain: exit %d, %s", code, errs)
	}
	code, spec, errs := runCLI(t, append(args, "--spec-mtp", "3")...)
	if code != 0 {
		t.Fatalf("--spec-mtp 3: exit %d, %s", code, errs)
	}
	if spec != plain {
		t.Errorf("--spec-mtp 3 printed %q, plain decoding %q", spec, plain)
	}
	if !strings.Contains(errs, "speculative:") || !strings.Contains(errs, "drafted tokens accepted") {
		t.Errorf("stderr has no speculation line: %s", errs)
	}
	if code, _, errs := runCLI(t, "-m", "../../testdata/models/glm5-mini.Q8_0.gguf", "-p", "Hi", "--spec-mtp", "2"); code != 1 || !strings.Contains(errs, "nextn_predict_layers") {
		t.Errorf("--spec-mtp on a model without an MTP block: exit %d, %s", code, errs)
	}
}

// TestBenchSpecMTP: bench --spec-mtp reports the verification pass's cost
// per draft length and, on a model with an MTP block, tokens/s with and
// without speculation and the drafts kept.
func TestBenchSpecMTP(t *testing.T) {
	code, out, errs := runCLI(t, "bench", "-m", tinyModel, "-p", "8", "-n", "12", "-r", "1", "-t", "1", "--spec-mtp", "1,3", "--json")
	if code != 0 {
		t.Fatalf("exit %d, %s", code, errs)
	}
	var r benchResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v in %q", err, out)
	}
	if len(r.SpecK) != 2 || len(r.SpecVerify) != 2 || len(r.SpecGen) != 3 || r.SpecGen[0].K != 0 || r.SpecGen[2].K != 3 {
		t.Fatalf("spec fields: %+v", r)
	}
	for i, g := range r.SpecGen {
		if g.TokensPerS <= 0 || g.Generated != 12 || (i > 0 && (g.Drafted == 0 || g.Rounds == 0 || g.Accepted > g.Drafted)) {
			t.Errorf("generation %d: %+v", i, g)
		}
	}
	for _, v := range r.SpecVerify {
		if v <= 0 {
			t.Errorf("verification cost %v", r.SpecVerify)
		}
	}
	code, out, _ = runCLI(t, "bench", "-m", "../../testdata/models/glm5-mini.Q8_0.gguf", "-p", "8", "-n", "4", "-r", "1", "--spec-mtp", "2")
	if code != 0 || !strings.Contains(out, "pass / step") || strings.Contains(out, "speed-up") {
		t.Errorf("bench --spec-mtp on a model without an MTP block: exit %d, %q", code, out)
	}
}
