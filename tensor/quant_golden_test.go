package tensor_test

import (
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/glmrun/glmrun/gguf"
	"github.com/glmrun/glmrun/tensor"
)

// TestQuantizeAgainstLlamaQuantize requantizes the Q8_0 image of a test
// model to the K-quant types that llama-quantize chose for the same tensors
// in another file of that model (same F32 source, no imatrix, so ggml's
// reference quantizers), and checks that our error with respect to the
// Q8_0 image is no worse than 2% above ggml's. (ggml quantized the F32
// source, not the Q8_0 image, so its measured error also holds the Q8_0
// rounding, about 0.4% relative, added in quadrature; byte-identical blocks,
// which the test reports, are rare for the same reason.)
func TestQuantizeAgainstLlamaQuantize(t *testing.T) {
	pairs := []struct{ src, quant string }{
		{"models/glm5-mini.Q8_0.gguf", "models/glm5-mini.Q4_K_M.gguf"},
		{"models/glm5-mini.Q8_0.gguf", "models/glm5-mini.Q6_K.gguf"},
		{"formats/llama-dense.real.Q8_0.gguf", "formats/llama-dense.real.Q5_K_M.gguf"},
	}
	for _, p := range pairs {
		t.Run(filepath.Base(p.quant), func(t *testing.T) {
			src, err := gguf.Open(filepath.Join("..", "testdata", p.src))
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			qf, err := gguf.Open(filepath.Join("..", "testdata", p.quant))
			if err != nil {
				t.Fatal(err)
			}
			defer qf.Close()
			type stats struct {
				ours, ggml, ref float64 // squared errors, squared values
				same, blocks    int
			}
			per := map[tensor.Type]*stats{}
			for _, qt := range qf.Tensors {
				if qt.Type != tensor.Q4_K && qt.Type != tensor.Q5_K && qt.Type != tensor.Q6_K {
					continue
				}
				st, ok := src.Tensor(qt.Name)
				if !ok || st.Type != tensor.Q8_0 || !slices.Equal(st.Dims, qt.Dims) {
					continue
				}
				n := int(st.NumElements())
				x := make([]float32, n)
				if err := tensor.Dequantize(st.Type, st.Data, x); err != nil {
					t.Fatalf("%s: %v", st.Name, err)
				}
				ours := make([]byte, len(qt.Data))
				if err := tensor.Quantize(qt.Type, x, ours); err != nil {
					t.Fatalf("%s: %v", qt.Name, err)
				}
				yOurs, yGGML := make([]float32, n), make([]float32, n)
				if err := tensor.Dequantize(qt.Type, ours, yOurs); err != nil {
					t.Fatal(err)
				}
				if err := tensor.Dequantize(qt.Type, qt.Data, yGGML); err != nil {
					t.Fatal(err)
				}
				s := per[qt.Type]
				if s == nil {
					s = &stats{}
					per[qt.Type] = s
				}
				for i, v := range x {
					eo, eg := float64(yOurs[i]-v), float64(yGGML[i]-v)
					s.ours += eo * eo
					s.ggml += eg * eg
					s.ref += float64(v) * float64(v)
				}
				ts := qt.Type.TypeSize()
				for b := 0; b < len(ours); b += ts {
					s.blocks++
					if slices.Equal(ours[b:b+ts], qt.Data[b:b+ts]) {
						s.same++
					}
				}
			}
			if len(per) == 0 {
				t.Fatal("no K-quant tensor to compare")
			}
			for ty, s := range per {
				ro, rg := math.Sqrt(s.ours/s.ref), math.Sqrt(s.ggml/s.ref)
				t.Logf("%s: relative RMS error ours %.5f, llama-quantize %.5f; %d of %d blocks identical",
					ty, ro, rg, s.same, s.blocks)
				if ro > 1.02*rg {
					t.Errorf("%s: relative RMS error %.5f, more than 2%% above llama-quantize's %.5f", ty, ro, rg)
				}
			}
		})
	}
}
