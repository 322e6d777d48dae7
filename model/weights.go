package model

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/glmrun/glmrun/attention"
	"github.com/glmrun/glmrun/backend"
	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/tensor"
)

// Weights holds every tensor of a model. Matrices stay in their GGUF type
// (views into the mapped file); norm vectors are copied to float32.
type Weights struct {
	TokenEmbd  backend.Matrix // [V, E] token_embd
	OutputNorm []float32      // [E] output_norm
	Output     backend.Matrix // [V, E] output, or token_embd when tied
	Layers     []Layer        // trunk blocks, then NextN blocks
}

// Layer is one decoder block blk.N.
type Layer struct {
	AttnNorm []float32 // [E]
	Attn     attention.Weights
	FFNNorm  []float32 // [E]
	Dense    *FFN      // leading dense layers
	MoE      *MoE      // the others
	NextN    *NextN    // MTP blocks only (not run by the plain forward)
}

// FFN is a SwiGLU feed-forward network: Down · (silu(Gate·y) ⊙ Up·y).
type FFN struct {
	Gate, Up backend.Matrix // [F, E]
	Down     backend.Matrix // [E, F]
}

// MoE is a routed mixture of experts with optional shared experts.
type MoE struct {
	Router  backend.Matrix // [X, E] ffn_gate_inp
	Bias    []float32      // [X] exp_probs_b (selection only), or nil
	Experts []FFN          // X experts, slices of the stacked tensors
	Shared  *FFN           // shared experts (width Fe·S), or nil
}

// NextN holds the extra tensors of an MTP block (docs/MATH.md section 8).
type NextN struct {
	EHProj         backend.Matrix // [E, 2E]
	ENorm, HNorm   []float32      // [E]
	EmbedTokens    *backend.Matrix
	SharedHeadHead *backend.Matrix
	SharedHeadNorm []float32
}

// loader fetches and checks tensors, remembering the first error.
type loader struct {
	f   *gguf.File
	err error
}

func (l *loader) has(name string) bool {
	_, ok := l.f.Tensor(name)
	return ok
}

// tensor returns the named tensor after checking its ggml dims (trailing
// 1s allowed).
func (l *loader) tensor(name string, dims ...int) *gguf.TensorInfo {
	if l.err != nil {
		return nil
	}
	ti, ok := l.f.Tensor(name)
	if !ok {
		l.err = &MissingTensorError{File: l.f.Path, Name: name}
		return nil
	}
	got := ti.Dims
	for len(got) > len(dims) && got[len(got)-1] == 1 {
		got = got[:len(got)-1]
	}
	want := make([]int64, len(dims))
	for i, d := range dims {
		want[i] = int64(d)
	}
	if !slices.Equal(got, want) {
		l.err = &TensorError{File: l.f.Path, Name: name, Msg: fmt.Sprintf("shape %v, want %v", ti.Dims, want)}
		return nil
	}
	return ti
}

// matrix loads a tensor of ggml dims {cols, d1, d2…} as a [d1·d2…, cols]
// matrix and checks that its type can be dequantized.
func (l *loader) matrix(name string, dims ...int) backend.Matrix {
	ti := l.tensor(name, dims...)
	if ti == nil {
		return backend.Matrix{}
	}
	rows := 1
	for _, d := range dims[1:] {
		rows *= d
	}
	m, err := backend.NewMatrix(name, ti.Type, rows, dims[0], ti.Data)
	m.Mapped = l.f.Mapped()
	if err == nil {
		// Every backend dequantizes what tensor can: check the first row.
		err = tensor.Dequantize(m.Type, m.Row(0), make([]float32, m.Cols))
	}
	if err != nil {
		l.err = &TensorError{File: l.f.Path, Name: name, Msg: err.Error()}
	}
	return m
}

// vector loads a 1-D tensor of n values as float32.
func (l *loader) vector(name string, n int) []float32 {
	m := l.matrix(name, n)
	if l.err != nil {
		return nil
	}
	v := make([]float32, n)
	if err := tensor.Dequantize(m.Type, m.Data, v); err != nil {
		l.err = &TensorError{File: l.f.Path, Name: name, Msg: err.Error()}
	}
	return v
}

// loadWeights loads and checks every tensor the configuration needs.
func loadWeights(f *gguf.File, c *Config) (*Weights, error) {
	l := &loader{f: f}
	E := c.Embd
	w := &Weights{}
	ti, ok := f.Tensor("token_embd.weight")
	if !ok {
		return nil, &MissingTensorError{File: f.Path, Name: "token_embd.weight"}
	}
	if len(ti.Dims) >= 2 && c.VocabSize == 0 {
		c.VocabSize = int(ti.Dims[1])
	}
	if c.VocabSize <= 0 || c.VocabSize > maxDim {
		return nil, fmt.Errorf("model: %s: no vocabulary size (key %q)", f.Path, c.Arch+".vocab_size")
	}
	V := c.VocabSize
	w.TokenEmbd = l.matrix("token_embd.weight", E, V)
	w.OutputNorm = l.vector("output_norm.weight", E)
	if l.has("output.weight") {
		w.Output = l.matrix("output.weight", E, V)
	} else {
		w.Output = w.TokenEmbd
	}
	w.Layers = make([]Layer, c.BlockCount)
	for i := range w.Layers {
		l.layer(&w.Layers[i], i, c)
	}
	if l.err != nil {
		return nil, l.err
	}
	return w, nil
}

func (l *loader) layer(ly *Layer, i int, c *Config) {
	p := fmt.Sprintf("blk.%d.", i)
	E, H, kr, dn, dr, dv := c.Embd, c.Heads, c.KVLoraRank, c.DNope, c.DRope, c.DV
	ly.AttnNorm = l.vector(p+"attn_norm.weight", E)
	a := &ly.Attn
	if c.QLoraRank > 0 {
		a.QA = l.matrix(p+"attn_q_a.weight", E, c.QLoraRank)
		a.QANorm = l.vector(p+"attn_q_a_norm.weight", c.QLoraRank)
		a.QB = l.matrix(p+"attn_q_b.weight", c.QLoraRank, H*(dn+dr))
	} else {
		a.Q = l.matrix(p+"attn_q.weight", E, H*(dn+dr))
	}
	a.KVA = l.matrix(p+"attn_kv_a_mqa.weight", E, kr+dr)
	a.KVANorm = l.vector(p+"attn_kv_a_norm.weight", kr)
	switch {
	case l.has(p+"attn_k_b.weight") || !l.has(p+"attn_kv_b.weight"):
		a.KB = l.matrix(p+"attn_k_b.weight", dn, kr, H)
		a.VB = l.matrix(p+"attn_v_b.weight", kr, dv, H)
	default:
		a.KB, a.VB = l.splitKVB(p+"attn_kv_b.weight", c)
	}
	a.Out = l.matrix(p+"attn_output.weight", H*dv, E)
	l.applyScale(&a.Out, p+"attn_output.scale")
	ffnScales := c.Arch == "glm-dsa" // deepseek2 reads only attn_output's
	shared := c.IndexerShared(i)
	if shared && l.has(p+"indexer.attn_k.weight") && l.err == nil {
		l.err = fmt.Errorf("model: %s: %sindexer.attn_k.weight: layer %d is shared in %s.attention.indexer.types, so it has no indexer of its own",
			l.f.Path, p, i, c.Arch)
	}
	// Every full glm-dsa layer has an indexer: without one it would
	// attend to every key, not the model's selection.
	if c.Arch == "glm-dsa" && !shared {
		Ih, Id := c.IndexerHeads, c.IndexerDim
		a.Indexer = &attention.IndexerWeights{
			QB:     l.matrix(p+"indexer.attn_q_b.weight", c.QLoraRank, Ih*Id),
			K:      l.matrix(p+"indexer.attn_k.weight", E, Id),
			KNormW: l.vector(p+"indexer.k_norm.weight", Id),
			KNormB: l.vector(p+"indexer.k_norm.bias", Id),
			Proj:   l.matrix(p+"indexer.proj.weight", E, Ih),
		}
	}
	ly.FFNNorm = l.vector(p+"ffn_norm.weight", E)
	if i < c.DenseLayers {
		ly.Dense = &FFN{
			Gate: l.matrix(p+"ffn_gate.weight", E, c.FF),
			Up:   l.matrix(p+"ffn_up.weight", E, c.FF),
			Down: l.matrix(p+"ffn_down.weight", c.FF, E),
		}
		if ffnScales {
			l.applyScales(ly.Dense, p, "")
		}
	} else {
		ly.MoE = l.moe(p, c)
		if ffnScales && ly.MoE != nil {
			l.applyExpertScales(ly.MoE.Experts, p)
			if ly.MoE.Shared != nil {
				l.applyScales(ly.MoE.Shared, p, "_shexp")
			}
		}
	}
	if i >= c.Layers {
		n := &NextN{
			EHProj: l.matrix(p+"nextn.eh_proj.weight", 2*E, E),
			ENorm:  l.vector(p+"nextn.enorm.weight", E),
			HNorm:  l.vector(p+"nextn.hnorm.weight", E),
		}
		if l.has(p + "nextn.embed_tokens.weight") {
			m := l.matrix(p+"nextn.embed_tokens.weight", E, c.VocabSize)
			n.EmbedTokens = &m
		}
		if l.has(p + "nextn.shared_head_head.weight") {
			m := l.matrix(p+"nextn.shared_head_head.weight", E, c.VocabSize)
			n.SharedHeadHead = &m
		}
		if l.has(p + "nextn.shared_head_norm.weight") {
			n.SharedHeadNorm = l.vector(p+"nextn.shared_head_norm.weight", E)
		}
		ly.NextN = n
	}
}

func (l *loader) moe(p string, c *Config) *MoE {
	E, X, Fe := c.Embd, c.Experts, c.FFExp
	m := &MoE{Router: l.matrix(p+"ffn_gate_inp.weight", E, X)}
	if l.has(p + "exp_probs_b.bias") {
		m.Bias = l.vector(p+"exp_probs_b.bias", X)
	}
	var gate, up backend.Matrix
	fused := l.has(p+"ffn_gate_up_exps.weight") && !l.has(p+"ffn_gate_exps.weight")
	if fused {
		gate = l.matrix(p+"ffn_gate_up_exps.weight", E, 2*Fe, X)
	} else {
		gate = l.matrix(p+"ffn_gate_exps.weight", E, Fe, X)
		up = l.matrix(p+"ffn_up_exps.weight", E, Fe, X)
	}
	down := l.matrix(p+"ffn_down_exps.weight", Fe, E, X)
	if l.err != nil {
		return nil
	}
	m.Experts = make([]FFN, X)
	for e := range m.Experts {
		if fused {
			m.Experts[e].Gate = gate.Slice(e*2*Fe, Fe)
			m.Experts[e].Up = gate.Slice(e*2*Fe+Fe, Fe)
		} else {
			m.Experts[e].Gate = gate.Slice(e*Fe, Fe)
			m.Experts[e].Up = up.Slice(e*Fe, Fe)
		}
		m.Experts[e].Down = down.Slice(e*E, E)
	}
	if c.SharedExp > 0 {
		Fs := Fe * c.SharedExp
		m.Shared = &FFN{
			Gate: l.matrix(p+"ffn_gate_shexp.weight", E, Fs),
			Up:   l.matrix(p+"ffn_up_shexp.weight", E, Fs),
			Down: l.matrix(p+"ffn_down_shexp.weight", Fs, E),
		}
	}
	return m
}

// scale returns the values of the optional scale tensor name: n values,
// or one broadcast to n; nil if absent.
func (l *loader) scale(name string, n int) []float32 {
	ti, ok := l.f.Tensor(name)
	if !ok || l.err != nil {
		return nil
	}
	if ti.NumElements() == 1 {
		v := l.vector(name, 1)
		if v == nil {
			return nil
		}
		return slices.Repeat(v, n)
	}
	return l.vector(name, n)
}

// applyScale sets m's output scale from the optional tensor name.
func (l *loader) applyScale(m *backend.Matrix, name string) {
	if v := l.scale(name, 1); v != nil {
		m.Scale = v[0]
	}
}

// applyScales sets the scales of a dense or shared-expert FFN
// (ffn_gate<suffix>.scale and so on).
func (l *loader) applyScales(f *FFN, p, suffix string) {
	l.applyScale(&f.Gate, p+"ffn_gate"+suffix+".scale")
	l.applyScale(&f.Up, p+"ffn_up"+suffix+".scale")
	l.applyScale(&f.Down, p+"ffn_down"+suffix+".scale")
}

// applyExpertScales sets the experts' scales from the optional per-expert
// tensors ffn_{gate,up,down}_exps.scale.
func (l *loader) applyExpertScales(experts []FFN, p string) {
	gate := l.scale(p+"ffn_gate_exps.scale", len(experts))
	up := l.scale(p+"ffn_up_exps.scale", len(experts))
	down := l.scale(p+"ffn_down_exps.scale", len(experts))
	for e := range experts {
		if gate != nil {
			experts[e].Gate.Scale = gate[e]
		}
		if up != nil {
			experts[e].Up.Scale = up[e]
		}
		if down != nil {
			experts[e].Down.Scale = down[e]
		}
	}
}

// splitKVB derives attn_k_b and attn_v_b (as F32 matrices) from a legacy
// combined attn_kv_b ne{kr, H(dn+dv)} (docs/FILE-LAYOUTS.md section 2.3):
// k_b(j, c, h) = kv_b[h(dn+dv)+j, c] and v_b(c, j, h) = kv_b[h(dn+dv)+dn+j, c].
func (l *loader) splitKVB(name string, c *Config) (kb, vb backend.Matrix) {
	H, kr, dn, dv := c.Heads, c.KVLoraRank, c.DNope, c.DV
	m := l.matrix(name, kr, H*(dn+dv))
	if l.err != nil {
		return
	}
	kv := make([]float32, m.Rows*m.Cols)
	if err := tensor.Dequantize(m.Type, m.Data, kv); err != nil {
		l.err = &TensorError{File: l.f.Path, Name: name, Msg: err.Error()}
		return
	}
	k := make([]float32, H*kr*dn)
	v := make([]float32, H*dv*kr)
	for h := 0; h < H; h++ {
		for j := 0; j < dn; j++ {
			row := kv[(h*(dn+dv)+j)*kr:]
			for ci := 0; ci < kr; ci++ {
				k[(h*kr+ci)*dn+j] = row[ci]
			}
		}
		copy(v[h*dv*kr:(h+1)*dv*kr], kv[(h*(dn+dv)+dn)*kr:(h*(dn+dv)+dn+dv)*kr])
	}
	var err error
	if kb, err = backend.NewMatrix(name+" (k_b)", tensor.F32, H*kr, dn, f32Bytes(k)); err != nil {
		l.err = err
	}
	if vb, err = backend.NewMatrix(name+" (v_b)", tensor.F32, H*dv, kr, f32Bytes(v)); err != nil {
		l.err = err
	}
	return kb, vb
}

// f32Bytes encodes v as little-endian float32 bytes.
func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}
