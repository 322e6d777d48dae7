//go:build !purego

package tensor

import "golang.org/x/sys/cpu"

// dotAVX2 reports whether the AVX2 kernels (which also use FMA and F16C)
// run on this CPU. It is fixed when the program starts; GODEBUG=cpu.avx2=off
// clears it.
var dotAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C

// dotAVX512 reports whether the AVX-512 kernels run: AVX-512 F, BW, VL and
// VNNI besides the AVX2 set. GODEBUG=cpu.avx512f=off clears it.
var dotAVX512 = dotAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW &&
	cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VNNI

// The AVX2 kernels. x and y point at nb whole blocks (n elements for the
// float kernels) of the weight and activation rows; nb may not be zero.

//go:noescape
func dotQ80Q80AVX2(x, y *byte, nb int) float32

//go:noescape
func dotQ40Q80AVX2(x, y *byte, nb int) float32

//go:noescape
func dotQ50Q80AVX2(x, y *byte, nb int) float32

//go:noescape
func dotQ41Q81AVX2(x, y *byte, nb int) float32

//go:noescape
func dotQ51Q81AVX2(x, y *byte, nb int) float32

//go:noescape
func dotIQ4NLQ80AVX2(x, y *byte, nb int) float32

//go:noescape
func dotQ2KQ8KAVX2(x, y *byte, nb int) float32

//go:noescape
func dotQ3KQ8KAVX2(x, y *byte, nb int) float32

//go:noescape
func dotQ4KQ8KAVX2(x, y *byte, nb int) float32

//go:noescape
func dotQ5KQ8KAVX2(x, y *byte, nb int) float32

//go:noescape
func dotQ6KQ8KAVX2(x, y *byte, nb int) float32

//go:noescape
func dotIQ4XSQ8KAVX2(x, y *byte, nb int) float32

//go:noescape
func dotIQ2XXSQ8KAVX2(x, y *byte, nb int) float32

//go:noescape
func dotIQ2XSQ8KAVX2(x, y *byte, nb int) float32

//go:noescape
func dotIQ2SQ8KAVX2(x, y *byte, nb int) float32

//go:noescape
func dotIQ3XXSQ8KAVX2(x, y *byte, nb int) float32

//go:noescape
func dotIQ3SQ8KAVX2(x, y *byte, nb int) float32

//go:noescape
func dotIQ1SQ8KAVX2(x, y *byte, nb int) float32

//go:noescape
func dotIQ1MQ8KAVX2(x, y *byte, nb int) float32

//go:noescape
func dotQ80Q80AVX512(x, y *byte, nb int) float32

//go:noescape
func dotQ40Q80AVX512(x, y *byte, nb int) float32

//go:noescape
func dotQ50Q80AVX512(x, y *byte, nb int) float32

//go:noescape
func dotIQ4NLQ80AVX512(x, y *byte, nb int) float32

//go:noescape
func dotQ4KQ8KAVX512(x, y *byte, nb int) float32

//go:noescape
func dotQ6KQ8KAVX512(x, y *byte, nb int) float32

//go:noescape
func dotF32F32AVX2(x, y *byte, n int) float32

//go:noescape
func dotF16F32AVX2(x, y *byte, n int) float32

//go:noescape
func dotBF16F32AVX2(x, y *byte, n int) float32

// dotAsmKernel is the signature of the assembly kernels.
type dotAsmKernel func(x, y *byte, nb int) float32

// dotAsm adapts an assembly kernel to the twins' signature.
func dotAsm(f dotAsmKernel) func(x, y []byte, nb int) float32 {
	return func(x, y []byte, nb int) float32 {
		if nb == 0 {
			return 0
		}
		return f(&x[0], &y[0], nb)
	}
}

// dotKernels lists, for each weight type, its twin and its assembly kernels
// with the CPU features each needs.
var dotKernels = map[Type]struct {
	generic func(x, y []byte, nb int) float32
	avx2    dotAsmKernel
	avx512  dotAsmKernel
}{
	Q8_0:    {dotQ80Q80Generic, dotQ80Q80AVX2, dotQ80Q80AVX512},
	Q4_0:    {dotQ40Q80Generic, dotQ40Q80AVX2, dotQ40Q80AVX512},
	Q5_0:    {dotQ50Q80Generic, dotQ50Q80AVX2, dotQ50Q80AVX512},
	Q4_1:    {dotQ41Q81Generic, dotQ41Q81AVX2, nil},
	Q5_1:    {dotQ51Q81Generic, dotQ51Q81AVX2, nil},
	IQ4_NL:  {dotIQ4NLQ80Generic, dotIQ4NLQ80AVX2, dotIQ4NLQ80AVX512},
	Q2_K:    {dotQ2KQ8KGeneric, dotQ2KQ8KAVX2, nil},
	Q3_K:    {dotQ3KQ8KGeneric, dotQ3KQ8KAVX2, nil},
	Q4_K:    {dotQ4KQ8KGeneric, dotQ4KQ8KAVX2, dotQ4KQ8KAVX512},
	Q5_K:    {dotQ5KQ8KGeneric, dotQ5KQ8KAVX2, nil},
	Q6_K:    {dotQ6KQ8KGeneric, dotQ6KQ8KAVX2, dotQ6KQ8KAVX512},
	IQ4_XS:  {dotIQ4XSQ8KGeneric, dotIQ4XSQ8KAVX2, nil},
	IQ2_XXS: {dotIQ2XXSQ8KGeneric, dotIQ2XXSQ8KAVX2, nil},
	IQ2_XS:  {dotIQ2XSQ8KGeneric, dotIQ2XSQ8KAVX2, nil},
	IQ2_S:   {dotIQ2SQ8KGeneric, dotIQ2SQ8KAVX2, nil},
	IQ3_XXS: {dotIQ3XXSQ8KGeneric, dotIQ3XXSQ8KAVX2, nil},
	IQ3_S:   {dotIQ3SQ8KGeneric, dotIQ3SQ8KAVX2, nil},
	IQ1_S:   {dotIQ1SQ8KGeneric, dotIQ1SQ8KAVX2, nil},
	IQ1_M:   {dotIQ1MQ8KGeneric, dotIQ1MQ8KAVX2, nil},
	F32:     {dotF32F32Generic, dotF32F32AVX2, nil},
	F16:     {dotF16F32Generic, dotF16F32AVX2, nil},
	BF16:    {dotBF16F32Generic, dotBF16F32AVX2, nil},
}

// dotPrefetches reports whether the chosen kernel for t prefetches its
// weight rows ahead (DOTPF in dot_amd64.h): the AVX2 and AVX-512 kernels of
// the quantized types do; the float ones and the twins do not.
func dotPrefetches(t Type) bool {
	switch t {
	case Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS,
		IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M:
		return dotAVX2
	}
	return false
}

// dotImpls returns the implementations of the dot product for weight type t
// that run on this CPU, the pure-Go twin first.
func dotImpls(t Type) []dotImpl {
	k, ok := dotKernels[t]
	if !ok {
		return nil
	}
	impls := []dotImpl{{"generic", k.generic}}
	if dotAVX2 && k.avx2 != nil {
		impls = append(impls, dotImpl{"avx2", dotAsm(k.avx2)})
	}
	if dotAVX512 && k.avx512 != nil {
		impls = append(impls, dotImpl{"avx512vnni", dotAsm(k.avx512)})
	}
	return impls
}

func dotQ80Q80(x, y []byte, nb int) float32 {
	if dotAVX512 && nb > 0 {
		return dotQ80Q80AVX512(&x[0], &y[0], nb)
	}
	if dotAVX2 && nb > 0 {
		return dotQ80Q80AVX2(&x[0], &y[0], nb)
	}
	return dotQ80Q80Generic(x, y, nb)
}

func dotQ40Q80(x, y []byte, nb int) float32 {
	if dotAVX512 && nb > 0 {
		return dotQ40Q80AVX512(&x[0], &y[0], nb)
	}
	if dotAVX2 && nb > 0 {
		return dotQ40Q80AVX2(&x[0], &y[0], nb)
	}
	return dotQ40Q80Generic(x, y, nb)
}

func dotQ50Q80(x, y []byte, nb int) float32 {
	if dotAVX512 && nb > 0 {
		return dotQ50Q80AVX512(&x[0], &y[0], nb)
	}
	if dotAVX2 && nb > 0 {
		return dotQ50Q80AVX2(&x[0], &y[0], nb)
	}
	return dotQ50Q80Generic(x, y, nb)
}

func dotQ41Q81(x, y []byte, nb int) float32 {
	if dotAVX2 && nb > 0 {
		return dotQ41Q81AVX2(&x[0], &y[0], nb)
	}
	return dotQ41Q81Generic(x, y, nb)
}

func dotQ51Q81(x, y []byte, nb int) float32 {
	if dotAVX2 && nb > 0 {
		return dotQ51Q81AVX2(&x[0], &y[0], nb)
	}
	return dotQ51Q81Generic(x, y, nb)
}

func dotIQ4NLQ80(x, y []byte, nb int) float32 {
	if dotAVX512 && nb > 0 {
		return dotIQ4NLQ80AVX512(&x[0], &y[0], nb)
	}
	if dotAVX2 && nb > 0 {
		return dotIQ4NLQ80AVX2(&x[0], &y[0], nb)
	}
	return dotIQ4NLQ80Generic(x, y, nb)
}

func dotQ4KQ8K(x, y []byte, nb int) float32 {
	if dotAVX512 && nb > 0 {
		return dotQ4KQ8KAVX512(&x[0], &y[0], nb)
	}
	if dotAVX2 && nb > 0 {
		return dotQ4KQ8KAVX2(&x[0], &y[0], nb)
	}
	return dotQ4KQ8KGeneric(x, y, nb)
}

func dotQ2KQ8K(x, y []byte, nb int) float32 {
	if dotAVX2 && nb > 0 {
		return dotQ2KQ8KAVX2(&x[0], &y[0], nb)
	}
	return dotQ2KQ8KGeneric(x, y, nb)
}

func dotQ3KQ8K(x, y []byte, nb int) float32 {
	if dotAVX2 && nb > 0 {
		return dotQ3KQ8KAVX2(&x[0], &y[0], nb)
	}
	return dotQ3KQ8KGeneric(x, y, nb)
}

func dotQ5KQ8K(x, y []byte, nb int) float32 {
	if dotAVX2 && nb > 0 {
		return dotQ5KQ8KAVX2(&x[0], &y[0], nb)
	}
	return dotQ5KQ8KGeneric(x, y, nb)
}

func dotQ6KQ8K(x, y []byte, nb int) float32 {
	if dotAVX512 && nb > 0 {
		return dotQ6KQ8KAVX512(&x[0], &y[0], nb)
	}
	if dotAVX2 && nb > 0 {
		return dotQ6KQ8KAVX2(&x[0], &y[0], nb)
	}
	return dotQ6KQ8KGeneric(x, y, nb)
}

func dotIQ4XSQ8K(x, y []byte, nb int) float32 {
	if dotAVX2 && nb > 0 {
		return dotIQ4XSQ8KAVX2(&x[0], &y[0], nb)
	}
	return dotIQ4XSQ8KGeneric(x, y, nb)
}

func dotF32F32(x, y []byte, n int) float32 {
	if dotAVX2 && n > 0 {
		return dotF32F32AVX2(&x[0], &y[0], n)
	}
	return dotF32F32Generic(x, y, n)
}

func dotF16F32(x, y []byte, n int) float32 {
	if dotAVX2 && n > 0 {
		return dotF16F32AVX2(&x[0], &y[0], n)
	}
	return dotF16F32Generic(x, y, n)
}

func dotBF16F32(x, y []byte, n int) float32 {
	if dotAVX2 && n > 0 {
		return dotBF16F32AVX2(&x[0], &y[0], n)
	}
	return dotBF16F32Generic(x, y, n)
}

func dotIQ2XXSQ8K(x, y []byte, nb int) float32 {
	if dotAVX2 && nb > 0 {
		return dotIQ2XXSQ8KAVX2(&x[0], &y[0], nb)
	}
	return dotIQ2XXSQ8KGeneric(x, y, nb)
}

func dotIQ2XSQ8K(x, y []byte, nb int) float32 {
	if dotAVX2 && nb > 0 {
		return dotIQ2XSQ8KAVX2(&x[0], &y[0], nb)
	}
	return dotIQ2XSQ8KGeneric(x, y, nb)
}

func dotIQ2SQ8K(x, y []byte, nb int) float32 {
	if dotAVX2 && nb > 0 {
		return dotIQ2SQ8KAVX2(&x[0], &y[0], nb)
	}
	return dotIQ2SQ8KGeneric(x, y, nb)
}

func dotIQ3XXSQ8K(x, y []byte, nb int) float32 {
	if dotAVX2 && nb > 0 {
		return dotIQ3XXSQ8KAVX2(&x[0], &y[0], nb)
	}
	return dotIQ3XXSQ8KGeneric(x, y, nb)
}

func dotIQ3SQ8K(x, y []byte, nb int) float32 {
	if dotAVX2 && nb > 0 {
		return dotIQ3SQ8KAVX2(&x[0], &y[0], nb)
	}
	return dotIQ3SQ8KGeneric(x, y, nb)
}

func dotIQ1SQ8K(x, y []byte, nb int) float32 {
	if dotAVX2 && nb > 0 {
		return dotIQ1SQ8KAVX2(&x[0], &y[0], nb)
	}
	return dotIQ1SQ8KGeneric(x, y, nb)
}

func dotIQ1MQ8K(x, y []byte, nb int) float32 {
	if dotAVX2 && nb > 0 {
		return dotIQ1MQ8KAVX2(&x[0], &y[0], nb)
	}
	return dotIQ1MQ8KGeneric(x, y, nb)
}

// ksignsIQ2Bytes is ksignsIQ2 spread to bytes for the AVX2 kernels: byte j
// of entry i is −1 (0xFF) where sign j of pattern i is negative, else +1.
var ksignsIQ2Bytes = func() (t [128]uint64) {
	for i := range t {
		for j := range 8 {
			b := uint64(0x01)
			if ksignsIQ2[i]>>j&1 != 0 {
				b = 0xFF
			}
			t[i] |= b << (8 * j)
		}
	}
	return t
}()
