package convert

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/safetensors"
)

// TestConvertErrors feeds broken checkpoints to Convert: each must fail
// with an error that names the file and the tensor or key concerned, and
// leave no output file behind.
func TestConvertErrors(t *testing.T) {
	// Each case edits a copy of a test checkpoint; want lists substrings of
	// the error.
	tensorsEdit := func(fn func(ts map[string]*safetensors.Tensor)) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			ts := loadTensors(t, dir)
			fn(ts)
			writeTensors(t, filepath.Join(dir, "model.safetensors"), ts)
		}
	}
	configEdit := func(kv map[string]string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) { editConfig(t, dir, kv) }
	}
	fileEdit := func(name string, fn func([]byte) []byte) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			p := filepath.Join(dir, name)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, fn(b), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name, base string
		edit       func(t *testing.T, dir string)
		opts       Options
		want       []string
	}{
		{"no architectures", "glm5-hfs", configEdit(map[string]string{"architectures": ""}), Options{},
			[]string{"config.json", `"architectures"`, "missing"}},
		{"unknown architecture", "glm5-hfs", configEdit(map[string]string{"architectures": `["LlamaForCausalLM"]`}), Options{},
			[]string{"config.json", `"LlamaForCausalLM" is not supported`}},
		{"bad config value", "glm5-hfs", configEdit(map[string]string{"hidden_size": `"wide"`}), Options{},
			[]string{"config.json", `"hidden_size"`, "not an integer"}},
		{"unsupported quantization", "glm5-hfs", configEdit(map[string]string{"quantization_config": `{"quant_method": "gptq"}`}), Options{},
			[]string{"config.json", `quant_method "gptq" is not supported`}},
		// A config that claims far more layers than the file has costs
		// nothing: the first missing tensor is reported.
		{"lying layer count", "glm5-hfs", configEdit(map[string]string{"num_hidden_layers": "16000000"}), Options{},
			[]string{"model.safetensors", `"model.layers.4.input_layernorm.weight" is missing`}},
		{"lying vocab size", "glm5-hfs", configEdit(map[string]string{"vocab_size": "16777216"}), Options{},
			[]string{`"lm_head.weight"`, "shape [1024, 128]", "gives [16777216, 128]"}},
		{"missing tensor", "glm5-hfs", tensorsEdit(func(ts map[string]*safetensors.Tensor) {
			delete(ts, "model.layers.2.mlp.gate.weight")
		}), Options{}, []string{"model.safetensors", `"model.layers.2.mlp.gate.weight" is missing`}},
		{"missing expert", "glm5-hfs", tensorsEdit(func(ts map[string]*safetensors.Tensor) {
			delete(ts, "model.layers.3.mlp.experts.2.up_proj.weight")
		}), Options{}, []string{`"model.layers.3.mlp.experts.2.up_proj.weight" is missing`}},
		{"expert out of range", "glm5-hfs", tensorsEdit(func(ts map[string]*safetensors.Tensor) {
			c := *ts["model.layers.3.mlp.experts.2.up_proj.weight"]
			c.Name = "model.layers.3.mlp.experts.9.up_proj.weight"
			ts[c.Name] = &c
		}), Options{}, []string{"model.safetensors", `"model.layers.3.mlp.experts.9.up_proj.weight"`, "n_routed_experts 4"}},
		{"wrong shape", "glm5-hfs", tensorsEdit(func(ts map[string]*safetensors.Tensor) {
			ts["model.layers.1.self_attn.q_a_proj.weight"].Shape = []int64{128, 64}
		}), Options{}, []string{"model.safetensors", `"model.layers.1.self_attn.q_a_proj.weight"`, "shape [128, 64]", "gives [64, 128]"}},
		{"wrong expert shape", "glm5-hfs", tensorsEdit(func(ts map[string]*safetensors.Tensor) {
			ts["model.layers.2.mlp.experts.1.down_proj.weight"].Shape = []int64{64, 128}
		}), Options{}, []string{`"model.layers.2.mlp.experts.1.down_proj.weight"`, "shape [64, 128]", "gives [128, 64]"}},
		{"unknown tensor", "glm5-hfs", tensorsEdit(func(ts map[string]*safetensors.Tensor) {
			c := *ts["model.norm.weight"]
			c.Name = "model.layers.0.self_attn.o_proj.bias"
			ts[c.Name] = &c
		}), Options{}, []string{`"model.layers.0.self_attn.o_proj.bias"`, "not a tensor glmrun knows"}},
		{"dense tensor in MoE layer", "glm5-hfs", tensorsEdit(func(ts map[string]*safetensors.Tensor) {
			c := *ts["model.layers.0.mlp.up_proj.weight"]
			c.Name = "model.layers.2.mlp.up_proj.weight"
			ts[c.Name] = &c
		}), Options{}, []string{`"model.layers.2.mlp.up_proj.weight"`, "MoE layer"}},
		{"layer past the model", "glm5-hfs", tensorsEdit(func(ts map[string]*safetensors.Tensor) {
			c := *ts["model.norm.weight"]
			c.Name = "model.layers.9.input_layernorm.weight"
			ts[c.Name] = &c
		}), Options{}, []string{`"model.layers.9.input_layernorm.weight"`, "past the 4 trunk layers"}},
		{"unconvertible dtype", "glm5-hfs", tensorsEdit(func(ts map[string]*safetensors.Tensor) {
			w := ts["model.norm.weight"]
			w.DType, w.Data = safetensors.F4, w.Data[:64]
		}), Options{}, []string{`"model.norm.weight"`, "dtype F4 cannot be converted"}},
		{"FP8 without scales", "glm5-fp8s", tensorsEdit(func(ts map[string]*safetensors.Tensor) {
			delete(ts, "model.layers.1.self_attn.o_proj.weight_scale_inv")
		}), Options{}, []string{"model.safetensors", `"model.layers.1.self_attn.o_proj.weight"`, "F8_E4M3 weight without its weight_scale_inv"}},
		{"scales without weight", "glm5-fp8s", tensorsEdit(func(ts map[string]*safetensors.Tensor) {
			c := *ts["model.layers.1.self_attn.o_proj.weight_scale_inv"]
			c.Name = "model.layers.1.self_attn.nope.weight_scale_inv"
			ts[c.Name] = &c
		}), Options{}, []string{`"model.layers.1.self_attn.nope.weight_scale_inv"`, "does not have"}},
		{"wrong scale shape", "glm5-fp8s", tensorsEdit(func(ts map[string]*safetensors.Tensor) {
			s := ts["model.layers.0.self_attn.kv_b_proj.weight_scale_inv"] // [2, 1]
			s.Shape = []int64{1, 2}
		}), Options{}, []string{`"model.layers.0.self_attn.kv_b_proj.weight_scale_inv"`, "shape [1, 2]", "needs [2, 1]"}},
		{"scales without fp8 config", "glm5-fp8s", configEdit(map[string]string{"quantization_config": ""}), Options{},
			[]string{"model.safetensors", "_scale_inv", "quant_method is not \"fp8\""}},
		{"truncated safetensors", "glm5-hfs", fileEdit("model.safetensors", func(b []byte) []byte { return b[:len(b)/2] }), Options{},
			[]string{"model.safetensors", "run past the", "truncated"}},
		{"lying header", "glm5-hfs", fileEdit("model.safetensors", func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"data_offsets":[0,262144]`), []byte(`"data_offsets":[9,262153]`), 1)
		}), Options{}, []string{"model.safetensors", `tensor "lm_head.weight"`, "gap"}},
		{"header length past the end", "glm5-hfs", fileEdit("model.safetensors", func(b []byte) []byte {
			b[5] = 0x7f
			return b
		}), Options{}, []string{"model.safetensors", "over the 100000000-byte limit"}},
		{"no weights", "glm5-hfs", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "model.safetensors")) }, Options{},
			[]string{"no model*.safetensors"}},
		{"vocab_size too small", "glm5-hfs", configEdit(map[string]string{"vocab_size": "900"}), Options{},
			[]string{"model.safetensors", `"lm_head.weight"`, "shape [1024, 128]", "gives [900, 128]"}},
		{"missing GLM special token", "glm5-hfs", fileEdit("tokenizer.json", func(b []byte) []byte {
			return bytes.ReplaceAll(b, []byte(`"[gMASK]"`), []byte(`"[gMASQ]"`))
		}), Options{}, []string{"tokenizer.json", `no added token "[gMASK]"`}},
		{"unknown pre-tokenizer", "glm5-hfs", fileEdit("tokenizer.json", func(b []byte) []byte {
			return bytes.Replace(b, []byte(`\\p{N}{1,3}`), []byte(`\\p{N}{1,2}`), 1)
		}), Options{}, []string{"tokenizer.json", "pre-tokenizer regexes"}},
		{"bad output type", "glm5-hfs", nil, Options{OutType: "q4_k"}, []string{`output type "q4_k"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyCheckpoint(t, tc.base, tc.base)
			if tc.edit != nil {
				tc.edit(t, dir)
			}
			outDir := t.TempDir()
			_, err := Convert(dir, filepath.Join(outDir, "out.gguf"), tc.opts)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if left, _ := os.ReadDir(outDir); len(left) > 0 {
				t.Errorf("left %s behind", left[0].Name())
			}
		})
	}
}

// TestConvertOptions checks the resolved output type and what Result
// reports.
func TestConvertOptions(t *testing.T) {
	tests := []struct {
		checkpoint string
		opts       Options
		outType    string
		fileType   uint32
		blocks     int
		nextN      int
	}{
		{"glm5-fp8s", Options{}, OutBF16, 32, 4, 0}, // auto: lm_head is BF16
		{"flash-hfs", Options{OutType: "F32"}, OutF32, 0, 4, 0},
		{"glm5-mtps", Options{OutType: OutQ8_0}, OutQ8_0, 7, 5, 1},
		{"glm5-mtps", Options{OutType: OutF16, NoMTP: true}, OutF16, 1, 4, 0},
	}
	for _, tc := range tests {
		t.Run(tc.checkpoint+"."+tc.outType, func(t *testing.T) {
			var last, total int64
			tc.opts.Progress = func(done, tot int64) {
				if done < last || done > tot {
					t.Errorf("progress %d of %d after %d", done, tot, last)
				}
				last, total = done, tot
			}
			out := filepath.Join(t.TempDir(), "out.gguf")
			r, err := Convert(derivedCheckpoint(t, tc.checkpoint), out, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if r.OutType != tc.outType || r.FileType != tc.fileType || r.Blocks != tc.blocks || r.NextN != tc.nextN {
				t.Errorf("out type %s, file type %d, blocks %d, NextN %d; want %s %d %d %d",
					r.OutType, r.FileType, r.Blocks, r.NextN, tc.outType, tc.fileType, tc.blocks, tc.nextN)
			}
			if last != total || total != r.DataBytes {
				t.Errorf("progress ended at %d of %d, data %d bytes", last, total, r.DataBytes)
			}
			fi, err := os.Stat(out)
			if err != nil || fi.Size() != r.FileBytes {
				t.Errorf("file %v, Result says %d bytes (%v)", fi, r.FileBytes, err)
			}
		})
	}
}

// TestTiedEmbeddings: with tie_word_embeddings the checkpoint's lm_head
// (if any) is skipped and output.weight is not written, as llama.cpp does;
// without it a missing lm_head is an error naming it.
func TestTiedEmbeddings(t *testing.T) {
	tests := []struct {
		tie, keepHead bool
		err           string // "" for success
	}{
		{true, false, ""},
		{true, true, ""},
		{false, false, `tensor "lm_head.weight" is missing`},
	}
	for _, tc := range tests {
		dir := copyCheckpoint(t, "glm5-hfs", "glm5-hfs")
		ts := loadTensors(t, dir)
		if !tc.keepHead {
			delete(ts, "lm_head.weight")
		}
		writeTensors(t, filepath.Join(dir, "model.safetensors"), ts)
		editConfig(t, dir, map[string]string{"tie_word_embeddings": strconv.FormatBool(tc.tie)})
		out := filepath.Join(t.TempDir(), "out.gguf")
		r, err := Convert(dir, out, Options{OutType: OutBF16})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("tie %v, head %v: error %v, want %q", tc.tie, tc.keepHead, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("tie %v, head %v: %v", tc.tie, tc.keepHead, err)
		}
		f, err := gguf.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := f.Tensor("output.weight"); ok || r.Tensors != 89 {
			t.Errorf("tie %v, head %v: %d tensors, output.weight present %v", tc.tie, tc.keepHead, r.Tensors, ok)
		}
		f.Close()
	}
}

// TestIndexerTypes: a GLM-5 config without indexer_types gets them the
// way GlmMoeDsaConfig derives them, from index_topk_pattern or from
// index_topk_freq and index_skip_topk_offset (every freq-th layer from the
// offset on has its own indexer).
func TestIndexerTypes(t *testing.T) {
	tests := []struct {
		config map[string]string
		want   string
	}{
		{map[string]string{}, "FFFFFF"},
		{map[string]string{"index_topk_pattern": `"FFSFSS"`}, "FFSFSS"},
		{map[string]string{"index_topk_pattern": `["full", "shared", "full", "full", "shared", "full"]`}, "FSFFSF"},
		{map[string]string{"index_topk_freq": "2"}, "FFSFSF"},
		{map[string]string{"index_topk_freq": "3", "index_skip_topk_offset": "1"}, "FSSFSS"},
		{map[string]string{"indexer_types": `["full", "shared", "full", "full", "full", "full"]`, "index_topk_freq": "2"}, "FSFFFF"},
	}
	for _, tc := range tests {
		dir := t.TempDir()
		b := []byte(`{"architectures": ["GlmMoeDsaForCausalLM"], "num_hidden_layers": 6}`)
		if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		editConfig(t, dir, tc.config)
		h, arch, err := readConfig(dir)
		if err != nil {
			t.Fatal(err)
		}
		s, err := readSpec(h, arch, false)
		if err != nil {
			t.Fatal(err)
		}
		var got strings.Builder
		for _, full := range s.indexerFull {
			got.WriteByte("SF"[b2i(full)])
		}
		if got.String() != tc.want {
			t.Errorf("%v: %s, want %s", tc.config, got.String(), tc.want)
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestChatTemplate: the chat template comes from tokenizer_config.json's
// chat_template, else chat_template.jinja (additional_chat_templates/*.jinja
// as named templates), else chat_template.json, as llama.cpp's SpecialVocab
// finds it.
func TestChatTemplate(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string // relative path → content
		tc    map[string]string // tokenizer_config.json edits
		want  map[string]string // GGUF key → string value ("" = absent)
		names []string          // tokenizer.chat_templates
	}{
		{"none", nil, nil, map[string]string{"tokenizer.chat_template": ""}, nil},
		{"jinja", map[string]string{"chat_template.jinja": "[gMASK]<sop>{{ x }}"}, nil,
			map[string]string{"tokenizer.chat_template": "[gMASK]<sop>{{ x }}"}, nil},
		{"json", map[string]string{"chat_template.json": `{"chat_template": "from json"}`}, nil,
			map[string]string{"tokenizer.chat_template": "from json"}, nil},
		{"config wins", map[string]string{"chat_template.jinja": "jinja"}, map[string]string{"chat_template": `"config"`},
			map[string]string{"tokenizer.chat_template": "config"}, nil},
		{"config null", map[string]string{"chat_template.jinja": "jinja"}, map[string]string{"chat_template": `null`},
			map[string]string{"tokenizer.chat_template": ""}, nil},
		{"named", map[string]string{"chat_template.jinja": "main", "additional_chat_templates/tool use.jinja": "tools"}, nil,
			map[string]string{"tokenizer.chat_template": "main", "tokenizer.chat_template.tool_use": "tools"}, []string{"tool_use"}},
		{"config list", nil, map[string]string{"chat_template": `[{"name": "default", "template": "d"}, {"name": "rag", "template": "r"}]`},
			map[string]string{"tokenizer.chat_template": "d", "tokenizer.chat_template.rag": "r"}, []string{"rag"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyCheckpoint(t, "glm5-hfs", "glm5-hfs")
			for rel, content := range tc.files {
				p := filepath.Join(dir, rel)
				os.MkdirAll(filepath.Dir(p), 0o755)
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tc.tc != nil {
				// editConfig edits a config.json: do it in a scratch directory.
				tcPath := filepath.Join(dir, "tokenizer_config.json")
				scratch := t.TempDir()
				b, err := os.ReadFile(tcPath)
				if err != nil {
					t.Fatal(err)
				}
				os.WriteFile(filepath.Join(scratch, "config.json"), b, 0o644)
				editConfig(t, scratch, tc.tc)
				b, _ = os.ReadFile(filepath.Join(scratch, "config.json"))
				os.WriteFile(tcPath, b, 0o644)
			}
			out := filepath.Join(t.TempDir(), "out.gguf")
			if _, err := Convert(dir, out, Options{OutType: OutBF16}); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for key, want := range tc.want {
				got, err := f.String(key)
				if want == "" {
					if err == nil {
						t.Errorf("%s = %q, want none", key, got)
					}
					continue
				}
				if got != want {
					t.Errorf("%s = %q (%v), want %q", key, got, err, want)
				}
			}
			names, err := f.Strings("tokenizer.chat_templates")
			if tc.names == nil && err == nil || tc.names != nil && !slices.Equal(names, tc.names) {
				t.Errorf("tokenizer.chat_templates %q (%v), want %q", names, err, tc.names)
			}
		})
	}
}
