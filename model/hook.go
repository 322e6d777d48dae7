package model

import (
	"strconv"

	"github.com/glmrun/glmrun/backend"
)

// Hook receives named intermediate activations in forward order. shape is
// row-major (outermost first), e.g. [nTokens, nEmbd]; data is valid only
// during the call (copy what you keep). layer is -1 for globals.
//
// Names: "embd"; per layer "blk.N.attn_norm", "blk.N.kqv_out" (attention
// before attn_output, [T, H·dv]), "blk.N.attn_out", "blk.N.ffn_inp",
// "blk.N.ffn_norm", for MoE layers "blk.N.ffn_moe_out" and
// "blk.N.ffn_shexp", then "blk.N.ffn_out" and "blk.N.out" (the residual
// stream after the layer, llama.cpp's l_out-N); finally "result_norm" and
// "result_output" (the logits). With tensor parallelism over n > 1
// devices, each device's partial sum before the all-reduce comes first:
// "blk.N.attn_out.shard0" … "blk.N.attn_out.shard<n-1>", then
// "blk.N.attn_out" (likewise ffn_out).
type Hook func(name string, layer int, shape []int, data []float32)

// IDHook receives the discrete decisions of the forward pass, in forward
// order: "blk.N.ffn_moe_topk" [T, experts used] (selected experts in
// routing order) and, on layers with a DSA indexer, "blk.N.top_k"
// [T, min(top_k, keys)], each query's selected key positions ascending,
// padded with −1 when it had fewer visible keys. ids is valid only during
// the call.
type IDHook func(name string, layer int, shape []int, ids []int32)

// emit calls the hook, if any, for layer (−1: global) and node with the
// contents of b on ss's device.
func (s *Session) emit(layer int, node string, ss *sessionShard, b backend.Buffer, rows, cols int) {
	if s.opts.Hook == nil {
		return
	}
	shape := []int{rows, cols}
	v := grow(s.host.a, b.Len())
	s.host.a = v
	ss.dev.Read(v, b)
	s.opts.Hook(nodeName(layer, node), layer, shape, v)
}

// emitHost calls the hook, if any, with host data.
func (s *Session) emitHost(layer int, node string, data []float32, rows, cols int) {
	if s.opts.Hook == nil {
		return
	}
	shape := []int{rows, cols}
	s.opts.Hook(nodeName(layer, node), layer, shape, data)
}

func (s *Session) emitIDs(layer int, node string, ids []int32, rows, cols int) {
	if s.opts.IDHook == nil {
		return
	}
	shape := []int{rows, cols}
	s.opts.IDHook(nodeName(layer, node), layer, shape, ids)
}

func nodeName(layer int, node string) string {
	if layer < 0 {
		return node
	}
	return "blk." + strconv.Itoa(layer) + "." + node
}
