package cuda

import (
	_ "embed"
	"math"
	"strconv"

	"github.com/glmrun/glmrun/tensor"
)

// ptxSource is the kernels' PTX module (gen.sh), JIT-compiled by the
// driver when a device opens.
//
//go:embed ptx/glmrun.ptx
var ptxSource []byte

// PTX returns a copy of the embedded PTX module.
func PTX() []byte { return append([]byte(nil), ptxSource...) }

// Parameter kinds of a kernel signature: a device pointer (8 bytes), an
// int (4) or a float (4).
const (
	pPtr = 'p'
	pInt = 'i'
	pF32 = 'f'
)

// mmTypes maps the weight types with matmul and get_rows kernels to their
// kernel name suffix.
var mmTypes = map[tensor.Type]string{
	tensor.F32: "f32", tensor.F16: "f16", tensor.BF16: "bf16",
	tensor.Q4_0: "q4_0", tensor.Q4_1: "q4_1", tensor.Q5_0: "q5_0", tensor.Q5_1: "q5_1", tensor.Q8_0: "q8_0",
	tensor.Q4_K: "q4_k", tensor.Q5_K: "q5_k", tensor.Q6_K: "q6_k", tensor.IQ4_XS: "iq4_xs",
}

// Signatures returns every kernel the Go code launches with its parameter
// kinds, one byte per parameter: 'p' a device pointer (8 bytes), 'i' an
// int32, 'f' a float32. Tests check them against the PTX entries.
func Signatures() map[string]string {
	s := map[string]string{
		"rmsnorm_f32":         "pppiif",
		"layernorm_f32":       "ppppiif",
		"rope_f32":            "piiiiifffffff",
		"add_f32":             "ppi",
		"scale_f32":           "pfi",
		"copy_f32":            "ppi",
		"cache_store_f32":     "ppii",
		"fill_u8":             "pip", // the byte count is 64-bit
		"fill_f32":            "pfi",
		"add_rmsnorm_f32":     "ppppiif",
		"swiglu_f32":          "pppi",
		"softmax_f32":         "pii",
		"router_topk_f32":     "ppppiiiiiif",
		"indexer_scores_f32":  "ppppiiiii",
		"topk_rows_i32":       "ppiii",
		"mla_attend_f32":      "pppppppipiiiiiifii",
		"mla_combine_f32":     "ppppiii",
		"quantize_q8_0_f32":   "ppiii",
		"mmvq_q8_0":           "pppiiiii",
		"quantize_q8_k_f32":   "ppiii",
		"mmvq_q4_k":           "pppiiiii",
		"mmvq_experts_q8_0":   "pppppiiiii",
		"mmvq_experts_q4_k":   "pppppiiiii",
		"mmvq_q6_k":           "pppiiiii",
		"mmvq_experts_q6_k":   "pppppiiiii",
		"mmvq_q5_k":           "pppiiiii",
		"mmvq_experts_q5_k":   "pppppiiiii",
		"mmvq_iq4_xs":         "pppiiiii",
		"mmvq_experts_iq4_xs": "pppppiiiii",
		"moe_sort_i32":        "pppppiiii",
		"moe_gather_f32":      "ppppi",
		"moe_scatter_f32":     "pppppi",
		"moe_sum_f32":         "ppii",
	}
	for _, suf := range mmTypes {
		s["mm_"+suf] = "pppiiiiiiiif"
		s["get_rows_"+suf] = "pppii"
		s["mm_experts_"+suf] = "pppppiiiif"
	}
	return s
}

// encodeArgs writes args into c's argument slots, 8 bytes each, and
// panics if they do not match the kernel's signature: a broken invariant
// of this package, caught by every test that launches it. (The panic
// names the types without holding the arguments, so that they need not
// escape to the heap; the messages are concatenated, not formatted, for
// the name's sake.)
func encodeArgs(c *command, name, sig string, args []any) {
	if len(sig) != len(args) || len(args) > maxArgs {
		panic("cuda: " + name + " takes " + strconv.Itoa(len(sig)) + " arguments, got " + strconv.Itoa(len(args)))
	}
	c.nargs = len(args)
	for i, a := range args {
		ok := false
		switch v := a.(type) {
		case uint64:
			ok = sig[i] == pPtr
			c.args[i] = v
		case int32:
			ok = sig[i] == pInt
			c.args[i] = uint64(uint32(v))
		case float32:
			ok = sig[i] == pF32
			c.args[i] = uint64(math.Float32bits(v))
		}
		if !ok {
			panic("cuda: " + name + " argument " + strconv.Itoa(i) + " does not match its signature " + strconv.Quote(sig))
		}
	}
}
