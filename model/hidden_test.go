package model

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// hiddenIndex is llama.cpp's dump index (testdata/README.shared.md §4.4).
type hiddenIndex struct {
	Mode    string  `json:"mode"`
	Prompt  []int32 `json:"prompt"`
	Tensors []struct {
		Name  string `json:"name"`
		Occ   int    `json:"occ"`
		File  string `json:"file"`
		DType string `json:"dtype"`
		Ne    []int  `json:"ne"`
	} `json:"tensors"`
}

// glmrunName maps a llama.cpp node name ("l_out-2") to the hook name
// ("blk.2.out"); ok is false for nodes the test does not map.
func glmrunName(node string) (string, bool) {
	switch node {
	case "embd", "result_norm":
		return node, true
	}
	i := strings.LastIndexByte(node, '-')
	if i < 0 {
		return "", false
	}
	layer, err := strconv.Atoi(node[i+1:])
	if err != nil {
		return "", false
	}
	base := node[:i]
	switch base {
	case "l_out":
		base = "out"
	case "attn_out", "ffn_out", "kqv_out", "ffn_inp", "ffn_moe_topk", "top_k":
	default:
		return "", false
	}
	return "blk." + strconv.Itoa(layer) + "." + base, true
}

// capture records hook outputs, concatenating repeated names (one token at
// a time) along the token axis.
type capture struct {
	f   map[string][]float32
	ids map[string][][]int32 // per token: the row of ids
}

func newCapture() *capture {
	return &capture{f: map[string][]float32{}, ids: map[string][][]int32{}}
}

func (c *capture) hook(name string, layer int, shape []int, data []float32) {
	c.f[name] = append(c.f[name], data...)
}

func (c *capture) idHook(name string, layer int, shape []int, ids []int32) {
	for t := 0; t < shape[0]; t++ {
		c.ids[name] = append(c.ids[name], slices.Clone(ids[t*shape[1]:(t+1)*shape[1]]))
	}
}

// TestHiddenStates compares every hidden state llama.cpp dumped (batch and
// one-token-at-a-time runs) with the hook's output within 1e-3 max abs,
// and the discrete decisions: expert sets per token and, for the DSA
// indexer, the causal key sets per query.
func TestHiddenStates(t *testing.T) {
	const tol = 1e-3
	dirs, err := filepath.Glob(filepath.Join("..", "testdata", "refs", "hidden", "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no hidden dumps: %v", err)
	}
	for _, dir := range dirs {
		run := filepath.Base(dir)
		t.Run(run, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(dir, "index.json"))
			if err != nil {
				t.Fatal(err)
			}
			var idx hiddenIndex
			if err := json.Unmarshal(raw, &idx); err != nil {
				t.Fatal(err)
			}
			m := loadTest(t, run[:strings.Index(run, ".deq-F32")])
			c := newCapture()
			s, err := m.NewSession(SessionOptions{Hook: c.hook, IDHook: c.idHook})
			if err != nil {
				t.Fatal(err)
			}
			if idx.Mode == "seq" {
				for _, tok := range idx.Prompt {
					if _, err := s.Decode(tok); err != nil {
						t.Fatal(err)
					}
				}
			} else if _, err := s.Prefill(idx.Prompt); err != nil {
				t.Fatal(err)
			}
			T := len(idx.Prompt)
			checked, sets := 0, 0
			var worst float64
			for _, ti := range idx.Tensors {
				name, ok := glmrunName(ti.Name)
				if !ok || ti.Occ != 0 {
					continue
				}
				data, err := os.ReadFile(filepath.Join(dir, ti.File))
				if err != nil {
					t.Fatal(err)
				}
				checked++
				if ti.DType == "i32" {
					sets++
					checkIDSets(t, ti.Name, data, ti.Ne[0], T, c.ids[name])
					continue
				}
				want := make([]float32, len(data)/4)
				for i := range want {
					want[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
				}
				got := c.f[name]
				if len(got) != len(want) {
					t.Errorf("%s (%s): %d values, llama.cpp %d", name, ti.Name, len(got), len(want))
					continue
				}
				d := maxAbsDiff(got, want)
				worst = max(worst, d)
				if d > tol {
					t.Errorf("%s (%s): max abs diff %.3g > %g", name, ti.Name, d, tol)
				}
			}
			t.Logf("%d tensors (%d id sets), worst max abs diff %.2g", checked, sets, worst)
			if checked < 5 {
				t.Errorf("only %d tensors compared", checked)
			}
		})
	}
}

// checkIDSets compares id sets per token: llama.cpp's column t (ne0 ids
// per token) against got[t], ignoring negative ids and, for key sets,
// positions beyond the query (masked cells llama.cpp lists too).
func checkIDSets(t *testing.T, node string, data []byte, ne0, T int, got [][]int32) {
	t.Helper()
	if len(got) != T {
		t.Errorf("%s: %d tokens of ids, want %d", node, len(got), T)
		return
	}
	causal := strings.HasPrefix(node, "top_k")
	for tok := 0; tok < T; tok++ {
		var want []int32
		for i := 0; i < ne0; i++ {
			v := int32(binary.LittleEndian.Uint32(data[4*(tok*ne0+i):]))
			if causal && int(v) > tok {
				continue
			}
			want = append(want, v)
		}
		var have []int32
		for _, v := range got[tok] {
			if v >= 0 {
				have = append(have, v)
			}
		}
		slices.Sort(want)
		slices.Sort(have)
		if !slices.Equal(want, have) {
			t.Errorf("%s token %d: ids %v, llama.cpp %v", node, tok, have, want)
		}
	}
}
