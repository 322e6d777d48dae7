package tensor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// dotTypes are the weight types with a dot kernel.
var dotTypes = []Type{Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS,
	IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, F32, F16, BF16}

// dotFill says how the test blocks are filled.
type dotFill struct {
	name  string
	unit  bool                       // all float scales 1 (f16 0x3C00, Q8_K d = 1): exact float math
	scale func(r *rand.Rand) float32 // float scales when !unit
	quant func(r *rand.Rand) byte    // quant bytes (qs, qh, ql)
	sub   func(r *rand.Rand) byte    // packed sub-block scale bytes
	act   func(r *rand.Rand) int8    // activation quants
	float func(r *rand.Rand) float32 // float weights and activations
}

func randScale(r *rand.Rand) float32 { return float32(r.NormFloat64()) * 0.01 }
func randByte(r *rand.Rand) byte     { return byte(r.Uint32()) }
func randAct(r *rand.Rand) int8      { return int8(r.IntN(255) - 127) }
func randFloat(r *rand.Rand) float32 { return float32(r.NormFloat64()) }
func constByte(b byte) func(*rand.Rand) byte {
	return func(*rand.Rand) byte { return b }
}
func constAct(a int8) func(*rand.Rand) int8 {
	return func(*rand.Rand) int8 { return a }
}
func constFloat(f float32) func(*rand.Rand) float32 {
	return func(*rand.Rand) float32 { return f }
}

var dotFills = []dotFill{
	{name: "random", scale: randScale, quant: randByte, sub: randByte, act: randAct, float: randFloat},
	{name: "unit", unit: true, quant: randByte, sub: randByte, act: randAct, float: randFloat},
	{name: "max", unit: true, quant: constByte(0xFF), sub: constByte(0xFF), act: constAct(127), float: constFloat(65504)},
	{name: "maxneg", unit: true, quant: constByte(0xFF), sub: constByte(0x7F), act: constAct(-127), float: constFloat(-3.5)},
	{name: "min", unit: true, quant: constByte(0x00), sub: constByte(0x80), act: constAct(-127), float: constFloat(1e-3)},
	{name: "zeroscale", scale: constFloat(0), quant: randByte, sub: randByte, act: randAct, float: constFloat(0)},
	{name: "extreme", unit: true, quant: func(r *rand.Rand) byte {
		return []byte{0x00, 0x0F, 0x7F, 0x80, 0xF0, 0xFF}[r.IntN(6)]
	}, sub: func(r *rand.Rand) byte {
		return []byte{0x00, 0x3F, 0x7F, 0x80, 0xC0, 0xFF}[r.IntN(6)]
	}, act: func(r *rand.Rand) int8 {
		return []int8{-127, 127}[r.IntN(2)]
	}, float: func(r *rand.Rand) float32 {
		return []float32{-65504, 65504, 0, 6e-8, -1}[r.IntN(5)]
	}},
	{name: "mixed", scale: randScale, quant: randByte, sub: constByte(0xFF), act: func(r *rand.Rand) int8 {
		return []int8{-127, 127, 0, 1, -1}[r.IntN(5)]
	}, float: randFloat},
}

// f16Scale returns the f16 bits of a float scale of the fill.
func (f *dotFill) f16Scale(r *rand.Rand) uint16 {
	if f.unit {
		return 0x3C00
	}
	return F32ToF16(f.scale(r))
}

// dotWeights builds nb blocks of weight type t (n elements for float types).
func dotWeights(t Type, nb int, f *dotFill, r *rand.Rand) []byte {
	size := t.TypeSize()
	b := make([]byte, nb*size)
	put16 := func(blk []byte, off int) { binary.LittleEndian.PutUint16(blk[off:], f.f16Scale(r)) }
	fill := func(p []byte, g func(*rand.Rand) byte) {
		for i := range p {
			p[i] = g(r)
		}
	}
	for i := range nb {
		blk := b[i*size : (i+1)*size]
		switch t {
		case Q8_0, Q4_0, Q5_0, IQ4_NL:
			fill(blk[2:], f.quant)
			put16(blk, 0)
		case Q4_1, Q5_1:
			fill(blk[4:], f.quant)
			put16(blk, 0)
			put16(blk, 2)
		case Q4_K, Q5_K:
			fill(blk[16:], f.quant)
			fill(blk[4:16], f.sub)
			put16(blk, 0)
			put16(blk, 2)
		case Q2_K:
			fill(blk[:16], f.sub)
			fill(blk[16:80], f.quant)
			put16(blk, 80)
			put16(blk, 82)
		case Q3_K:
			fill(blk[:96], f.quant)
			fill(blk[96:108], f.sub)
			put16(blk, 108)
		case Q6_K:
			fill(blk[:192], f.quant)
			fill(blk[192:208], f.sub)
			put16(blk, 208)
		case IQ4_XS:
			fill(blk[8:], f.quant)
			fill(blk[2:8], f.sub)
			put16(blk, 0)
		case IQ2_XXS, IQ3_XXS: // indices, then sign patterns and the 4-bit scales
			fill(blk[2:], f.quant)
			put16(blk, 0)
			if t == IQ2_XXS {
				for g := range 8 {
					blk[2+8*g+7] = blk[2+8*g+7]&0x0f | f.sub(r)&0xf0
				}
			} else {
				for g := range 8 {
					blk[66+4*g+3] = blk[66+4*g+3]&0x0f | f.sub(r)&0xf0
				}
			}
		case IQ2_XS, IQ2_S, IQ3_S: // the scale bytes come last
			ns := map[Type]int{IQ2_XS: 8, IQ2_S: 8, IQ3_S: 4}[t]
			fill(blk[2:size-ns], f.quant)
			fill(blk[size-ns:], f.sub)
			put16(blk, 0)
		case IQ1_S:
			fill(blk[2:], f.quant)
			put16(blk, 0)
		case IQ1_M: // d is the top nibbles of the four scale words
			fill(blk[:48], f.quant)
			fill(blk[48:], f.sub)
			d := f.f16Scale(r)
			for w := range 4 {
				p := blk[48+2*w:]
				binary.LittleEndian.PutUint16(p, binary.LittleEndian.Uint16(p)&0x0fff|(d>>(4*w)&15)<<12)
			}
		case F32:
			binary.LittleEndian.PutUint32(blk, math.Float32bits(f.float(r)))
		case F16:
			binary.LittleEndian.PutUint16(blk, F32ToF16(f.float(r)))
		case BF16:
			binary.LittleEndian.PutUint16(blk, F32ToBF16(f.float(r)))
		default:
			panic("no test weights for " + t.String())
		}
	}
	return b
}

// dotActs builds the activation row for nb blocks of weight type t.
func dotActs(t Type, nb int, f *dotFill, r *rand.Rand) []byte {
	at := t.VecDotType()
	n := nb * t.BlockSize()
	size, _ := at.RowSize(int64(n))
	b := make([]byte, size)
	switch at {
	case Q8_0:
		for i := range nb {
			blk := b[i*34:]
			binary.LittleEndian.PutUint16(blk, f.f16Scale(r))
			for j := range 32 {
				blk[2+j] = byte(f.act(r))
			}
		}
	case Q8_1:
		for i := range nb {
			blk := b[i*36:]
			dh := f.f16Scale(r)
			binary.LittleEndian.PutUint16(blk, dh)
			var sum int32
			for j := range 32 {
				q := f.act(r)
				blk[4+j] = byte(q)
				sum += int32(q)
			}
			binary.LittleEndian.PutUint16(blk[2:], F32ToF16(F16ToF32(dh)*float32(sum)))
		}
	case Q8_K:
		for i := range n / 256 {
			blk := b[i*292:]
			d := float32(1)
			if !f.unit {
				d = f.scale(r)
			}
			binary.LittleEndian.PutUint32(blk, math.Float32bits(d))
			for k := range 16 {
				var s int16
				for j := range 16 {
					q := f.act(r)
					blk[4+16*k+j] = byte(q)
					s += int16(q)
				}
				binary.LittleEndian.PutUint16(blk[260+2*k:], uint16(s))
			}
		}
	case F32:
		for i := range n {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f.float(r)))
		}
	}
	return b
}

// dotMagnitude returns Σ|terms| of the dot product in float64: the size of
// the numbers whose float32 sum the kernels form, which bounds their
// rounding error. For Q2_K, Q4_K and Q5_K the min terms count separately.
func dotMagnitude(t *testing.T, wt Type, w, act []byte, n int) float64 {
	t.Helper()
	wf := make([]float32, n)
	af := make([]float32, n)
	if err := Dequantize(wt, w, wf); err != nil {
		t.Fatal(err)
	}
	if err := Dequantize(wt.VecDotType(), act, af); err != nil {
		t.Fatal(err)
	}
	var mag float64
	for i := range n {
		mag += math.Abs(float64(wf[i]) * float64(af[i]))
	}
	if wt.VecDotType() == Q8_1 {
		size := wt.TypeSize()
		for i := range n / 32 {
			m := math.Abs(float64(F16ToF32(binary.LittleEndian.Uint16(w[i*size+2:]))))
			s := math.Abs(float64(F16ToF32(binary.LittleEndian.Uint16(act[i*36+2:]))))
			mag += m * s
			for k := range 32 {
				mag += m * math.Abs(float64(af[32*i+k]))
			}
		}
	}
	if wt == Q2_K {
		for i := range n / 256 {
			blk := w[i*84:]
			dmin := math.Abs(float64(F16ToF32(binary.LittleEndian.Uint16(blk[82:]))))
			for k := range 256 {
				mag += dmin * float64(blk[k/16]>>4) * math.Abs(float64(af[256*i+k]))
			}
		}
	}
	if wt == Q4_K || wt == Q5_K {
		size := wt.TypeSize()
		for i := range n / 256 {
			blk := w[i*size:]
			dmin := math.Abs(float64(F16ToF32(binary.LittleEndian.Uint16(blk[2:]))))
			_, m := dotScalesK4(blk[4:16])
			for k := range 256 {
				mag += dmin * float64(m[k/32]) * math.Abs(float64(af[256*i+k]))
			}
		}
	}
	return mag
}

// dotRef returns the float64 dot product of the dequantized rows.
func dotRef(t *testing.T, wt Type, w, act []byte, n int) float64 {
	t.Helper()
	wf := make([]float32, n)
	af := make([]float32, n)
	if err := Dequantize(wt, w, wf); err != nil {
		t.Fatal(err)
	}
	if err := Dequantize(wt.VecDotType(), act, af); err != nil {
		t.Fatal(err)
	}
	var s float64
	for i := range n {
		s += float64(wf[i]) * float64(af[i])
	}
	if wt.VecDotType() == Q8_1 {
		// The kernels use the activation block's stored s = d·Σq (an f16)
		// for the min term m·Σa, as ggml does: take the reference's min
		// term from s too.
		size := wt.TypeSize()
		for i := range n / 32 {
			m := float64(F16ToF32(binary.LittleEndian.Uint16(w[i*size+2:])))
			var sa float64
			for k := range 32 {
				sa += float64(af[32*i+k])
			}
			s += m * (float64(F16ToF32(binary.LittleEndian.Uint16(act[i*36+2:]))) - sa)
		}
	}
	return s
}

// dotLengths returns the block counts tested for weight type t: 1, 2, 3 and
// 24 blocks (24 K-quant blocks are a GLM-5 row of 6144 elements; for
// 32-element blocks that row is tested too); for float types lengths that
// exercise every tail of the 32/8/1-element loops.
func dotLengths(t Type) []int {
	bs := t.BlockSize()
	if bs == 1 {
		return []int{1, 2, 7, 8, 9, 31, 32, 33, 63, 100, 256, 6144}
	}
	if bs == 32 {
		return []int{1, 2, 3, 11, 24, 6144 / bs}
	}
	return []int{1, 2, 3, 24}
}

// dotTolerance bounds |asm − twin| for a sum of nb block terms of total
// magnitude mag: both differ from the exact sum by at most about
// (nb + 16)·2⁻²⁴·mag (float32 rounding of each step), so their difference by
// twice that; the integer parts are exact.
func dotTolerance(nb int, mag float64) float64 {
	return float64(nb+16) * 0x1p-23 * mag
}

// TestDotVariants checks every implementation that runs on this CPU
// against the pure-Go twin: bit for bit where the float math is exact
// (unit scales, sums below 2²⁴), within dotTolerance otherwise.
func TestDotVariants(t *testing.T) {
	for _, wt := range dotTypes {
		impls := dotImpls(wt)
		if len(impls) == 0 || impls[0].name != "generic" {
			t.Fatalf("%s: no twin among %v", wt, impls)
		}
		for _, impl := range impls[1:] {
			for fi := range dotFills {
				f := &dotFills[fi]
				for _, nb := range dotLengths(wt) {
					name := fmt.Sprintf("%s/%s/%s/%d", wt, impl.name, f.name, nb)
					t.Run(name, func(t *testing.T) {
						r := rand.New(rand.NewPCG(uint64(nb), uint64(wt)*131+uint64(fi)))
						w := dotWeights(wt, nb, f, r)
						act := dotActs(wt, nb, f, r)
						want := impls[0].fn(w, act, nb)
						got := impl.fn(w, act, nb)
						n := nb * wt.BlockSize()
						mag := dotMagnitude(t, wt, w, act, n)
						exact := f.unit && mag < 1<<24 && wt.BlockSize() > 1
						switch {
						case math.IsNaN(float64(want)) || math.IsInf(float64(want), 0):
							t.Fatalf("twin gave %g", want)
						case exact && got != want:
							t.Errorf("got %g, twin %g (must be equal: magnitude %g is exact)", got, want, mag)
						case math.Abs(float64(got)-float64(want)) > dotTolerance(nb, mag):
							t.Errorf("got %g, twin %g: differ by %g > %g (magnitude %g)",
								got, want, float64(got)-float64(want), dotTolerance(nb, mag), mag)
						}
					})
				}
			}
		}
	}
}

// TestDotTwinReference checks the twins against a float64 dot product of
// the dequantized weights and activations.
func TestDotTwinReference(t *testing.T) {
	for _, wt := range dotTypes {
		twin := dotImpls(wt)[0]
		for fi := range dotFills {
			f := &dotFills[fi]
			for _, nb := range dotLengths(wt) {
				t.Run(fmt.Sprintf("%s/%s/%d", wt, f.name, nb), func(t *testing.T) {
					r := rand.New(rand.NewPCG(uint64(nb)+7, uint64(wt)*131+uint64(fi)))
					w := dotWeights(wt, nb, f, r)
					act := dotActs(wt, nb, f, r)
					n := nb * wt.BlockSize()
					got := float64(twin.fn(w, act, nb))
					want := dotRef(t, wt, w, act, n)
					mag := dotMagnitude(t, wt, w, act, n)
					// Per block: the rounding of d·dy, of its product with the
					// block sum and of the float32 dequantized weights, plus
					// one rounding per accumulation step.
					tol := float64(nb+8) * 0x1p-23 * mag
					if wt.BlockSize() == 1 {
						tol = 0x1p-22 * mag // rounded products, float64 sum
					}
					if math.Abs(got-want) > tol {
						t.Errorf("twin %g, float64 reference %g: differ by %g > %g", got, want, got-want, tol)
					}
				})
			}
		}
	}
}

// TestDotRowQuantized runs the public entry points on float rows: the
// activations quantized with Quantize to VecDotType, the result close to
// the float64 dot product of the dequantized weights and the float row.
func TestDotRowQuantized(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const n = 6144
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	for _, wt := range dotTypes {
		t.Run(wt.String(), func(t *testing.T) {
			w := dotWeights(wt, n/wt.BlockSize(), &dotFills[0], r)
			at := wt.VecDotType()
			if !CanQuantize(at) {
				t.Skipf("no Quantize for %s activations", at)
			}
			size, err := at.RowSize(n)
			if err != nil {
				t.Fatal(err)
			}
			act := make([]byte, size)
			if err := Quantize(at, x, act); err != nil {
				t.Fatal(err)
			}
			wf := make([]float32, n)
			if err := Dequantize(wt, w, wf); err != nil {
				t.Fatal(err)
			}
			var want, mag float64
			for i := range n {
				want += float64(wf[i]) * float64(x[i])
				mag += math.Abs(float64(wf[i]) * float64(x[i]))
			}
			f, err := DotKernel(wt)
			if err != nil {
				t.Fatal(err)
			}
			got := f(w, act, n)
			if row := DotRow(wt, w, act, n); row != got {
				t.Errorf("DotRow %g, DotKernel's function %g", row, got)
			}
			// Q8 activations carry a relative error of at most 1/254 per
			// element (half a step of 1/127 of the block maximum).
			tol := mag / 254
			if at == F32 {
				tol = 1e-5 * mag
			}
			if math.Abs(float64(got)-want) > tol {
				t.Errorf("got %g, float64 %g: differ by %g > %g", got, want, float64(got)-want, tol)
			}
			if wt == F32 {
				if d := DotF32(x, x); math.Abs(float64(d)-float64(dotF32F32Generic(F32Bytes(x), F32Bytes(x), n))) > 1e-4*float64(d) {
					t.Errorf("DotF32(x, x) = %g", d)
				}
			}
		})
	}
}

func TestDotKernelErrors(t *testing.T) {
	for _, wt := range []Type{TQ1_0, MXFP4, I8, Q8_K, Q8_1, Type(99)} {
		if _, err := DotKernel(wt); !errors.Is(err, ErrNotSupported) {
			t.Errorf("DotKernel(%s) = %v, want ErrNotSupported", wt, err)
		}
	}
	for _, wt := range dotTypes {
		if _, err := DotKernel(wt); err != nil {
			t.Errorf("DotKernel(%s): %v", wt, err)
		}
	}
}

func TestVecDotType(t *testing.T) {
	for _, tc := range []struct{ w, a Type }{
		{Q8_0, Q8_0}, {Q4_0, Q8_0}, {Q5_0, Q8_0}, {IQ4_NL, Q8_0}, {Q4_1, Q8_1}, {Q5_1, Q8_1},
		{Q4_K, Q8_K}, {Q5_K, Q8_K}, {Q6_K, Q8_K}, {IQ4_XS, Q8_K}, {Q2_K, Q8_K},
		{F32, F32}, {F16, F32}, {BF16, F32},
	} {
		if got := tc.w.VecDotType(); got != tc.a {
			t.Errorf("%s.VecDotType() = %s, want %s", tc.w, got, tc.a)
		}
	}
}

// TestDotBadLengths checks that short rows and partial blocks panic with a
// message instead of reading out of bounds.
func TestDotBadLengths(t *testing.T) {
	for _, tc := range []struct {
		name   string
		t      Type
		w, act int // bytes
		n      int
	}{
		{"short weights", Q4_K, 143, 292, 256},
		{"short activations", Q4_K, 144, 291, 256},
		{"partial block", Q8_0, 34, 34, 16},
		{"negative", Q8_0, 34, 34, -32},
		{"short floats", F16, 6, 16, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			DotRow(tc.t, make([]byte, tc.w), make([]byte, tc.act), tc.n)
		})
	}
	if got := DotRow(Q4_K, nil, nil, 0); got != 0 {
		t.Errorf("empty row: %g", got)
	}
}

func TestDotNoAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, wt := range dotTypes {
		nb := 6144 / wt.BlockSize()
		w := dotWeights(wt, nb, &dotFills[0], r)
		act := dotActs(wt, nb, &dotFills[0], r)
		f, _ := DotKernel(wt)
		if a := testing.AllocsPerRun(10, func() { f(w, act, 6144) }); a != 0 {
			t.Errorf("%s: %g allocations per row", wt, a)
		}
	}
}

// BenchmarkDot measures each implementation on a GLM-5 row of 6144
// elements; the bytes are the weight bytes, so MB/s is weight bandwidth.
func BenchmarkDot(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, wt := range dotTypes {
		nb := 6144 / wt.BlockSize()
		w := dotWeights(wt, nb, &dotFills[0], r)
		act := dotActs(wt, nb, &dotFills[0], r)
		for _, impl := range dotImpls(wt) {
			b.Run(wt.String()+"/"+impl.name, func(b *testing.B) {
				b.SetBytes(int64(len(w)))
				b.ReportAllocs()
				for b.Loop() {
					impl.fn(w, act, nb)
				}
			})
		}
	}
}
