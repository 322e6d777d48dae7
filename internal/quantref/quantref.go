// Package quantref holds what the tests of "glmrun quantize" and the tool
// that records llama-quantize's reference results (tools/quantref) share:
// the test inputs, built from the small models in testdata so that no
// F32/BF16 model needs shipping; the format of the reference file; and the
// error measure of a quantized tensor.
//
// There are two kinds of input. Derived inputs are the Q8_0 test models
// turned back into F32, F16 or BF16 files (values made continuous with a
// little deterministic noise), on which llama-quantize's output bytes and
// errors are recorded. Layouts are files with a real model's tensor names
// and row widths but only two rows per matrix (zeros): they show
// llama-quantize's per-tensor type choices for full-size GLM-5 and
// GLM-4.7-Flash, whose rules depend on the layer count, the expert count
// and the row widths, without their bytes.
package quantref

import (
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/tensor"
)

// Types are the file types whose results are recorded, as llama-quantize
// names them.
var Types = []string{"Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M"}

// Refs is the reference file: llama-quantize's results for every input.
type Refs struct {
	LlamaQuantize string   `json:"llama_quantize"` // its version line
	Note          string   `json:"note"`
	Inputs        []*Input `json:"inputs"`
}

// Input is one input model and what llama-quantize made of it.
type Input struct {
	Name   string `json:"name"`
	Source string `json:"source"`
	// SHA256 is the input file's, for inputs this package builds (tests
	// check that they rebuilt the file llama-quantize read); empty for
	// files recorded as they are (made by llama.cpp's converter).
	SHA256  string    `json:"sha256,omitempty"`
	Arch    string    `json:"arch"`
	Layers  int       `json:"block_count"`
	Experts int       `json:"expert_count"`
	Tensors []*Tensor `json:"tensors"` // in file order
	// Outputs is keyed by file type (Types).
	Outputs map[string]*Output `json:"outputs"`
}

// Tensor is one input tensor.
type Tensor struct {
	Name string  `json:"name"`
	Type string  `json:"type"`
	Dims []int64 `json:"dims"`
}

// Output is one llama-quantize output file.
type Output struct {
	SHA256       string `json:"sha256"`        // of the whole file
	HeaderSHA256 string `json:"header_sha256"` // of everything before the tensor data
	Size         int64  `json:"size"`
	// Tensors are in the output's order. Data hashes and errors are kept
	// for built inputs only.
	Tensors []*OutTensor `json:"tensors"`
}

// OutTensor is one output tensor.
type OutTensor struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	SHA256 string `json:"sha256,omitempty"`
	// RMS is the root-mean-square error of the tensor's values against
	// the input's (see RMSError), for tensors whose type changed.
	RMS float64 `json:"rms,omitempty"`
}

// ReadRefs reads a reference file (gzipped JSON).
func ReadRefs(path string) (*Refs, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var r Refs
	if err := json.NewDecoder(zr).Decode(&r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// WriteRefs writes a reference file (gzipped JSON).
func WriteRefs(path string, r *Refs) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(f)
	enc := json.NewEncoder(zw)
	enc.SetIndent("", " ")
	if err := enc.Encode(r); err != nil {
		f.Close()
		return err
	}
	if err := zw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// RMSError returns the root-mean-square difference between x and the
// values of data, x quantized as typ.
func RMSError(x []float32, typ tensor.Type, data []byte) (float64, error) {
	y := make([]float32, len(x))
	if err := tensor.Dequantize(typ, data, y); err != nil {
		return 0, err
	}
	var se float64
	for i, v := range x {
		e := float64(y[i]) - float64(v)
		se += e * e
	}
	return math.Sqrt(se / float64(max(len(x), 1))), nil
}

// HeaderSize returns the length of f's header (metadata, tensor infos and
// padding): the file size less the padded tensor data, which llama.cpp
// and glmrun write densely in tensor order.
func HeaderSize(f *gguf.File, fileSize int64) int64 {
	data := int64(0)
	a := int64(f.Alignment)
	for _, t := range f.Tensors {
		data += (int64(len(t.Data)) + a - 1) / a * a
	}
	return fileSize - data
}

// Built is an input that this package builds.
type Built struct {
	Name   string
	Source string
	// Full is true for derived inputs, whose outputs are compared byte by
	// byte and by error; layouts are compared by type choice only.
	Full  bool
	build func(testdata string) (*gguf.Writer, func(), error)
}

// Build makes the input's file, reading the models it derives from under
// testdata. Call done after writing the writer (it closes those models).
func (b *Built) Build(testdata string) (w *gguf.Writer, done func(), err error) {
	return b.build(testdata)
}

// Inputs lists the inputs this package builds.
var Inputs = []*Built{
	derived("glm5-mini.bf16", "models/glm5-mini.Q8_0.gguf", tensor.BF16, 1),
	derived("ds2-mini.f16", "models/ds2-mini.Q8_0.gguf", tensor.F16, 2),
	derived("glm5-dense.f32", "models/glm5-dense.Q8_0.gguf", tensor.F32, 3),
	layout(glm5Layout),
	layout(flashLayout),
	layout(dsLegacy8Layout),
	layout(dsLegacyDenseLayout),
}

// fileTypeOf is general.file_type for a model whose matrices are t.
func fileTypeOf(t tensor.Type) uint32 {
	switch t {
	case tensor.F16:
		return 1 // MOSTLY_F16
	case tensor.BF16:
		return 32 // MOSTLY_BF16
	}
	return 0 // ALL_F32
}

// derived returns the input made from the Q8_0 model at rel: its metadata
// (general.file_type changed) and tensors in order, the F32 ones as they
// are and the Q8_0 ones stored as matrix, their values moved by up to half
// a quantization step (uniform noise from a fixed seed) so that they are no
// longer on the Q8_0 grid, where every quantizer would find them too easy.
func derived(name, rel string, matrix tensor.Type, seed uint64) *Built {
	return &Built{
		Name: name,
		Source: fmt.Sprintf("testdata/%s with its Q8_0 tensors as %s plus uniform noise of ±½ step (PCG seed %d)",
			rel, matrix, seed),
		Full: true,
		build: func(testdata string) (*gguf.Writer, func(), error) {
			src, err := gguf.Open(filepath.Join(testdata, rel))
			if err != nil {
				return nil, nil, err
			}
			w := gguf.NewWriter()
			for _, kv := range src.KVs {
				w.SetKV(kv.Key, kv.Value)
			}
			w.SetKV("general.file_type", gguf.Uint32(fileTypeOf(matrix)))
			r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
			for _, t := range src.Tensors {
				data := t.Data
				typ := t.Type
				switch t.Type {
				case tensor.F32:
				case tensor.Q8_0:
					if data, err = jitterQ8_0(t, matrix, r); err != nil {
						src.Close()
						return nil, nil, err
					}
					typ = matrix
				default:
					src.Close()
					return nil, nil, fmt.Errorf("%s: tensor %s is %s, want F32 or Q8_0", rel, t.Name, t.Type)
				}
				if err := w.AddTensor(t.Name, typ, t.Dims, data); err != nil {
					src.Close()
					return nil, nil, err
				}
			}
			return w, func() { src.Close() }, nil
		},
	}
}

// jitterQ8_0 returns t's values plus noise as to: each value x of a block
// with scale d becomes x + d·(u − ½), u uniform in [0, 1) from r (made from
// r's raw bits, so that the stream does not depend on math/rand's float
// methods).
func jitterQ8_0(t *gguf.TensorInfo, to tensor.Type, r *rand.Rand) ([]byte, error) {
	n := int(t.NumElements())
	x := make([]float32, n)
	if err := tensor.Dequantize(tensor.Q8_0, t.Data, x); err != nil {
		return nil, fmt.Errorf("tensor %s: %w", t.Name, err)
	}
	for i := range x {
		d := tensor.F16ToF32(binary.LittleEndian.Uint16(t.Data[i/32*34:]))
		u := float32(r.Uint64()>>40) / (1 << 24)
		x[i] += d * (u - 0.5)
	}
	size, err := to.RowSize(int64(n))
	if err != nil {
		return nil, err
	}
	out := make([]byte, size)
	if err := tensor.Quantize(to, x, out); err != nil {
		return nil, fmt.Errorf("tensor %s: %w", t.Name, err)
	}
	return out, nil
}

// shape is a layout's model: llama.cpp's tensor names for a glm-dsa or
// deepseek2 model with these sizes.
type shape struct {
	Name    string
	Source  string
	Base    string // testdata model whose metadata (arch, tokenizer) is reused
	Arch    string
	Layers  int // blocks, NextN ones included
	Dense   int // leading dense blocks
	NextN   int // trailing NextN/MTP blocks
	Experts int // 0: a dense model (no expert count)
	Shared  int // shared experts

	// Widths: n_embd, q_lora_rank, kv_lora_rank, the nope, rope and v head
	// dimensions, heads, the dense and expert FFN widths, and glm-dsa's
	// lightning indexer (heads and head dimension; 0: none).
	Embd, QRank, KVRank, Nope, Rope, V, Heads, FFN, ExpertFFN int
	IndexerHeads, IndexerDim                                  int

	// KVB gives the blocks one attn_kv_b matrix, as older DeepSeek files
	// have, instead of the split attn_k_b and attn_v_b.
	KVB bool
	// Tied leaves out output.weight: the output reuses token_embd.
	Tied bool
}

var (
	// GLM-5: 78 blocks (3 dense) and one NextN block, 256 experts.
	glm5Layout = shape{
		Name: "glm5-layout", Source: "GLM-5's tensor names and row widths, two rows per matrix",
		Base: "models/glm5-mini.Q8_0.gguf", Arch: "glm-dsa", Layers: 79, Dense: 3, NextN: 1, Experts: 256,
		Embd: 6144, QRank: 2048, KVRank: 512, Nope: 192, Rope: 64, V: 256, Heads: 64, FFN: 12288, ExpertFFN: 2048,
		Shared: 1, IndexerHeads: 32, IndexerDim: 128,
	}
	// GLM-4.7-Flash: 47 blocks (1 dense) and one NextN block, 64 experts.
	flashLayout = shape{
		Name: "flash-layout", Source: "GLM-4.7-Flash's tensor names and row widths, two rows per matrix",
		Base: "models/ds2-mini.Q8_0.gguf", Arch: "deepseek2", Layers: 48, Dense: 1, NextN: 1, Experts: 64,
		Embd: 2048, QRank: 768, KVRank: 512, Nope: 192, Rope: 64, V: 256, Heads: 20, FFN: 10240, ExpertFFN: 1536,
		Shared: 1,
	}
	// An older DeepSeek file (one attn_kv_b) with 8 experts and indexer
	// tensors: the rules for attention-value tensors and for 8-expert
	// models, which the current GLM files do not reach.
	dsLegacy8Layout = shape{
		Name: "kvb8-layout", Source: "a glm-dsa model with attn_kv_b and 8 experts, two rows per matrix",
		Base: "models/glm5-mini.Q8_0.gguf", Arch: "glm-dsa", Layers: 12, Dense: 1, Experts: 8,
		Embd: 1024, QRank: 512, KVRank: 256, Nope: 64, Rope: 32, V: 64, Heads: 8, FFN: 2816, ExpertFFN: 512,
		Shared: 1, IndexerHeads: 8, IndexerDim: 64, KVB: true,
	}
	// A dense DeepSeek-style model (no expert count) with attn_kv_b and
	// tied embeddings: llama.cpp counts layers instead of reading them
	// from names, upgrades the attention-value tensors by their count, and
	// quantizes token_embd as the output.
	dsLegacyDenseLayout = shape{
		Name: "kvb-dense-layout", Source: "a dense deepseek2 model with attn_kv_b and tied embeddings, two rows per matrix",
		Base: "models/ds2-mini.Q8_0.gguf", Arch: "deepseek2", Layers: 27, Dense: 27,
		Embd: 2048, QRank: 768, KVRank: 512, Nope: 128, Rope: 64, V: 128, Heads: 16, FFN: 10944, KVB: true, Tied: true,
	}
)

// layout returns the input for s: zero tensors in llama.cpp's order,
// matrices BF16 with their real row width and two rows (a stack of two for
// 3-D ones), vectors F32 at full length.
func layout(s shape) *Built {
	return &Built{Name: s.Name, Source: s.Source, build: func(testdata string) (*gguf.Writer, func(), error) {
		base, err := gguf.Open(filepath.Join(testdata, s.Base))
		if err != nil {
			return nil, nil, err
		}
		defer base.Close()
		if base.Architecture() != s.Arch {
			return nil, nil, fmt.Errorf("%s: architecture %q, want %q", s.Base, base.Architecture(), s.Arch)
		}
		w := gguf.NewWriter()
		a := s.Arch + "."
		for _, kv := range base.KVs {
			// A dense model has no expert or group counts (llama.cpp
			// still reads the other expert keys of deepseek2 models).
			switch strings.TrimPrefix(kv.Key, a) {
			case "expert_count", "expert_used_count", "expert_group_count", "expert_group_used_count":
				if s.Experts == 0 {
					continue
				}
			}
			w.SetKV(kv.Key, kv.Value)
		}
		w.SetKV("general.name", gguf.String(s.Name))
		w.SetKV("general.file_type", gguf.Uint32(fileTypeOf(tensor.BF16)))
		u := func(v int) gguf.Value { return gguf.Uint32(uint32(v)) }
		w.SetKV(a+"block_count", u(s.Layers))
		w.SetKV(a+"leading_dense_block_count", u(s.Dense))
		w.SetKV(a+"embedding_length", u(s.Embd))
		if s.Experts > 0 {
			w.SetKV(a+"expert_count", u(s.Experts))
		}
		if s.NextN > 0 {
			w.SetKV(a+"nextn_predict_layers", u(s.NextN))
		} else {
			w.RemoveKV(a + "nextn_predict_layers")
		}
		for _, t := range s.tensors() {
			typ := tensor.BF16
			if len(t.dims) == 1 || strings.HasSuffix(t.name, "ffn_gate_inp.weight") {
				typ = tensor.F32
			}
			size, err := typ.RowSize(t.dims[0])
			if err != nil {
				return nil, nil, err
			}
			for _, d := range t.dims[1:] {
				size *= d
			}
			if err := w.AddTensor(t.name, typ, t.dims, make([]byte, size)); err != nil {
				return nil, nil, err
			}
		}
		return w, func() {}, nil
	}}
}

type shapeTensor struct {
	name string
	dims []int64
}

// tensors lists the layout's tensors, with every dimension after the row
// width cut to 2.
func (s *shape) tensors() []shapeTensor {
	var out []shapeTensor
	add := func(name string, ne0, rank int) {
		dims := []int64{int64(ne0)}
		for range rank - 1 {
			dims = append(dims, 2)
		}
		out = append(out, shapeTensor{name, dims})
	}
	E := s.Embd
	add("token_embd.weight", E, 2)
	add("output_norm.weight", E, 1)
	if !s.Tied {
		add("output.weight", E, 2)
	}
	for l := range s.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		add(p+"attn_norm.weight", E, 1)
		add(p+"attn_q_a.weight", E, 2)
		add(p+"attn_q_a_norm.weight", s.QRank, 1)
		add(p+"attn_q_b.weight", s.QRank, 2)
		add(p+"attn_kv_a_mqa.weight", E, 2)
		add(p+"attn_kv_a_norm.weight", s.KVRank, 1)
		if s.KVB {
			add(p+"attn_kv_b.weight", s.KVRank, 2)
		} else {
			add(p+"attn_k_b.weight", s.Nope, 3)
			add(p+"attn_v_b.weight", s.KVRank, 3)
		}
		add(p+"attn_output.weight", s.Heads*s.V, 2)
		add(p+"ffn_norm.weight", E, 1)
		if s.IndexerHeads > 0 {
			add(p+"indexer.attn_k.weight", E, 2)
			add(p+"indexer.attn_q_b.weight", s.QRank, 2)
			add(p+"indexer.k_norm.weight", s.IndexerDim, 1)
			add(p+"indexer.k_norm.bias", s.IndexerDim, 1)
			add(p+"indexer.proj.weight", E, 2)
		}
		if l < s.Dense {
			add(p+"ffn_gate.weight", E, 2)
			add(p+"ffn_up.weight", E, 2)
			add(p+"ffn_down.weight", s.FFN, 2)
		} else {
			add(p+"ffn_gate_inp.weight", E, 2)
			add(p+"exp_probs_b.bias", s.Experts, 1)
			add(p+"ffn_gate_exps.weight", E, 3)
			add(p+"ffn_up_exps.weight", E, 3)
			add(p+"ffn_down_exps.weight", s.ExpertFFN, 3)
			if s.Shared > 0 {
				add(p+"ffn_gate_shexp.weight", E, 2)
				add(p+"ffn_up_shexp.weight", E, 2)
				add(p+"ffn_down_shexp.weight", s.ExpertFFN*s.Shared, 2)
			}
		}
		if l >= s.Layers-s.NextN {
			add(p+"nextn.eh_proj.weight", 2*E, 2)
			add(p+"nextn.enorm.weight", E, 1)
			add(p+"nextn.hnorm.weight", E, 1)
			add(p+"nextn.shared_head_norm.weight", E, 1)
		}
	}
	return out
}
