package convert

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/glmrun/glmrun/model"
	"github.com/glmrun/glmrun/safetensors"
	"github.com/glmrun/glmrun/tensor"
)

// kind is how an output tensor is made from its sources.
type kind int

const (
	kindCopy  kind = iota // one source, same element order
	kindStack             // one source per expert, stacked along ne2
	kindKB                // the key half of kv_b_proj, transposed per head
	kindVB                // the value half of kv_b_proj
)

// source is one checkpoint tensor and, for an FP8 weight, its block
// scales.
type source struct {
	t     *safetensors.Tensor
	scale *safetensors.Tensor
}

// outTensor is one GGUF tensor to write.
type outTensor struct {
	name string // GGUF name
	hf   string // the HF tensor it comes from (expert 0 for a stack)
	typ  tensor.Type
	ne   []int64 // ggml order
	kind kind
	srcs []source
}

// size returns the tensor's data size in the output file.
func (o *outTensor) size() int64 {
	n := int64(1)
	for _, d := range o.ne[1:] {
		n *= d
	}
	row, _ := o.typ.RowSize(o.ne[0])
	return row * n
}

// numElements is the element count.
func (o *outTensor) numElements() int64 {
	n := int64(1)
	for _, d := range o.ne {
		n *= d
	}
	return n
}

// planner builds the output tensor list.
type planner struct {
	s      *spec
	ck     *safetensors.Checkpoint
	ftype  tensor.Type
	out    []*outTensor
	used   map[string]bool // HF names consumed
	scales map[string]*safetensors.Tensor
}

// ckErr names the file a tensor is in.
func ckErr(t *safetensors.Tensor, format string, args ...any) error {
	return fmt.Errorf("convert: %s: tensor %q: %s", t.Path, t.Name, fmt.Sprintf(format, args...))
}

// multimodalSkip reports the names llama.cpp's TextModel drops as parts of
// a vision or audio tower.
func multimodalSkip(name string) bool {
	n := strings.TrimPrefix(name, "model.")
	for _, p := range []string{"mlp", "vit.", "vpm.", "siglip2.", "conformer.", "connector.", "merger.", "resampler.",
		"sound_encoder.", "sound_projection.", "speech_embeddings."} {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	for _, c := range []string{"visual.", "vision.", "audio.", "talker.", "vision_", "audio_", "token2wav.", "code2wav.",
		"projector.", "pre_mm_projector_norm", "image_newline", "view_seperator", "patch_embed", "patch_embedding",
		"patch_merger.", "patch_merge_mlp.", "sam_model", "qwen2_model"} {
		if strings.Contains(name, c) {
			return true
		}
	}
	return false
}

// layerOf returns N of "model.layers.N.…", or -1.
func layerOf(name string) int {
	rest, ok := strings.CutPrefix(name, "model.layers.")
	if !ok {
		return -1
	}
	n, _, ok := strings.Cut(rest, ".")
	if !ok {
		return -1
	}
	l, err := strconv.Atoi(n)
	if err != nil || l < 0 {
		return -1
	}
	return l
}

// buildPlan lists the GGUF tensors in the order llama.cpp writes them:
// the checkpoint's tensors in its order (shard by shard, sorted by name),
// the experts of a layer stacked when the last of them is reached, and
// kv_b_proj split where it stands. It checks every name, shape and dtype
// against the config and that nothing required is missing.
func buildPlan(ck *safetensors.Checkpoint, s *spec, ftype tensor.Type) ([]*outTensor, error) {
	p := &planner{s: s, ck: ck, ftype: ftype, used: map[string]bool{}, scales: map[string]*safetensors.Tensor{}}
	var names []*safetensors.Tensor
	for _, t := range ck.Tensors {
		switch {
		case strings.HasSuffix(t.Name, "_scale_inv"):
			if s.quantMethod != "fp8" {
				return nil, ckErr(t, "a block-scale tensor, but config.json's quantization_config.quant_method is not \"fp8\"")
			}
			w := strings.TrimSuffix(t.Name, "_scale_inv")
			wt, ok := ck.Tensor(w)
			if !ok {
				return nil, ckErr(t, "scales a weight %q that the checkpoint does not have", w)
			}
			p.scales[wt.Name] = t
		case s.quantMethod == "fp8" && (strings.HasSuffix(t.Name, ".activation_scale") || strings.HasSuffix(t.Name, "_activation_scale")):
			// Unused by inference; llama.cpp drops them too.
		default:
			names = append(names, t)
		}
	}
	experts := map[int]map[string]*safetensors.Tensor{}
	for _, t := range names {
		name := t.Name
		if multimodalSkip(name) || strings.HasSuffix(name, ".attention.masked_bias") ||
			strings.HasSuffix(name, ".attention.bias") || strings.HasSuffix(name, ".rotary_emb.inv_freq") {
			continue
		}
		if l := layerOf(name); l >= s.layers && !s.keepMTP {
			continue // an MTP block that is not kept
		} else if l >= s.blocks {
			return nil, ckErr(t, "layer %d is past the %d trunk layers and %d NextN layers of config.json", l, s.layers, s.nextn)
		}
		if s.tied && (name == "lm_head.weight" || name == "model.lm_head.weight") {
			continue
		}
		if t.DType.IsFP8() && p.scales[name] == nil {
			return nil, ckErr(t, "%s weight without its weight_scale_inv block scales", t.DType)
		}
		if !safetensors.CanConvert(t.DType) {
			return nil, ckErr(t, "dtype %s cannot be converted", t.DType)
		}
		if strings.Contains(name, "mlp.experts") {
			l, e, w, err := p.parseExpert(t)
			if err != nil {
				return nil, err
			}
			if experts[l] == nil {
				experts[l] = map[string]*safetensors.Tensor{}
			}
			experts[l][strconv.Itoa(e)+"."+w] = t
			if len(experts[l]) == 3*s.experts {
				if err := p.stack(l, experts[l]); err != nil {
					return nil, err
				}
				delete(experts, l)
			}
			continue
		}
		if err := p.add(t); err != nil {
			return nil, err
		}
	}
	for l, m := range experts {
		for e := range s.experts {
			for _, w := range []string{"down_proj", "gate_proj", "up_proj"} {
				if m[strconv.Itoa(e)+"."+w] == nil {
					return nil, fmt.Errorf("convert: %s: tensor %q is missing (layer %d has %d of its %d expert tensors)",
						ck.Dir, fmt.Sprintf("model.layers.%d.mlp.experts.%d.%s.weight", l, e, w), l, len(m), 3*s.experts)
				}
			}
		}
	}
	if err := p.checkRequired(); err != nil {
		return nil, err
	}
	for _, o := range p.out {
		o.typ = outType(o, ftype)
	}
	return p.out, nil
}

// parseExpert splits model.layers.L.mlp.experts.E.W.weight.
func (p *planner) parseExpert(t *safetensors.Tensor) (l, e int, w string, err error) {
	bad := func(msg string) (int, int, string, error) {
		return 0, 0, "", ckErr(t, "%s (want model.layers.L.mlp.experts.E.{gate,up,down}_proj.weight)", msg)
	}
	l = layerOf(t.Name)
	if l < 0 {
		return bad("an expert tensor outside a layer")
	}
	rest, ok := strings.CutPrefix(t.Name, fmt.Sprintf("model.layers.%d.mlp.experts.", l))
	if !ok {
		return bad("an expert tensor of an unknown layout")
	}
	es, tail, ok := strings.Cut(rest, ".")
	e, err = strconv.Atoi(es)
	if !ok || err != nil || strconv.Itoa(e) != es {
		return bad("fused or unknown expert layout")
	}
	w, ok = strings.CutSuffix(tail, ".weight")
	if !ok || (w != "gate_proj" && w != "up_proj" && w != "down_proj") {
		return bad("unknown expert projection")
	}
	if e >= p.s.experts {
		return 0, 0, "", ckErr(t, "expert %d, but config.json has n_routed_experts %d", e, p.s.experts)
	}
	if l < p.s.dense {
		return 0, 0, "", ckErr(t, "an expert in layer %d, one of the first_k_dense_replace %d dense layers", l, p.s.dense)
	}
	return l, e, w, nil
}

// stack adds the three stacked expert tensors of layer l: down, gate, up.
func (p *planner) stack(l int, m map[string]*safetensors.Tensor) error {
	for _, w := range []string{"down_proj", "gate_proj", "up_proj"} {
		first := m["0."+w]
		gname, err := model.HFToGGUF(p.s.arch, first.Name)
		if err != nil {
			return ckErr(first, "%v", err)
		}
		want, err := p.s.expect(gname, l)
		if err != nil {
			return ckErr(first, "%v", err)
		}
		o := &outTensor{name: gname, hf: first.Name, kind: kindStack,
			ne: []int64{want[1], want[0], int64(p.s.experts)}}
		for e := range p.s.experts {
			t := m[strconv.Itoa(e)+"."+w]
			if err := p.checkShape(t, want); err != nil {
				return err
			}
			o.srcs = append(o.srcs, source{t, p.scales[t.Name]})
			p.used[t.Name] = true
		}
		p.out = append(p.out, o)
	}
	return nil
}

// add plans one tensor that is not an expert.
func (p *planner) add(t *safetensors.Tensor) error {
	gname, err := model.HFToGGUF(p.s.arch, t.Name)
	if err != nil {
		return ckErr(t, "no GGUF counterpart in %s", p.s.arch)
	}
	l := layerOf(t.Name)
	want, err := p.s.expect(gname, l)
	if err != nil {
		return ckErr(t, "%v", err)
	}
	if err := p.checkShape(t, want); err != nil {
		return err
	}
	src := []source{{t, p.scales[t.Name]}}
	p.used[t.Name] = true
	if strings.HasSuffix(gname, ".attn_kv_b.weight") {
		s := p.s
		base := strings.TrimSuffix(gname, "attn_kv_b.weight")
		p.out = append(p.out,
			&outTensor{name: base + "attn_k_b.weight", hf: t.Name, kind: kindKB, srcs: src,
				ne: []int64{int64(s.dNope), int64(s.kvRank), int64(s.heads)}},
			&outTensor{name: base + "attn_v_b.weight", hf: t.Name, kind: kindVB, srcs: src,
				ne: []int64{int64(s.kvRank), int64(s.dV), int64(s.heads)}})
		return nil
	}
	ne := slices.Clone(want)
	slices.Reverse(ne)
	p.out = append(p.out, &outTensor{name: gname, hf: t.Name, kind: kindCopy, srcs: src, ne: ne})
	return nil
}

// checkShape compares a tensor's shape with the config's, and its block
// scales' shape with the weight's.
func (p *planner) checkShape(t *safetensors.Tensor, want []int64) error {
	if !slices.Equal(t.Shape, want) {
		return ckErr(t, "shape %s, but config.json (%s) gives %s", t.ShapeString(), p.s.dims(), shapeStr(want))
	}
	sc := p.scales[t.Name]
	if sc == nil {
		return nil
	}
	if len(t.Shape) != 2 {
		return ckErr(sc, "block scales of a %d-D weight", len(t.Shape))
	}
	if !safetensors.CanConvert(sc.DType) {
		return ckErr(sc, "dtype %s cannot be converted", sc.DType)
	}
	if _, _, err := scaleBlocks(t, sc, p.s.fp8Block); err != nil {
		return err
	}
	return nil
}

// scaleBlocks returns the block size (rows, cols) that sc scales t's
// elements by: quantization_config.weight_block_size, or one scale for the
// whole weight or for each row when there is none.
func scaleBlocks(t, sc *safetensors.Tensor, block []int) (br, bc int64, err error) {
	rows, cols := t.Shape[0], t.Shape[1]
	if len(block) == 2 {
		br, bc = int64(block[0]), int64(block[1])
		want := []int64{(rows + br - 1) / br, (cols + bc - 1) / bc}
		if !slices.Equal(sc.Shape, want) {
			return 0, 0, ckErr(sc, "shape %s, but %s %s in %dx%d blocks needs %s", sc.ShapeString(), t.Name, t.ShapeString(), br, bc, shapeStr(want))
		}
		return br, bc, nil
	}
	if len(block) != 0 {
		return 0, 0, ckErr(sc, "weight_block_size has %d entries, want 2", len(block))
	}
	switch n := sc.NumElements(); {
	case n == 1:
		return rows, cols, nil
	case n == rows && (len(sc.Shape) == 1 || len(sc.Shape) == 2 && sc.Shape[1] == 1):
		return 1, cols, nil
	}
	return 0, 0, ckErr(sc, "shape %s does not scale %s %s per tensor or per row (and config.json has no weight_block_size)",
		sc.ShapeString(), t.Name, t.ShapeString())
}

func shapeStr(s []int64) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = strconv.FormatInt(d, 10)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// dims summarises the config's sizes for shape errors.
func (s *spec) dims() string {
	d := fmt.Sprintf("hidden_size %d, vocab_size %d, heads %d, q_lora_rank %d, kv_lora_rank %d, qk_nope %d, qk_rope %d, v_head_dim %d, intermediate %d, moe_intermediate %d, shared experts %d",
		s.embd, s.vocab, s.heads, s.qRank, s.kvRank, s.dNope, s.dRope, s.dV, s.ff, s.ffExp, s.shared)
	if s.arch == "glm-dsa" {
		d += fmt.Sprintf(", indexer heads %d × %d", s.idxHeads, s.idxDim)
	}
	return d
}

// expect returns the Hugging Face shape (outermost first) that the GGUF
// tensor gname of layer l (-1 outside the blocks) must come from, or an
// error if the config has no such tensor there.
func (s *spec) expect(gname string, l int) ([]int64, error) {
	E, V := int64(s.embd), int64(s.vocab)
	H, qr, kr := int64(s.heads), int64(s.qRank), int64(s.kvRank)
	dn, dr, dv := int64(s.dNope), int64(s.dRope), int64(s.dV)
	switch gname {
	case "token_embd.weight", "output.weight":
		return []int64{V, E}, nil
	case "output_norm.weight":
		return []int64{E}, nil
	}
	_, leaf, ok := strings.Cut(strings.TrimPrefix(gname, "blk."), ".")
	if !ok || l < 0 {
		return nil, fmt.Errorf("GGUF tensor %s is not expected", gname)
	}
	mtp := l >= s.layers
	moe := l >= s.dense
	dsa := s.arch == "glm-dsa"
	IH, ID := int64(s.idxHeads), int64(s.idxDim)
	Fe, S := int64(s.ffExp), int64(s.shared)
	no := func(why string) ([]int64, error) { return nil, fmt.Errorf("%s: %s", gname, why) }
	switch leaf {
	case "attn_norm.weight", "ffn_norm.weight":
		return []int64{E}, nil
	case "attn_q_a.weight", "attn_q_a_norm.weight", "attn_q_b.weight":
		if qr == 0 {
			return no("config.json has no q_lora_rank")
		}
		return map[string][]int64{"attn_q_a.weight": {qr, E}, "attn_q_a_norm.weight": {qr}, "attn_q_b.weight": {H * (dn + dr), qr}}[leaf], nil
	case "attn_q.weight":
		if qr != 0 {
			return no("config.json has a q_lora_rank, so q_proj is not expected")
		}
		return []int64{H * (dn + dr), E}, nil
	case "attn_kv_a_mqa.weight":
		return []int64{kr + dr, E}, nil
	case "attn_kv_a_norm.weight":
		return []int64{kr}, nil
	case "attn_kv_b.weight":
		return []int64{H * (dn + dv), kr}, nil
	case "attn_output.weight":
		return []int64{E, H * dv}, nil
	case "indexer.attn_q_b.weight", "indexer.attn_k.weight", "indexer.k_norm.weight", "indexer.k_norm.bias", "indexer.proj.weight":
		if !dsa {
			return no("only glm-dsa has an indexer")
		}
		return map[string][]int64{"indexer.attn_q_b.weight": {IH * ID, qr}, "indexer.attn_k.weight": {ID, E},
			"indexer.k_norm.weight": {ID}, "indexer.k_norm.bias": {ID}, "indexer.proj.weight": {IH, E}}[leaf], nil
	case "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight":
		if moe {
			return no(fmt.Sprintf("a dense FFN tensor in layer %d, which config.json makes a MoE layer (first_k_dense_replace %d)", l, s.dense))
		}
		if leaf == "ffn_down.weight" {
			return []int64{E, int64(s.ff)}, nil
		}
		return []int64{int64(s.ff), E}, nil
	case "ffn_gate_inp.weight", "exp_probs_b.bias", "ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight",
		"ffn_gate_shexp.weight", "ffn_up_shexp.weight", "ffn_down_shexp.weight":
		if !moe {
			return no(fmt.Sprintf("a MoE tensor in layer %d, one of the first_k_dense_replace %d dense layers", l, s.dense))
		}
		switch leaf {
		case "ffn_gate_inp.weight":
			return []int64{int64(s.experts), E}, nil
		case "exp_probs_b.bias":
			return []int64{int64(s.experts)}, nil
		case "ffn_down_exps.weight":
			return []int64{E, Fe}, nil
		case "ffn_gate_exps.weight", "ffn_up_exps.weight":
			return []int64{Fe, E}, nil
		}
		if S == 0 {
			return no("config.json has no shared experts")
		}
		if leaf == "ffn_down_shexp.weight" {
			return []int64{E, Fe * S}, nil
		}
		return []int64{Fe * S, E}, nil
	case "nextn.eh_proj.weight", "nextn.enorm.weight", "nextn.hnorm.weight", "nextn.shared_head_norm.weight",
		"nextn.embed_tokens.weight", "nextn.shared_head_head.weight":
		if !mtp {
			return no(fmt.Sprintf("a NextN tensor in trunk layer %d", l))
		}
		switch leaf {
		case "nextn.eh_proj.weight":
			return []int64{E, 2 * E}, nil
		case "nextn.embed_tokens.weight", "nextn.shared_head_head.weight":
			return []int64{V, E}, nil
		}
		return []int64{E}, nil
	}
	return no("not a tensor glmrun knows")
}

// eachRequired calls fn with each GGUF tensor every model of this config
// must have, in order, until fn returns false. It generates the names as
// it goes: a config claiming millions of layers costs nothing until a
// tensor is found missing.
func (s *spec) eachRequired(fn func(string) bool) {
	req := []string{"token_embd.weight", "output_norm.weight"}
	if !s.tied {
		req = append(req, "output.weight")
	}
	for _, g := range req {
		if !fn(g) {
			return
		}
	}
	for l := range s.blocks {
		b := fmt.Sprintf("blk.%d.", l)
		leaves := []string{"attn_norm.weight", "ffn_norm.weight", "attn_kv_a_mqa.weight", "attn_kv_a_norm.weight",
			"attn_k_b.weight", "attn_output.weight"}
		if l >= s.layers {
			leaves = []string{"nextn.eh_proj.weight", "nextn.enorm.weight", "nextn.hnorm.weight"}
		} else {
			if s.qRank > 0 {
				leaves = append(leaves, "attn_q_a.weight", "attn_q_a_norm.weight", "attn_q_b.weight")
			} else {
				leaves = append(leaves, "attn_q.weight")
			}
			if s.arch == "glm-dsa" && (l >= len(s.indexerFull) || s.indexerFull[l]) {
				leaves = append(leaves, "indexer.attn_q_b.weight", "indexer.attn_k.weight", "indexer.k_norm.weight",
					"indexer.k_norm.bias", "indexer.proj.weight")
			}
			if l < s.dense {
				leaves = append(leaves, "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight")
			} else {
				leaves = append(leaves, "ffn_gate_inp.weight", "ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight")
				if s.shared > 0 {
					leaves = append(leaves, "ffn_gate_shexp.weight", "ffn_up_shexp.weight", "ffn_down_shexp.weight")
				}
			}
		}
		for _, leaf := range leaves {
			if !fn(b + leaf) {
				return
			}
		}
	}
}

// checkRequired reports the first required tensor the plan lacks, by its
// checkpoint name.
func (p *planner) checkRequired() error {
	have := map[string]bool{}
	for _, o := range p.out {
		have[o.name] = true
	}
	var err error
	p.s.eachRequired(func(g string) bool {
		if have[g] {
			return true
		}
		name := g
		if hf, herr := model.GGUFToHF(p.s.arch, g); herr == nil {
			name = hf.Expert(0)
		}
		where := p.ck.Dir
		if len(p.ck.Files) == 1 {
			where = p.ck.Files[0].Path
		} else if len(p.ck.Files) > 1 {
			where = filepath.Join(p.ck.Dir, safetensors.IndexFile)
		}
		err = fmt.Errorf("convert: %s: tensor %q is missing (GGUF %s)", where, name, g)
		return false
	})
	return err
}

// outType is llama.cpp's choice of a tensor's type: F32 for vectors,
// norms, biases, the router and the indexer's head weights; otherwise the
// output type, with Q8_0 falling back to F16 for rows that are not whole
// 32-element blocks.
func outType(o *outTensor, ftype tensor.Type) tensor.Type {
	n := o.name
	if len(o.ne) <= 1 || strings.HasSuffix(n, "_norm.weight") || !strings.HasSuffix(n, ".weight") ||
		strings.HasSuffix(n, ".ffn_gate_inp.weight") || strings.HasSuffix(n, ".indexer.proj.weight") {
		return tensor.F32
	}
	if ftype == tensor.Q8_0 && o.ne[0]%32 != 0 {
		return tensor.F16
	}
	return ftype
}
