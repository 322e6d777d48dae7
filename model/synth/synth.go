// Package synth writes synthetic GGUF models: the tensors and metadata of a
// deepseek2 (MLA + MoE) or glm-dsa (GLM-5: the same plus the DSA lightning
// indexer) model of a chosen shape, filled with random
// weights, with a working tokenizer copied from another GGUF file. They are
// for benchmarks (glmrun bench) and smoke tests: anyone can measure the
// engine on a realistic shape without downloading a model. The text they
// generate is noise.
//
// The weights are random valid quantization blocks written directly (random
// quants and sub-block scales, block scales chosen so that each matrix has
// about the spread of a trained one, 1/sqrt(input width)), not quantized
// from float data: quantizing gigabytes with the least-squares search of
// the K-quants would take minutes, and the speed of a kernel does not
// depend on the values. The type mix follows llama.cpp's Q4_K_M (see
// Mix).
package synth

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/tensor"
)

// Shape is the size of a deepseek2 or glm-dsa model.
type Shape struct {
	// Arch is the GGUF architecture: "deepseek2" ("" too) or "glm-dsa",
	// which adds the indexer of every block.
	Arch      string
	Layers    int // transformer blocks
	LeadDense int // leading blocks with a dense FFN; the rest are MoE
	Embd      int // n_embd
	Vocab     int // tokens (the tokenizer is padded with unused tokens up to it)
	Context   int // context_length
	Heads     int // attention heads
	QRank     int // q_lora_rank
	KVRank    int // kv_lora_rank
	DNope     int // qk_nope_head_dim
	DRope     int // qk_rope_head_dim
	DV        int // v_head_dim
	DenseFFN  int // feed_forward_length of the dense blocks
	ExpertFFN int // expert_feed_forward_length
	Experts   int // routed experts
	Used      int // experts per token
	Shared    int // shared experts

	// The DSA indexer (glm-dsa only).
	IndexHeads int // attention.indexer.head_count
	IndexDim   int // attention.indexer.key_length
	IndexTopK  int // attention.indexer.top_k
}

// ArchGLMDSA is the GGUF architecture of GLM-5.
const ArchGLMDSA = "glm-dsa"

// GLM5 returns GLM-5's attention, indexer and vocabulary shapes with
// layers blocks (the first dense) and its experts cut from 256 to 16 so
// that the file fits a workstation: n_embd 6144, 64 heads, q_lora 2048,
// kv_lora 512, nope 192, rope 64, v 256, indexer 32 heads of 128 with top_k
// 2048, 16 experts of width 2048 (8 used, 1 shared), dense FFN 12288, a
// 154880-token vocabulary. Four blocks take about 3.6 GB at Q4_K_M.
func GLM5(layers int) Shape {
	return Shape{
		Arch: ArchGLMDSA, Layers: layers, LeadDense: 1, Embd: 6144, Vocab: 154880, Context: 202752,
		Heads: 64, QRank: 2048, KVRank: 512, DNope: 192, DRope: 64, DV: 256,
		DenseFFN: 12288, ExpertFFN: 2048, Experts: 16, Used: 8, Shared: 1,
		IndexHeads: 32, IndexDim: 128, IndexTopK: 2048,
	}
}

// arch returns the GGUF architecture name.
func (s *Shape) arch() string {
	if s.Arch == "" {
		return "deepseek2"
	}
	return s.Arch
}

// Flash returns the shape of GLM-4.7-Flash with layers blocks (the real
// model has 47): n_embd 2048, 20 heads, q_lora 768, kv_lora 512, nope 192,
// rope 64, v 256, 64 experts of width 1536 (4 used, 1 shared), dense FFN
// 10240 in the first block, a 151552-token vocabulary.
func Flash(layers int) Shape {
	return Shape{
		Layers: layers, LeadDense: 1, Embd: 2048, Vocab: 151552, Context: 202752,
		Heads: 20, QRank: 768, KVRank: 512, DNope: 192, DRope: 64, DV: 256,
		DenseFFN: 10240, ExpertFFN: 1536, Experts: 64, Used: 4, Shared: 1,
	}
}

// check reports a shape that cannot make a model.
func (s *Shape) check() error {
	pos := []struct {
		name string
		v    int
	}{{"layers", s.Layers}, {"embedding", s.Embd}, {"vocab", s.Vocab}, {"context", s.Context},
		{"heads", s.Heads}, {"q lora rank", s.QRank}, {"kv lora rank", s.KVRank}, {"nope dims", s.DNope},
		{"rope dims", s.DRope}, {"v dims", s.DV}}
	for _, p := range pos {
		if p.v <= 0 {
			return fmt.Errorf("synth: %s %d, want > 0", p.name, p.v)
		}
	}
	switch {
	case s.LeadDense < 0 || s.LeadDense > s.Layers:
		return fmt.Errorf("synth: %d leading dense blocks of %d", s.LeadDense, s.Layers)
	case s.LeadDense > 0 && s.DenseFFN <= 0:
		return fmt.Errorf("synth: dense FFN width %d, want > 0", s.DenseFFN)
	case s.LeadDense < s.Layers && (s.Experts <= 0 || s.Used <= 0 || s.Used > s.Experts || s.ExpertFFN <= 0 || s.Shared < 0):
		return fmt.Errorf("synth: bad experts: %d of %d used, width %d, %d shared", s.Used, s.Experts, s.ExpertFFN, s.Shared)
	case s.DRope%2 != 0:
		return fmt.Errorf("synth: rope dims %d, want even", s.DRope)
	case s.Arch != "" && s.Arch != "deepseek2" && s.Arch != ArchGLMDSA:
		return fmt.Errorf("synth: architecture %q, want deepseek2 or %s", s.Arch, ArchGLMDSA)
	case s.Arch == ArchGLMDSA && (s.IndexHeads <= 0 || s.IndexDim < s.DRope || s.IndexTopK <= 0):
		return fmt.Errorf("synth: bad indexer: %d heads of %d dims (at least the %d rope dims), top_k %d",
			s.IndexHeads, s.IndexDim, s.DRope, s.IndexTopK)
	}
	for _, w := range []int{s.Embd, s.QRank, s.KVRank, s.DNope, s.Heads * s.DV, s.DenseFFN, s.ExpertFFN, s.IndexDim} {
		if w%32 != 0 {
			return fmt.Errorf("synth: every matrix width must be a multiple of 32 (got %d)", w)
		}
	}
	return nil
}

// Mix names the weight types: "Q4_K_M" (llama.cpp's mix: Q4_K matrices;
// output, and attn_v_b and ffn_down* in the blocks llama.cpp gives more
// bits, Q6_K; rows whose width is not a multiple of 256 fall back as
// llama.cpp does, Q4_K to Q5_0 and Q6_K to Q8_0) or "Q8_0" (every matrix).
// Norms, the router and its bias are F32.
type Mix string

// The mixes Write knows.
const (
	MixQ4KM Mix = "Q4_K_M"
	MixQ80  Mix = "Q8_0"
)

// Options configures Write.
type Options struct {
	Shape Shape
	Mix   Mix    // "" means MixQ4KM
	Seed  uint64 // random stream
	Name  string // general.name; "" means "synth-deepseek2"
	// Tokenizer is the file whose tokenizer.* metadata is copied (padded
	// with unused tokens up to Shape.Vocab). Required.
	Tokenizer *gguf.File
	// Progress, if set, is called with the bytes of tensor data made so
	// far and the total.
	Progress func(done, total int64)
}

// Write writes the model to path and returns the size of its tensor data.
// It holds the whole file in memory while writing.
func Write(path string, o Options) (int64, error) {
	w, n, err := Build(o)
	if err != nil {
		return 0, err
	}
	if err := w.WriteFile(path); err != nil {
		return 0, fmt.Errorf("synth: %w", err)
	}
	return n, nil
}

// Build makes the model's writer (metadata and tensors) and returns it
// with the size of the tensor data.
func Build(o Options) (*gguf.Writer, int64, error) {
	s := o.Shape
	if err := s.check(); err != nil {
		return nil, 0, err
	}
	if o.Mix == "" {
		o.Mix = MixQ4KM
	}
	if o.Mix != MixQ4KM && o.Mix != MixQ80 {
		return nil, 0, fmt.Errorf("synth: unknown mix %q (want %s or %s)", o.Mix, MixQ4KM, MixQ80)
	}
	if o.Tokenizer == nil {
		return nil, 0, errors.New("synth: no tokenizer source")
	}
	if o.Name == "" {
		o.Name = "synth-" + s.arch()
	}
	w := gguf.NewWriter()
	if err := setKVs(w, &o); err != nil {
		return nil, 0, err
	}
	specs := tensors(&s, o.Mix)
	var total int64
	for _, t := range specs {
		total += t.bytes()
	}
	g := gen{r: rand.New(rand.NewPCG(o.Seed, 0x5eed)), progress: o.Progress, total: total}
	for _, t := range specs {
		data := g.make(t)
		if err := w.AddTensor(t.name, t.typ, t.dims, data); err != nil {
			return nil, 0, fmt.Errorf("synth: %w", err)
		}
	}
	return w, total, nil
}

// spec is one tensor to make.
type spec struct {
	name  string
	typ   tensor.Type
	dims  []int64 // ggml ne order: dims[0] is the row width
	std   float32 // target spread of the values
	value float32 // for norms: every value (std then jitters it)
}

func (t *spec) rows() int64 {
	n := int64(1)
	for _, d := range t.dims[1:] {
		n *= d
	}
	return n
}

func (t *spec) bytes() int64 {
	rb, err := t.typ.RowSize(t.dims[0])
	if err != nil {
		panic(err) // widths are checked multiples of 32 and types fall back
	}
	return rb * t.rows()
}

// useMoreBits is llama.cpp's choice of the blocks whose attn_v and
// ffn_down get Q6_K in a Q4_K_M mix: the first and last eighth and every
// third block between.
func useMoreBits(l, n int) bool {
	return l < n/8 || l >= 7*n/8 || (l-n/8)%3 == 2
}

// matType is the type of a matrix of row width cols: want, or llama.cpp's
// fallback when cols is not a whole number of its blocks.
func matType(want tensor.Type, cols int) tensor.Type {
	if cols%want.BlockSize() == 0 {
		return want
	}
	switch want {
	case tensor.Q4_K:
		return tensor.Q5_0
	case tensor.Q5_K:
		return tensor.Q5_1
	case tensor.Q6_K:
		return tensor.Q8_0
	}
	return tensor.Q8_0
}

// tensors lists the model's tensors in llama.cpp's order.
func tensors(s *Shape, mix Mix) []spec {
	base, more := tensor.Q4_K, tensor.Q6_K
	if mix == MixQ80 {
		base, more = tensor.Q8_0, tensor.Q8_0
	}
	E, H := int64(s.Embd), int64(s.Heads)
	std := func(cols int64) float32 { return float32(1 / math.Sqrt(float64(cols))) }
	mat := func(name string, want tensor.Type, dims ...int64) spec {
		return spec{name: name, typ: matType(want, int(dims[0])), dims: dims, std: std(dims[0])}
	}
	norm := func(name string, n int64) spec {
		return spec{name: name, typ: tensor.F32, dims: []int64{n}, value: 1, std: 0.05}
	}
	out := []spec{
		{name: "token_embd.weight", typ: matType(base, s.Embd), dims: []int64{E, int64(s.Vocab)}, std: 1},
		norm("output_norm.weight", E),
		mat("output.weight", more, E, int64(s.Vocab)),
	}
	for l := 0; l < s.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		vType, downType := base, base
		if useMoreBits(l, s.Layers) {
			vType, downType = more, more
		}
		kr, dr := int64(s.KVRank), int64(s.DRope)
		out = append(out,
			norm(p+"attn_norm.weight", E),
			mat(p+"attn_q_a.weight", base, E, int64(s.QRank)),
			norm(p+"attn_q_a_norm.weight", int64(s.QRank)),
			mat(p+"attn_q_b.weight", base, int64(s.QRank), H*int64(s.DNope+s.DRope)),
			mat(p+"attn_kv_a_mqa.weight", base, E, kr+dr),
			norm(p+"attn_kv_a_norm.weight", kr),
			mat(p+"attn_k_b.weight", base, int64(s.DNope), kr, H),
			mat(p+"attn_v_b.weight", vType, kr, int64(s.DV), H),
			mat(p+"attn_output.weight", base, H*int64(s.DV), E),
		)
		if s.Arch == ArchGLMDSA {
			D := int64(s.IndexDim)
			out = append(out,
				mat(p+"indexer.attn_k.weight", base, E, D),
				mat(p+"indexer.attn_q_b.weight", base, int64(s.QRank), int64(s.IndexHeads)*D),
				spec{name: p + "indexer.k_norm.bias", typ: tensor.F32, dims: []int64{D}, std: 0.05},
				norm(p+"indexer.k_norm.weight", D),
				mat(p+"indexer.proj.weight", base, E, int64(s.IndexHeads)),
			)
		}
		out = append(out, norm(p+"ffn_norm.weight", E))
		if l < s.LeadDense {
			F := int64(s.DenseFFN)
			out = append(out,
				mat(p+"ffn_gate.weight", base, E, F),
				mat(p+"ffn_up.weight", base, E, F),
				mat(p+"ffn_down.weight", downType, F, E),
			)
			continue
		}
		X, Fe := int64(s.Experts), int64(s.ExpertFFN)
		out = append(out,
			spec{name: p + "ffn_gate_inp.weight", typ: tensor.F32, dims: []int64{E, X}, std: std(E)},
			spec{name: p + "exp_probs_b.bias", typ: tensor.F32, dims: []int64{X}, std: 0.01},
			mat(p+"ffn_gate_exps.weight", base, E, Fe, X),
			mat(p+"ffn_up_exps.weight", base, E, Fe, X),
			mat(p+"ffn_down_exps.weight", downType, Fe, E, X),
		)
		if s.Shared > 0 {
			Fs := Fe * int64(s.Shared)
			out = append(out,
				mat(p+"ffn_gate_shexp.weight", base, E, Fs),
				mat(p+"ffn_up_shexp.weight", base, E, Fs),
				mat(p+"ffn_down_shexp.weight", downType, Fs, E),
			)
		}
	}
	return out
}

// gen makes tensor data from one random stream.
type gen struct {
	r        *rand.Rand
	progress func(done, total int64)
	done     int64
	total    int64
}

// make returns t's data: random valid blocks whose values spread about
// t.std (see the package comment).
func (g *gen) make(t spec) []byte {
	data := make([]byte, t.bytes())
	chunk := (64 << 20) / t.typ.TypeSize() * t.typ.TypeSize() // whole blocks: fill sets each block's scales
	for off := 0; off < len(data); off += chunk {
		g.fill(t, data[off:min(off+chunk, len(data))])
		g.done += int64(min(chunk, len(data)-off))
		if g.progress != nil {
			g.progress(g.done, g.total)
		}
	}
	return data
}

// fill writes random blocks of t to b, a whole number of blocks.
func (g *gen) fill(t spec, b []byte) {
	if t.typ == tensor.F32 {
		for i := 0; i+4 <= len(b); i += 4 {
			v := t.value + t.std*float32(g.r.NormFloat64())
			binary.LittleEndian.PutUint32(b[i:], math.Float32bits(v))
		}
		return
	}
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], g.r.Uint64())
	}
	for i := len(b) &^ 7; i < len(b); i++ {
		b[i] = byte(g.r.Uint32())
	}
	bs := t.typ.TypeSize()
	// Spread of a block's values per unit of its f16 scale d, for uniform
	// random quants and sub-block scales (the stds of the integer parts).
	var unit float32
	switch t.typ {
	case tensor.Q4_K:
		unit = 240 // d·sc·(q−7.5) + d·7.5·(sc−m) with dmin = 7.5·d
	case tensor.Q6_K:
		unit = 1370 // d·sc·(q−32), sc int8
	case tensor.Q5_0:
		unit = 9.2 // d·(q−16)
	case tensor.Q8_0:
		unit = 74 // d·q
	default:
		panic(fmt.Sprintf("synth: no block filler for %s", t.typ))
	}
	d := t.std / unit
	for off := 0; off+bs <= len(b); off += bs {
		blk := b[off : off+bs]
		di := tensor.F32ToF16(d * (0.75 + 0.5*g.r.Float32()))
		switch t.typ {
		case tensor.Q4_K:
			binary.LittleEndian.PutUint16(blk[0:], di)
			binary.LittleEndian.PutUint16(blk[2:], tensor.F32ToF16(7.5*tensor.F16ToF32(di)))
		case tensor.Q6_K:
			binary.LittleEndian.PutUint16(blk[208:], di)
		case tensor.Q5_0, tensor.Q8_0:
			binary.LittleEndian.PutUint16(blk[0:], di)
		}
	}
}

// setKVs writes the metadata: architecture and shape, then the tokenizer.
func setKVs(w *gguf.Writer, o *Options) error {
	s := &o.Shape
	ftype := uint32(15) // MOSTLY_Q4_K_M
	if o.Mix == MixQ80 {
		ftype = 7
	}
	u := func(v int) gguf.Value { return gguf.Uint32(uint32(v)) }
	a := s.arch() + "."
	scale := float32(1.8) // GLM-4.7-Flash's routed scaling
	if s.Arch == ArchGLMDSA {
		scale = 2.5 // GLM-5's
	}
	kvs := []gguf.KV{
		{Key: "general.architecture", Value: gguf.String(s.arch())},
		{Key: "general.name", Value: gguf.String(o.Name)},
		{Key: "general.description", Value: gguf.String(fmt.Sprintf(
			"glmrun synth: random weights (seed %d, mix %s) for benchmarks; its output is noise", o.Seed, o.Mix))},
		{Key: a + "vocab_size", Value: u(s.Vocab)},
		{Key: a + "context_length", Value: u(s.Context)},
		{Key: a + "embedding_length", Value: u(s.Embd)},
		{Key: a + "block_count", Value: u(s.Layers)},
		{Key: a + "leading_dense_block_count", Value: u(s.LeadDense)},
		{Key: a + "feed_forward_length", Value: u(max(s.DenseFFN, 1))},
		{Key: a + "expert_feed_forward_length", Value: u(s.ExpertFFN)},
		{Key: a + "expert_count", Value: u(s.Experts)},
		{Key: a + "expert_used_count", Value: u(s.Used)},
		{Key: a + "expert_shared_count", Value: u(s.Shared)},
		{Key: a + "expert_group_count", Value: u(1)},
		{Key: a + "expert_group_used_count", Value: u(1)},
		{Key: a + "expert_weights_scale", Value: gguf.Float32(scale)},
		{Key: a + "expert_weights_norm", Value: gguf.Bool(true)},
		{Key: a + "expert_gating_func", Value: u(2)}, // sigmoid
		{Key: a + "attention.head_count", Value: u(s.Heads)},
		{Key: a + "attention.head_count_kv", Value: u(1)},
		{Key: a + "attention.key_length", Value: u(s.KVRank + s.DRope)},
		{Key: a + "attention.value_length", Value: u(s.KVRank)},
		{Key: a + "attention.layer_norm_rms_epsilon", Value: gguf.Float32(1e-5)},
		{Key: a + "attention.q_lora_rank", Value: u(s.QRank)},
		{Key: a + "attention.kv_lora_rank", Value: u(s.KVRank)},
		{Key: a + "attention.key_length_mla", Value: u(s.DNope + s.DRope)},
		{Key: a + "attention.value_length_mla", Value: u(s.DV)},
		{Key: a + "rope.dimension_count", Value: u(s.DRope)},
		{Key: a + "rope.freq_base", Value: gguf.Float32(1e6)},
	}
	if s.Arch == ArchGLMDSA {
		kvs = append(kvs,
			gguf.KV{Key: a + "nextn_predict_layers", Value: u(0)},
			gguf.KV{Key: a + "attention.indexer.head_count", Value: u(s.IndexHeads)},
			gguf.KV{Key: a + "attention.indexer.key_length", Value: u(s.IndexDim)},
			gguf.KV{Key: a + "attention.indexer.top_k", Value: u(s.IndexTopK)},
		)
	}
	for _, kv := range kvs {
		w.SetKV(kv.Key, kv.Value)
	}
	if err := copyTokenizer(w, o.Tokenizer, s.Vocab); err != nil {
		return err
	}
	w.SetKV("general.quantization_version", u(2))
	w.SetKV("general.file_type", gguf.Uint32(ftype))
	return nil
}

// copyTokenizer copies every tokenizer.* key of src, padding the token
// list (and the per-token arrays) to vocab entries with unused tokens.
func copyTokenizer(w *gguf.Writer, src *gguf.File, vocab int) error {
	toks, err := src.Strings("tokenizer.ggml.tokens")
	if err != nil {
		return fmt.Errorf("synth: tokenizer source: %w", err)
	}
	if len(toks) > vocab {
		return fmt.Errorf("synth: the tokenizer of %s has %d tokens, more than the vocabulary %d", src.Path, len(toks), vocab)
	}
	for _, kv := range src.KVs {
		if !strings.HasPrefix(kv.Key, "tokenizer.") {
			continue
		}
		v := kv.Value
		switch kv.Key {
		case "tokenizer.ggml.tokens":
			padded := append([]string(nil), toks...)
			for i := len(toks); i < vocab; i++ {
				padded = append(padded, fmt.Sprintf("<|synth_unused_%d|>", i))
			}
			v = gguf.Array(padded)
		case "tokenizer.ggml.token_type":
			types, err := src.Ints(kv.Key)
			if err != nil {
				return fmt.Errorf("synth: tokenizer source: %w", err)
			}
			t32 := make([]int32, 0, vocab)
			for _, t := range types {
				t32 = append(t32, int32(t))
			}
			for len(t32) < vocab {
				t32 = append(t32, 5) // unused
			}
			v = gguf.Array(t32)
		case "tokenizer.ggml.scores":
			sc, err := src.Floats(kv.Key)
			if err != nil {
				return fmt.Errorf("synth: tokenizer source: %w", err)
			}
			f := make([]float32, 0, vocab)
			for _, x := range sc {
				f = append(f, float32(x))
			}
			for len(f) < vocab {
				f = append(f, 0)
			}
			v = gguf.Array(f)
		}
		w.SetKV(kv.Key, v)
	}
	return nil
}
