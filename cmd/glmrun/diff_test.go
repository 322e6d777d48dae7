package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/model/dump"
)

const hiddenRefs = "../../testdata/refs/hidden"

// writeSynthDump writes a small glmrun dump of three layers; bump is added
// to element 3 of the tensor named perturb.
func writeSynthDump(t *testing.T, perturb string, bump float32) string {
	t.Helper()
	dir := t.TempDir()
	w, err := dump.Create(dir, dump.Info{Model: "synth", Tokens: []int{1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"embd"}
	for l := range 3 {
		for _, n := range []string{"attn_out", "ffn_out", "out"} {
			names = append(names, "blk."+string(rune('0'+l))+"."+n)
		}
	}
	names = append(names, "result_norm")
	for k, n := range names {
		data := make([]float32, 2*8)
		for i := range data {
			data[i] = float32(k) + float32(i)/16
		}
		if n == perturb {
			data[3] += bump
		}
		layer := (k+2)/3 - 1 // embd, then three names per layer
		if n == "result_norm" {
			layer = -1
		}
		w.Hook(n, layer, []int{2, 8}, data)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func TestDiff(t *testing.T) {
	base := writeSynthDump(t, "", 0)
	faulty := writeSynthDump(t, "blk.1.ffn_out", 0.1)
	small := writeSynthDump(t, "blk.1.ffn_out", 1e-4)
	other := t.TempDir()
	w, err := dump.Create(other, dump.Info{})
	if err != nil {
		t.Fatal(err)
	}
	w.Hook("unrelated", -1, []int{1}, []float32{1})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	seq := filepath.Join(hiddenRefs, "glm5-mini.Q8_0.deq-F32.P1.seq")
	batch := filepath.Join(hiddenRefs, "glm5-mini.Q8_0.deq-F32.P1")
	tests := []struct {
		name     string
		args     []string
		code     int
		last     string // the final line of stdout, or "" when none is expected
		stderrIs string
	}{
		{"identical", []string{base, base}, 0, "no divergence (11 tensors compared)", ""},
		{"fault", []string{base, faulty}, 1, "first divergence: blk.1.ffn_out (max abs 0.1 > 0.00", "first divergence at blk.1.ffn_out"},
		{"below atol", []string{base, small}, 0, "no divergence", ""},
		{"tighter atol, flags after the dirs", []string{base, small, "--atol", "1e-5", "--rtol", "0"}, 1, "first divergence: blk.1.ffn_out", ""},
		{"llama.cpp seq vs batch", []string{seq, batch}, 0, "no divergence (5 tensors compared)", ""},
		{"llama.cpp vs synthetic: shapes differ", []string{batch, base}, 1, "first divergence: embd (shape [20,256] vs [2,8])", ""},
		{"no names in common", []string{base, other}, 2, "", "no tensor in common"},
		{"one dir", []string{base}, 2, "", "want two dump directories"},
		{"three dirs", []string{base, base, base}, 2, "", "want two"},
		{"bad flag", []string{"--nope", base, base}, 2, "", "flag provided but not defined"},
		{"negative atol", []string{"--atol", "-1", base, base}, 2, "", "--atol -1"},
		{"missing dir", []string{base, filepath.Join(base, "nope")}, 2, "", "no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"diff"}, tc.args...), &stdout, &stderr)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout.String(), stderr.String())
			}
			if tc.last != "" && !strings.HasPrefix(lastLine(stdout.String()), tc.last) {
				t.Errorf("last line %q, want prefix %q", lastLine(stdout.String()), tc.last)
			}
			if tc.stderrIs != "" && !strings.Contains(stderr.String(), tc.stderrIs) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tc.stderrIs)
			}
		})
	}
}

func TestDiffTable(t *testing.T) {
	var stdout, stderr bytes.Buffer
	base := writeSynthDump(t, "", 0)
	faulty := writeSynthDump(t, "blk.2.attn_out", 2)
	if code := run([]string{"diff", base, faulty}, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	rows := map[string]string{}
	for _, line := range strings.Split(stdout.String(), "\n") {
		if f := strings.Fields(line); len(f) == 6 {
			rows[f[0]] = line
		}
	}
	for name, want := range map[string][]string{
		"blk.1.out":      {"[2,8]", "0", "1.000000", "ok"},
		"blk.2.attn_out": {"[2,8]", "2", "DIVERGES"},
		"blk.2.out":      {"ok"},
	} {
		row, ok := rows[name]
		if !ok {
			t.Errorf("no table row for %s in\n%s", name, stdout.String())
			continue
		}
		for _, w := range want {
			if !strings.Contains(row, w) {
				t.Errorf("row %q lacks %q", row, w)
			}
		}
	}
}

func TestDiffJSON(t *testing.T) {
	base := writeSynthDump(t, "", 0)
	faulty := writeSynthDump(t, "blk.0.out", 0.5)
	var stdout, stderr bytes.Buffer
	if code := run([]string{"diff", "--json", base, faulty}, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var rep struct {
		Tensors []struct {
			Name     string  `json:"name"`
			MaxAbs   float64 `json:"max_abs"`
			Cosine   float64 `json:"cosine"`
			Diverges bool    `json:"diverges"`
		} `json:"tensors"`
		FirstDivergence *string `json:"first_divergence"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, stdout.String())
	}
	if rep.FirstDivergence == nil || *rep.FirstDivergence != "blk.0.out" || len(rep.Tensors) != 11 {
		t.Fatalf("first divergence %v, %d tensors", rep.FirstDivergence, len(rep.Tensors))
	}
	for _, r := range rep.Tensors {
		if (r.Name == "blk.0.out") != r.Diverges || (r.Name == "blk.0.out") != (r.MaxAbs == 0.5) {
			t.Errorf("%+v", r)
		}
	}
}
