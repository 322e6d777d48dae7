package model

import (
	"fmt"
	"slices"
	"testing"
)

// TestHookNames checks the names, order and shapes the hooks emit for one
// dense and two MoE layers with a DSA indexer.
func TestHookNames(t *testing.T) {
	m := loadTest(t, "glm5-mini.Q8_0")
	type event struct {
		name  string
		layer int
		shape string
	}
	var got []event
	s, err := m.NewSession(SessionOptions{
		Hook: func(name string, layer int, shape []int, data []float32) {
			n := 1
			for _, d := range shape {
				n *= d
			}
			if len(data) != n {
				t.Errorf("%s: %d values for shape %v", name, len(data), shape)
			}
			got = append(got, event{name, layer, fmt.Sprint(shape)})
		},
		IDHook: func(name string, layer int, shape []int, ids []int32) {
			got = append(got, event{name, layer, fmt.Sprint(shape)})
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prefill([]int32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	want := []event{{"embd", -1, "[3 256]"}}
	for l := 0; l < 3; l++ {
		b := fmt.Sprintf("blk.%d.", l)
		want = append(want,
			event{b + "attn_norm", l, "[3 256]"},
			event{b + "kqv_out", l, "[3 256]"},
			event{b + "top_k", l, "[3 3]"},
			event{b + "attn_out", l, "[3 256]"},
			event{b + "ffn_inp", l, "[3 256]"},
			event{b + "ffn_norm", l, "[3 256]"})
		if l > 0 {
			want = append(want,
				event{b + "ffn_moe_topk", l, "[3 4]"},
				event{b + "ffn_moe_out", l, "[3 256]"},
				event{b + "ffn_shexp", l, "[3 256]"})
		}
		want = append(want, event{b + "ffn_out", l, "[3 256]"}, event{b + "out", l, "[3 256]"})
	}
	want = append(want, event{"result_norm", -1, "[3 256]"}, event{"result_output", -1, "[3 1024]"})
	if !slices.Equal(got, want) {
		t.Errorf("hook events:\n got %v\nwant %v", got, want)
	}
}
