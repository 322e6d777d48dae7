package main

import (
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/model/dump"
)

// TestTensorParallelCLI: glmrun logits --tp 2 gives tp 1's logits, and a
// --tp 2 dump holds the per-device partial sums next to the reduced
// tensors and still matches llama.cpp.
func TestTensorParallelCLI(t *testing.T) {
	logits := func(tp string) [][]float32 {
		var out logitsOutput
		if err := json.Unmarshal([]byte(runCode(t, 0, "logits", "-ctk", "f32", "-m", glm5Mini, "--tokens", promptP1(t), "--tp", tp)), &out); err != nil {
			t.Fatal(err)
		}
		return out.Logits
	}
	one, two := logits("1"), logits("2")
	var worst float64
	for i := range one {
		for j := range one[i] {
			worst = max(worst, math.Abs(float64(one[i][j]-two[i][j])))
		}
	}
	if worst > 1e-4 {
		t.Errorf("logits --tp 2 differ from --tp 1 by %g", worst)
	}

	dir := filepath.Join(t.TempDir(), "dump")
	runCode(t, 0, "dump", "-ctk", "f32", "-m", glm5Mini, "--tokens", promptP1(t), "--tp", "2", "-o", dir)
	d, err := dump.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"blk.0.attn_out.shard0", "blk.0.attn_out.shard1", "blk.2.ffn_out.shard1"} {
		if _, ok := d.Lookup(name); !ok {
			t.Errorf("dump lacks %s", name)
		}
	}
	out := runCode(t, 0, "diff", "--atol", "1e-3", "--rtol", "0", dir, filepath.Join(hiddenRefs, "glm5-mini.Q8_0.deq-F32.P1"))
	if !strings.HasPrefix(lastLine(out), "no divergence") {
		t.Errorf("diff: %s", lastLine(out))
	}
	if code, _, errOut := runCmd(t, "logits", "-m", glm5Mini, "--tokens", "1", "--tp", "0"); code != 2 || !strings.Contains(errOut, "--tp 0") {
		t.Errorf("--tp 0: exit %d, %q", code, errOut)
	}
}
