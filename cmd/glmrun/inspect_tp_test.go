package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestInspectTP: --tp N reports per-device weights and KV bytes that add
// up to the file's tensors; a device count that does not divide the heads
// is an error.
func TestInspectTP(t *testing.T) {
	for _, tc := range []struct {
		model    string
		tp       string
		expanded bool
	}{
		{"glm5-mini.Q8_0", "2", false},
		{"glm5-mini.Q8_0", "8", false},
		{"glm5-mini.Q4_K_M", "8", true},
	} {
		t.Run(tc.model+"/tp"+tc.tp, func(t *testing.T) {
			code, out, errOut := runCmd(t, "inspect", "--json", "--no-tensors", "--tp", tc.tp, testModels+tc.model+".gguf")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var rep struct {
				TP tpReport `json:"tensor_parallel"`
			}
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatal(err)
			}
			r := rep.TP
			if len(r.PerDevice) != r.Devices || r.HeadsPerDevice*r.Devices != 8 || r.ExpertsPerDevice*r.Devices != 16 {
				t.Fatalf("report %+v", r)
			}
			var sharded, expanded int64
			for _, d := range r.PerDevice {
				sharded += d.Sharded
				expanded += d.ExpandedF32
				if d.WeightBytes != d.Replicated+d.Sharded+d.Device0Only || d.KVPerToken != 3*2*(256+16+64) {
					t.Errorf("device %+v", d)
				}
			}
			d0 := r.PerDevice[0]
			if (expanded > 0) != tc.expanded {
				t.Errorf("%d bytes expanded to F32", expanded)
			}
			if !tc.expanded && sharded+d0.Replicated+d0.Device0Only != r.TotalBytes {
				t.Errorf("shards %d + replicated %d + device 0 %d != file %d", sharded, d0.Replicated, d0.Device0Only, r.TotalBytes)
			}
			_, text, _ := runCmd(t, "inspect", "--no-tensors", "--tp", tc.tp, testModels+tc.model+".gguf")
			if !strings.Contains(text, "tensor parallel over "+tc.tp+" devices") {
				t.Errorf("text output lacks the plan:\n%s", text)
			}
		})
	}
	code, _, errOut := runCmd(t, "inspect", "--tp", "3", testModels+"glm5-mini.Q8_0.gguf")
	if code != 1 || !strings.Contains(errOut, "3 devices do not divide the 8 attention heads") {
		t.Errorf("--tp 3: exit %d, %q", code, errOut)
	}
}
