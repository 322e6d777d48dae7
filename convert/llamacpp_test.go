package convert

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/internal/testmodels"
)

// llamacppRef is testdata/hf/NAME.llamacpp-T.json.gz: what llama.cpp's
// convert_hf_to_gguf.py wrote. Metadata keeps the file's key order.
type llamacppRef struct {
	keys    []string
	values  map[string]json.RawMessage
	Tensors []struct {
		Name   string  `json:"name"`
		Type   string  `json:"type"`
		Ne     []int64 `json:"ne"`
		Sha256 string  `json:"sha256"`
	} `json:"tensors"`
}

func readLlamacppRef(t *testing.T, name string) *llamacppRef {
	t.Helper()
	var raw struct {
		Metadata json.RawMessage `json:"metadata"`
	}
	ref := &llamacppRef{values: map[string]json.RawMessage{}}
	data := testmodels.HF(t, name)
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, ref); err != nil {
		t.Fatal(err)
	}
	// The keys in file order: walk the metadata object's tokens.
	dec := json.NewDecoder(bytes.NewReader(raw.Metadata))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		ref.keys = append(ref.keys, k.(string))
		ref.values[k.(string)] = v
	}
	return ref
}

// pyJSON is json.dumps(list, ensure_ascii=False) of an array value as
// gguf-py's GGUFReader returns it, the form whose sha256 the references
// give for long arrays.
func pyJSON(v gguf.Value) string {
	var sb strings.Builder
	sb.WriteByte('[')
	for i := range v.Len() {
		if i > 0 {
			sb.WriteString(", ")
		}
		e := v.Index(i)
		switch e.Type() {
		case gguf.TypeString:
			s, _ := e.AsString()
			sb.WriteString(pyString(s))
		case gguf.TypeBool:
			b, _ := e.AsBool()
			sb.WriteString(strconv.FormatBool(b))
		case gguf.TypeFloat32, gguf.TypeFloat64:
			f, _ := e.AsFloat()
			sb.WriteString(pyFloat(f))
		default:
			n, _ := e.AsInt()
			sb.WriteString(strconv.FormatInt(n, 10))
		}
	}
	sb.WriteByte(']')
	return sb.String()
}

// pyString is Python's JSON string encoding without ensure_ascii: quotes,
// backslashes and control characters escaped, everything else as is.
func pyString(s string) string {
	var sb strings.Builder
	sb.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			sb.WriteString(`\"`)
		case '\\':
			sb.WriteString(`\\`)
		case '\n':
			sb.WriteString(`\n`)
		case '\r':
			sb.WriteString(`\r`)
		case '\t':
			sb.WriteString(`\t`)
		case '\b':
			sb.WriteString(`\b`)
		case '\f':
			sb.WriteString(`\f`)
		default:
			if r < 0x20 {
				fmt.Fprintf(&sb, `\u%04x`, r)
			} else {
				sb.WriteRune(r)
			}
		}
	}
	sb.WriteByte('"')
	return sb.String()
}

// pyFloat is Python's repr of a float as json.dumps writes it.
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX, shortest
	mant, expS, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expS)
	if exp < -4 || exp >= 16 {
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		return fmt.Sprintf("%se%s%02d", mant, sign, exp)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

func TestPyJSON(t *testing.T) {
	tests := []struct {
		v    gguf.Value
		want string
	}{
		{gguf.Array([]string{"a\"b", "Ġx\n", "\x01", "é"}), `["a\"b", "Ġx\n", "\u0001", "é"]`},
		{gguf.Array([]int32{1, -3}), `[1, -3]`},
		{gguf.Array([]bool{true, false}), `[true, false]`},
		{gguf.Array([]float32{1, 0.5, 1e-5, 1e16, 123456789}), `[1.0, 0.5, 9.999999747378752e-06, 1.0000000272564224e+16, 123456792.0]`},
	}
	for _, tc := range tests {
		if got := pyJSON(tc.v); got != tc.want {
			t.Errorf("pyJSON = %s, want %s", got, tc.want)
		}
	}
}

// valueMatches compares a GGUF value with its JSON form in a reference.
func valueMatches(v gguf.Value, raw json.RawMessage) (bool, string) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var ref any
	if err := dec.Decode(&ref); err != nil {
		return false, err.Error()
	}
	switch r := ref.(type) {
	case map[string]any: // a long array: its length and the sha256 of its JSON
		if v.Type() != gguf.TypeArray {
			return false, "not an array"
		}
		sum := sha256.Sum256([]byte(pyJSON(v)))
		got := hex.EncodeToString(sum[:])
		n, _ := r["len"].(json.Number).Int64()
		return int64(v.Len()) == n && got == r["sha256"], fmt.Sprintf("len %d sha256 %s", v.Len(), got)
	case []any:
		if v.Type() != gguf.TypeArray || v.Len() != len(r) {
			return false, v.String()
		}
		for i, e := range r {
			b, _ := json.Marshal(e)
			if ok, _ := valueMatches(v.Index(i), b); !ok {
				return false, v.String()
			}
		}
		return true, ""
	case string:
		s, err := v.AsString()
		return err == nil && s == r, v.String()
	case bool:
		b, err := v.AsBool()
		return err == nil && v.Type() == gguf.TypeBool && b == r, v.String()
	case json.Number:
		if v.Type() == gguf.TypeFloat32 {
			f, _ := v.AsFloat()
			want, _ := r.Float64()
			return float32(f) == float32(want), v.String()
		}
		n, err := v.AsInt()
		want, werr := r.Int64()
		return err == nil && werr == nil && n == want, v.String()
	}
	return false, fmt.Sprintf("unknown reference value %s", raw)
}

// TestLlamacppEquivalence converts each test checkpoint and compares the
// file with what llama.cpp's converter wrote for it: the same metadata keys
// in the same order with equal values, and the same tensors in the same
// order with the same type, shape and bytes. No key is exempt: general.name
// comes from the directory name in both, and the tests keep the names.
func TestLlamacppEquivalence(t *testing.T) {
	tests := []struct {
		checkpoint, outType string
		noMTP               bool
	}{
		{"glm5-hfs", OutBF16, false},
		{"glm5-hfs", OutQ8_0, false},
		{"glm52-hfs", OutBF16, false},
		{"flash-hfs", OutBF16, false},
		{"glm5-fp8s", OutBF16, false},
		{"glm5-fp8s", OutF32, false},
		// Derived from the above by tools/hf_refs.py (and derivedCheckpoint):
		// a NextN block kept and dropped, three shards with an index, and
		// DeepSeek-V3.
		{"glm5-mtps", OutBF16, false},
		{"glm5-mtps", OutBF16, true},
		{"glm5-shards", OutBF16, false},
		{"ds3s", OutBF16, false},
	}
	for _, tc := range tests {
		refName := tc.checkpoint + ".llamacpp-" + tc.outType
		if tc.noMTP {
			refName += "-nomtp"
		}
		t.Run(refName, func(t *testing.T) {
			ref := readLlamacppRef(t, refName)
			out := filepath.Join(t.TempDir(), "out.gguf")
			if _, err := Convert(derivedCheckpoint(t, tc.checkpoint), out, Options{OutType: tc.outType, NoMTP: tc.noMTP}); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var keys []string
			for _, kv := range f.KVs {
				keys = append(keys, kv.Key)
				raw, ok := ref.values[kv.Key]
				if !ok {
					t.Errorf("key %s = %s: llama.cpp has no such key", kv.Key, kv.Value)
					continue
				}
				if ok, got := valueMatches(kv.Value, raw); !ok {
					t.Errorf("key %s: %s, llama.cpp %s", kv.Key, got, raw)
				}
			}
			if !slices.Equal(keys, ref.keys) {
				t.Errorf("metadata keys\n%q\nllama.cpp\n%q", keys, ref.keys)
			}
			if len(f.Tensors) != len(ref.Tensors) {
				t.Fatalf("%d tensors, llama.cpp %d", len(f.Tensors), len(ref.Tensors))
			}
			for i, rt := range ref.Tensors {
				ti := f.Tensors[i]
				sum := sha256.Sum256(ti.Data)
				if ti.Name != rt.Name || ti.Type.String() != rt.Type || !slices.Equal(ti.Dims, rt.Ne) || hex.EncodeToString(sum[:]) != rt.Sha256 {
					t.Errorf("tensor %d: %s %s %v sha256 %x, llama.cpp %s %s %v %s", i, ti.Name, ti.Type, ti.Dims, sum, rt.Name, rt.Type, rt.Ne, rt.Sha256)
				}
			}
		})
	}
}
