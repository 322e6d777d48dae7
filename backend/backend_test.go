package backend_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/backend"
	"github.com/glmrun/glmrun/backend/cpu"
	"github.com/glmrun/glmrun/tensor"
)

func quantMatrix(t *testing.T, typ tensor.Type, rows, cols int) (backend.Matrix, []float32) {
	t.Helper()
	r := rand.New(rand.NewPCG(uint64(typ), 3))
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(r.NormFloat64())
	}
	rb, err := typ.RowSize(int64(cols))
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, int(rb)*rows)
	if err := tensor.Quantize(typ, w, data); err != nil {
		t.Fatal(err)
	}
	m, err := backend.NewMatrix("w", typ, rows, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	deq := make([]float32, rows*cols)
	cpu.Dequantize(deq, m)
	return m, deq
}

// TestSliceCols: a column range holds the same values, in the original
// type when the ends are on block boundaries and as F32 otherwise.
func TestSliceCols(t *testing.T) {
	for _, tc := range []struct {
		typ      tensor.Type
		col, n   int
		wantType tensor.Type
	}{
		{tensor.Q8_0, 64, 128, tensor.Q8_0},
		{tensor.Q4_K, 256, 256, tensor.Q4_K},
		{tensor.Q4_K, 64, 64, tensor.F32},
		{tensor.Q6_K, 0, 128, tensor.F32},
		{tensor.F32, 3, 5, tensor.F32},
	} {
		m, deq := quantMatrix(t, tc.typ, 3, 512)
		m.Scale = 2
		s, err := m.SliceCols(tc.col, tc.n)
		if err != nil {
			t.Fatal(err)
		}
		if s.Type != tc.wantType || s.Rows != 3 || s.Cols != tc.n || s.Scale != 2 {
			t.Errorf("%v [%d, +%d): %v %dx%d scale %g", tc.typ, tc.col, tc.n, s.Type, s.Rows, s.Cols, s.Scale)
			continue
		}
		got := make([]float32, 3*tc.n)
		cpu.Dequantize(got, s)
		for r := 0; r < 3; r++ {
			for i := 0; i < tc.n; i++ {
				if got[r*tc.n+i] != deq[r*512+tc.col+i] {
					t.Fatalf("%v [%d, +%d): row %d col %d = %g, want %g", tc.typ, tc.col, tc.n, r, i, got[r*tc.n+i], deq[r*512+tc.col+i])
				}
			}
		}
	}
	m, _ := quantMatrix(t, tensor.Q8_0, 2, 64)
	if _, err := m.SliceCols(32, 64); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("out of range slice: %v", err)
	}
}

func TestOpen(t *testing.T) {
	if _, _, err := backend.Open("tpu", backend.Config{Devices: 1}); err == nil || !strings.Contains(err.Error(), `"tpu" is not available`) {
		t.Errorf("unknown backend: %v", err)
	}
	if _, _, err := backend.Open("cpu", backend.Config{Devices: 0}); err == nil {
		t.Error("0 devices accepted")
	}
	devs, coll, err := backend.Open("cpu", backend.Config{Devices: 3, Threads: 1, Memory: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 3 || coll.Devices() != 3 || devs[2].Name() != "cpu:2" || devs[1].Budget() != 1000 {
		t.Errorf("%d devices, collective of %d, %s, budget %d", len(devs), coll.Devices(), devs[2].Name(), devs[1].Budget())
	}
}

// TestYaRNCorrDims checks the ramp ends of ds2-mini: c(32) ≈ 0.94 and
// c(1) ≈ 2.95 (docs/MATH.md section 5.3) round out to 0 and 3.
func TestYaRNCorrDims(t *testing.T) {
	if cd := backend.YaRNCorrDims(16, 1024, 1e6, 32, 1); cd != [2]float32{0, 3} {
		t.Errorf("corr dims %v, want [0 3]", cd)
	}
}
