package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/attention"
	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/internal/testmodels"
	"github.com/glmrun/glmrun/model"
	"github.com/glmrun/glmrun/tensor"
)

const testModels = "../../testdata/models/"

// runCmd runs glmrun in-process and returns its exit status and output.
func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// gunzipTemp decompresses a .gz test file into a temporary directory.
func gunzipTemp(t *testing.T, path string) string {
	t.Helper()
	in, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	zr, err := gzip.NewReader(in)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(path), ".gz"))
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, zr); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}

// inspectJSON runs "inspect ARGS --json" (the flag after the file, as
// people type it) and decodes the result.
func inspectJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	code, out, errs := runCmd(t, append(append([]string{"inspect"}, args...), "--json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, out)
	}
	return m
}

// jsonPath returns the value at path (one key per level) in a decoded JSON
// object, or nil.
func jsonPath(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = obj[p]
	}
	return v
}

func TestInspectText(t *testing.T) {
	tests := []struct {
		file string
		want []string // regexps each matching some line
	}{
		{testModels + "glm5-mini.Q8_0.gguf", []string{
			`^architecture: +glm-dsa$`,
			`^  layers: +3 \(1 leading dense, 2 MoE, 0 nextn/MTP\)$`,
			`^  embedding: +256$`,
			`^  attention heads: +8, kv heads 1$`,
			`^  q lora rank: +256$`,
			`^  kv lora rank: +256$`,
			`^  head dims: +qk 48 = nope 32 \+ rope 16, v 32 `,
			`^  experts: +16 total, 4 used, 1 shared, width 256$`,
			`^  gating: +sigmoid \(2\), weights norm true, scale 2\.5$`,
			`^  indexer: +16 heads, dim 64, top_k 2048$`,
			`^  rope: +base 1e\+06, no scaling$`,
			`^  rms eps: +1e-05$`,
			`^  model: +gpt2$`,
			`^  pre: +glm4$`,
			`^  vocab size: +1024 \(700 merges\)$`,
			`^  bos id: +958 "\[gMASK\]"$`,
			`^  eos id: +956 "<\|endoftext\|>"$`,
			`^  eot id: +963 "<\|user\|>"$`,
			`^  add bos: +false$`,
			`^  chat template: +yes \(\d+ bytes\)$`,
			`^tensors \(67;`,
			`^  blk\.0\.attn_q_a\.weight +model\.layers\.0\.self_attn\.q_a_proj\.weight +\[256, 256\] +Q8_0 +69632$`,
			`^  blk\.1\.attn_k_b\.weight +model\.layers\.1\.self_attn\.kv_b_proj\.weight\[k_b\] +\[32, 256, 8\] +Q8_0 +69632$`,
			`^  blk\.1\.ffn_up_exps\.weight +model\.layers\.1\.mlp\.experts\.\{e\}\.up_proj\.weight +\[256, 256, 16\] +Q8_0 +1114112$`,
			`^  blk\.1\.exp_probs_b\.bias +model\.layers\.1\.mlp\.gate\.e_score_correction_bias +\[16\] +F32 +64$`,
			`^ +Q8_0 +44 +9740288 +10349056 +99\.5%$`,
			`^ +F32 +23 +11936 +47744 +0\.5%$`,
			`^total: 67 tensors, 9752224 elements, 10396800 bytes \(9\.92 MiB\), 8\.529 bits per weight$`,
		}},
		{testModels + "ds2-mini.Q8_0.gguf", []string{
			`^architecture: +deepseek2$`,
			`^  layers: +3 \(1 leading dense, 2 MoE\)$`,
			`^  gating: +softmax \(1\), weights norm false, scale 1$`,
			`^  rope: +base 1e\+06, scaling yarn factor 4 \(orig ctx 1024, yarn log mul 0\.1\)$`,
			`^  blk\.2\.ffn_down_shexp\.weight +model\.layers\.2\.mlp\.shared_experts\.down_proj\.weight +\[256, 256\] +Q8_0`,
		}},
		{"../../testdata/formats/llama-dense.real.Q4_K_M.gguf", []string{
			`^architecture: +llama$`,
			`^file type: +15 \(MOSTLY_Q4_K_M\)$`,
			`^  attention heads: +2, kv heads 2$`,
			`^  model: +test$`,
			`^  rope_freqs\.weight +- +\[64\] +F32 +256$`,
			`^  blk\.0\.ffn_down\.weight +- +\[384, 256\] +\S+ +\d+$`,
			`^ +Q4_K +\d+ `,
			`^ +Q6_K +\d+ `,
		}},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.file), func(t *testing.T) {
			code, out, errs := runCmd(t, "inspect", tt.file)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			for _, w := range tt.want {
				if !regexp.MustCompile("(?m)" + w).MatchString(out) {
					t.Errorf("no line matches %s in:\n%s", w, out)
				}
			}
			if t.Failed() {
				return
			}
			// --no-tensors leaves the table out but keeps the totals.
			code, short, _ := runCmd(t, "inspect", "--no-tensors", tt.file)
			if code != 0 || strings.Contains(short, "HF name") || !strings.Contains(short, "\ntotal: ") {
				t.Errorf("--no-tensors: exit %d, output:\n%s", code, short)
			}
		})
	}
}

func TestInspectJSON(t *testing.T) {
	t.Run("glm5-mini", func(t *testing.T) {
		m := inspectJSON(t, testModels+"glm5-mini.Q8_0.gguf")
		checks := []struct {
			path []string
			want any
		}{
			{[]string{"architecture"}, "glm-dsa"},
			{[]string{"name"}, "glm5-mini"},
			{[]string{"hparams", "block_count"}, 3.0},
			{[]string{"hparams", "attention.head_count"}, 8.0},
			{[]string{"hparams", "attention.kv_lora_rank"}, 256.0},
			{[]string{"hparams", "attention.q_lora_rank"}, 256.0},
			{[]string{"hparams", "expert_count"}, 16.0},
			{[]string{"hparams", "expert_used_count"}, 4.0},
			{[]string{"hparams", "attention.indexer.head_count"}, 16.0},
			{[]string{"hparams", "attention.indexer.key_length"}, 64.0},
			{[]string{"hparams", "attention.indexer.top_k"}, 2048.0},
			{[]string{"hparams", "attention.layer_norm_rms_epsilon"}, 1e-5},
			{[]string{"hparams", "expert_weights_norm"}, true},
			{[]string{"hparams", "expert_weights_scale"}, 2.5},
			{[]string{"derived", "head_dim_qk_nope"}, 32.0},
			{[]string{"derived", "head_dim_qk_rope"}, 16.0},
			{[]string{"derived", "head_dim_v"}, 32.0},
			{[]string{"derived", "dense_layers"}, 1.0},
			{[]string{"derived", "moe_layers"}, 2.0},
			{[]string{"derived", "nextn_layers"}, 0.0},
			{[]string{"derived", "expert_gating"}, "sigmoid"},
			{[]string{"tokenizer", "model"}, "gpt2"},
			{[]string{"tokenizer", "vocab_size"}, 1024.0},
			{[]string{"tokenizer", "special", "bos", "id"}, 958.0},
			{[]string{"tokenizer", "special", "bos", "text"}, "[gMASK]"},
			{[]string{"tokenizer", "special", "eot", "text"}, "<|user|>"},
			{[]string{"tokenizer", "add_bos"}, false},
			{[]string{"tokenizer", "has_chat_template"}, true},
			{[]string{"tensor_count"}, 67.0},
			{[]string{"total_bytes"}, 10396800.0},
			{[]string{"total_elements"}, 9752224.0},
		}
		for _, c := range checks {
			if got := jsonPath(m, c.path...); got != c.want {
				t.Errorf("%s = %v (%T), want %v", strings.Join(c.path, "."), got, got, c.want)
			}
		}
		if _, ok := jsonPath(m, "hparams").(map[string]any)["rope.scaling.type"]; ok {
			t.Errorf("rope.scaling.type reported though the file has none")
		}
		tensors := m["tensors"].([]any)
		if len(tensors) != 67 {
			t.Fatalf("%d tensors, want 67", len(tensors))
		}
		var found bool
		for _, x := range tensors {
			tr := x.(map[string]any)
			if tr["name"] == "blk.2.attn_v_b.weight" {
				found = true
				if tr["hf_name"] != "model.layers.2.self_attn.kv_b_proj.weight[v_b]" || tr["type"] != "Q8_0" || tr["bytes"] != 69632.0 {
					t.Errorf("attn_v_b row %v", tr)
				}
				if s, _ := json.Marshal(tr["shape"]); string(s) != "[256,32,8]" {
					t.Errorf("attn_v_b shape %s, want [256,32,8]", s)
				}
			}
		}
		if !found {
			t.Error("blk.2.attn_v_b.weight not listed")
		}
		var sum float64
		for _, x := range m["types"].([]any) {
			sum += x.(map[string]any)["bytes"].(float64)
		}
		if sum != 10396800 {
			t.Errorf("type histogram sums to %v bytes, want 10396800", sum)
		}
	})
	t.Run("ds2-mini", func(t *testing.T) {
		m := inspectJSON(t, testModels+"ds2-mini.Q8_0.gguf")
		checks := []struct {
			path []string
			want any
		}{
			{[]string{"architecture"}, "deepseek2"},
			{[]string{"hparams", "rope.scaling.type"}, "yarn"},
			{[]string{"hparams", "rope.scaling.factor"}, 4.0},
			{[]string{"hparams", "rope.scaling.original_context_length"}, 1024.0},
			{[]string{"hparams", "rope.scaling.yarn_log_multiplier"}, 0.1},
			{[]string{"hparams", "expert_gating_func"}, 1.0},
			{[]string{"derived", "expert_gating"}, "softmax"},
			{[]string{"hparams", "attention.indexer.head_count"}, nil},
			{[]string{"tensor_count"}, 50.0},
		}
		for _, c := range checks {
			if got := jsonPath(m, c.path...); got != c.want {
				t.Errorf("%s = %v, want %v", strings.Join(c.path, "."), got, c.want)
			}
		}
	})
	t.Run("nextn", func(t *testing.T) {
		path := testmodels.Path(t, "glm5-mini-nextn.Q8_0")
		m := inspectJSON(t, path)
		checks := []struct {
			path []string
			want any
		}{
			{[]string{"hparams", "block_count"}, 4.0},
			{[]string{"hparams", "nextn_predict_layers"}, 1.0},
			{[]string{"derived", "nextn_layers"}, 1.0},
			{[]string{"derived", "trunk_layers"}, 3.0},
			{[]string{"derived", "moe_layers"}, 2.0},
		}
		for _, c := range checks {
			if got := jsonPath(m, c.path...); got != c.want {
				t.Errorf("%s = %v, want %v", strings.Join(c.path, "."), got, c.want)
			}
		}
		code, out, errs := runCmd(t, "inspect", path)
		for _, w := range []string{
			`(?m)^  layers: +4 \(1 leading dense, 2 MoE, 1 nextn/MTP\)$`,
			`(?m)^  blk\.3\.nextn\.shared_head_head\.weight +model\.layers\.3\.shared_head\.head\.weight +\[256, 1024\] +Q8_0 +278528$`,
			`(?m)^  blk\.3\.nextn\.eh_proj\.weight +model\.layers\.3\.eh_proj\.weight +\[512, 256\] +Q8_0`,
		} {
			if code != 0 || !regexp.MustCompile(w).MatchString(out) {
				t.Errorf("exit %d (%s); no match for %s in:\n%s", code, errs, w, out)
			}
		}
	})
	t.Run("vocab-only", func(t *testing.T) {
		path := gunzipTemp(t, "../../testdata/tokenizers/ggml-vocab-gpt-2.gguf.gz")
		m := inspectJSON(t, "--kv", path)
		checks := []struct {
			path []string
			want any
		}{
			{[]string{"architecture"}, "gpt2"},
			{[]string{"tensor_count"}, 0.0},
			{[]string{"tokenizer", "model"}, "gpt2"},
			{[]string{"tokenizer", "pre"}, "gpt-2"},
			{[]string{"tokenizer", "vocab_size"}, 50257.0},
			{[]string{"tokenizer", "merges"}, 50000.0},
			{[]string{"tokenizer", "special", "eos", "text"}, "<|endoftext|>"},
			{[]string{"tokenizer", "has_chat_template"}, false},
			{[]string{"bits_per_weight"}, nil},
		}
		for _, c := range checks {
			if got := jsonPath(m, c.path...); got != c.want {
				t.Errorf("%s = %v, want %v", strings.Join(c.path, "."), got, c.want)
			}
		}
		if md, _ := m["metadata"].([]any); len(md) < 10 {
			t.Errorf("--kv listed %d keys", len(md))
		}
		code, out, errs := runCmd(t, "inspect", path)
		if code != 0 || !strings.Contains(out, "tensors: none") || !strings.Contains(out, "vocab size:     50257 (50000 merges)") {
			t.Errorf("text: exit %d, stderr %q, output:\n%s", code, errs, out)
		}
	})
}

// TestInspectOddFiles checks that inspect copes with files whose keys are
// missing or of unexpected types, and with split files.
func TestInspectOddFiles(t *testing.T) {
	dir := t.TempDir()
	t.Run("missing and mistyped keys", func(t *testing.T) {
		w := gguf.NewWriter()
		w.SetKV("general.architecture", gguf.String("glm-dsa"))
		w.SetKV("glm-dsa.block_count", gguf.String("three")) // wrong type
		w.SetKV("glm-dsa.attention.head_count", gguf.Int8(-1))
		w.SetKV("tokenizer.ggml.tokens", gguf.Array([]string{"a", "b"}))
		w.SetKV("tokenizer.ggml.bos_token_id", gguf.Uint32(7)) // out of range
		if err := w.AddTensor("blk.0.attn_norm.weight", tensor.F32, []int64{4}, make([]byte, 16)); err != nil {
			t.Fatal(err)
		}
		if err := w.AddTensor("blk.0.mystery.weight", tensor.F32, []int64{2, 2}, make([]byte, 16)); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "odd.gguf")
		if err := w.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		code, out, errs := runCmd(t, "inspect", path)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		for _, w := range []string{
			`(?m)^  layers: +-$`,
			`(?m)^  attention heads: +-1$`,
			`(?m)^  embedding: +-$`,
			`(?m)^  bos id: +7 \(no such token\)$`,
			`(?m)^  blk\.0\.attn_norm\.weight +model\.layers\.0\.input_layernorm\.weight +\[4\] +F32 +16$`,
			`(?m)^  blk\.0\.mystery\.weight +- +\[2, 2\] +F32 +16$`,
		} {
			if !regexp.MustCompile(w).MatchString(out) {
				t.Errorf("no match for %s in:\n%s", w, out)
			}
		}
		m := inspectJSON(t, path)
		if _, ok := m["hparams"].(map[string]any)["block_count"]; ok {
			t.Errorf("mistyped block_count reported: %v", m["hparams"])
		}
	})
	t.Run("split", func(t *testing.T) {
		f, err := gguf.Open(testModels + "glm5-mini.Q8_0.gguf")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		paths, err := gguf.NewWriterFrom(f).WriteSplit(filepath.Join(dir, "glm5"), 3)
		if err != nil {
			t.Fatal(err)
		}
		m := inspectJSON(t, paths[0])
		if got := jsonPath(m, "tensor_count"); got != 67.0 {
			t.Errorf("tensor_count = %v, want 67", got)
		}
		if got := jsonPath(m, "total_bytes"); got != 10396800.0 {
			t.Errorf("total_bytes = %v, want 10396800", got)
		}
		if s, _ := m["shards"].([]any); len(s) != 3 {
			t.Errorf("shards = %v, want 3", m["shards"])
		}
		if got := jsonPath(m, "hparams", "attention.indexer.top_k"); got != 2048.0 {
			t.Errorf("indexer top_k = %v", got)
		}
		code, out, errs := runCmd(t, "inspect", paths[0])
		if code != 0 || !strings.Contains(out, "shard 3/3:") || !strings.Contains(out, "glm5-00002-of-00003.gguf") {
			t.Errorf("text: exit %d, stderr %q, output:\n%s", code, errs, out)
		}
	})
}

func TestInspectErrors(t *testing.T) {
	dir := t.TempDir()
	notGGUF := filepath.Join(dir, "bad.gguf")
	if err := os.WriteFile(notGGUF, []byte("this is not a gguf file at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no file", []string{"inspect"}, 2, "want one GGUF file"},
		{"two files", []string{"inspect", "a.gguf", "b.gguf"}, 2, "want one GGUF file"},
		{"bad flag", []string{"inspect", "--bogus", testModels + "glm5-mini.Q8_0.gguf"}, 2, "bogus"},
		{"missing file", []string{"inspect", filepath.Join(dir, "nope.gguf")}, 1, "nope.gguf"},
		{"not gguf", []string{"inspect", notGGUF}, 1, "bad.gguf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runCmd(t, tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d", code, tt.code)
			}
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
			if !strings.Contains(errs, tt.want) {
				t.Errorf("stderr %q does not mention %q", errs, tt.want)
			}
		})
	}
}

// TestInspectCacheBytes: the KV cache inspect reports per token is what a
// session of the model allocates (CacheBytes over its context), for GLM-5
// (indexer keys), deepseek2 (none), and the trained tiny GLM-5, whose
// file lists indexer types (as GLM-5.2's do).
func TestInspectCacheBytes(t *testing.T) {
	for _, name := range []string{"glm5-mini.Q8_0", "ds2-mini.Q8_0", "glm5-dense.Q8_0", "glm5-tiny.Q8_0"} {
		path := testModels + name + ".gguf"
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		m, err := model.New(f, model.Options{Threads: 1})
		if err != nil {
			f.Close()
			t.Fatal(err)
		}
		for _, typ := range []string{"f32", "f16", "bf16", "q8_0"} {
			code, out, errs := runCmd(t, "inspect", "--json", "-ctk", typ, path)
			if code != 0 {
				t.Fatalf("%s: exit %d: %s", name, code, errs)
			}
			var rep struct {
				Derived map[string]any `json:"derived"`
			}
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatal(err)
			}
			ct, _ := attention.ParseCacheType(typ)
			s, err := m.NewSession(model.SessionOptions{ContextSize: 64, CacheType: ct})
			got, ok := rep.Derived["kv_cache_bytes_per_token"].(float64)
			if err != nil { // rows that are not whole blocks of the type
				if ok {
					t.Errorf("%s, %s: inspect says %g cache bytes per token, a session fails: %v", name, typ, got, err)
				}
				continue
			}
			want := float64(s.CacheBytes()) / 64
			s.Close()
			if got != want {
				t.Errorf("%s, %s: inspect says %g cache bytes per token, a session holds %g", name, typ, got, want)
			}
			if code, out, _ := runCmd(t, "inspect", "-ctk", typ, path); code != 0 || !strings.Contains(out, "KV cache ("+typ+"):") {
				t.Errorf("%s: no KV cache line in\n%s", name, out)
			}
		}
		m.Close()
		f.Close()
	}
}
