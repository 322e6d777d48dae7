//go:build !purego

package tensor

// The tile kernels: four (x8: eight) tokens of one weight row, with the lanes and the
// float operations of the single-row kernel of the same instruction set
// (dotq_amd64.s, dotk_amd64.s, dotk512_amd64.s; kernels in gemmq_amd64.s,
// gemmk_amd64.s, gemmxs_amd64.s), so that each token's result equals it
// bit for bit. x, y, out point at the row, the first token's activations
// and its output; lda is a byte stride, ldo an element stride; nb > 0.

//go:noescape
func gemmQ4KQ8KAVX2(x, y *byte, lda, nb int, out *float32, ldo int)

//go:noescape
func gemmQ4KQ8KAVX512(x, y *byte, lda, nb int, out *float32, ldo int)

//go:noescape
func gemmQ5KQ8KAVX2(x, y *byte, lda, nb int, out *float32, ldo int)

//go:noescape
func gemmIQ4XSQ8KAVX2(x, y *byte, lda, nb int, out *float32, ldo int)

//go:noescape
func gemmQ6KQ8KAVX2(x, y *byte, lda, nb int, out *float32, ldo int)

//go:noescape
func gemmQ6KQ8KAVX512(x, y *byte, lda, nb int, out *float32, ldo int)

//go:noescape
func gemmQ80Q80AVX2(x, y *byte, lda, nb int, out *float32, ldo int)

//go:noescape
func gemmQ80Q80AVX512(x, y *byte, lda, nb int, out *float32, ldo int)

//go:noescape
func gemmQ40Q80AVX2(x, y *byte, lda, nb int, out *float32, ldo int)

//go:noescape
func gemmQ40Q80AVX512(x, y *byte, lda, nb int, out *float32, ldo int)

//go:noescape
func gemmQ50Q80AVX2(x, y *byte, lda, nb int, out *float32, ldo int)

//go:noescape
func gemmQ50Q80AVX512(x, y *byte, lda, nb int, out *float32, ldo int)

//go:noescape
func gemmIQ4NLQ80AVX2(x, y *byte, lda, nb int, out *float32, ldo int)

//go:noescape
func gemmIQ4NLQ80AVX512(x, y *byte, lda, nb int, out *float32, ldo int)

//go:noescape
func gemmQ4KQ8KAVX512x8(x, y *byte, lda, nb int, out *float32, ldo int)

//go:noescape
func gemmQ6KQ8KAVX512x8(x, y *byte, lda, nb int, out *float32, ldo int)

// The four-row kernels of short Q5_0 and Q8_0 rows (gemmrows_amd64.s):
// rows x, x+ldw, x+2·ldw, x+3·ldw of nb < 8 blocks against the activation
// row y, each result what the AVX-512 dot kernel gives, in out[0:4].

//go:noescape
func rows4Q50Q80AVX512(x *byte, ldw int, y *byte, nb int, out *float32)

//go:noescape
func rows4Q80Q80AVX512(x *byte, ldw int, y *byte, nb int, out *float32)

// gemmRows4 lists the four-row kernels by weight type (AVX-512 tier).
var gemmRows4 = map[Type]func(x *byte, ldw int, y *byte, nb int, out *float32){
	Q5_0: rows4Q50Q80AVX512,
	Q8_0: rows4Q80Q80AVX512,
}

// gemmTiles lists the four-token tile kernels of each weight type per
// instruction set, and the eight-token ones of AVX-512 (whose 32 vector
// registers hold eight tokens' accumulators); a type without a tile kernel
// for a set runs that set's single-row kernel per token.
var gemmTiles = map[Type]struct{ avx2, avx512, avx512x8 gemmTileFunc }{
	Q8_0:   {gemmQ80Q80AVX2, gemmQ80Q80AVX512, nil},
	Q4_0:   {gemmQ40Q80AVX2, gemmQ40Q80AVX512, nil},
	Q5_0:   {gemmQ50Q80AVX2, gemmQ50Q80AVX512, nil},
	IQ4_NL: {gemmIQ4NLQ80AVX2, gemmIQ4NLQ80AVX512, nil},
	Q4_K:   {gemmQ4KQ8KAVX2, gemmQ4KQ8KAVX512, gemmQ4KQ8KAVX512x8},
	Q5_K:   {gemmQ5KQ8KAVX2, nil, nil},
	Q6_K:   {gemmQ6KQ8KAVX2, gemmQ6KQ8KAVX512, gemmQ6KQ8KAVX512x8},
	IQ4_XS: {gemmIQ4XSQ8KAVX2, nil, nil},
}

// gemmImpls returns the implementations of the multi-token product for
// weight type t that run on this CPU, the one built on the pure-Go twin
// first, each with the single-row implementation it must equal.
func gemmImpls(t Type) []gemmKernel {
	k, ok := dotKernels[t]
	if !ok {
		return nil
	}
	tiles := gemmTiles[t]
	impls := []gemmKernel{{name: "generic", size: 1, dot: k.generic, typ: t}}
	if dotAVX2 && k.avx2 != nil {
		impls = append(impls, gemmTier("avx2", k.avx2, t, gemmStep{tiles.avx2, 4}))
	}
	if dotAVX512 && k.avx512 != nil {
		impls = append(impls, gemmTier("avx512vnni", k.avx512, t,
			gemmStep{tiles.avx512x8, 8}, gemmStep{tiles.avx512, 4}))
		impls[len(impls)-1].rows4 = gemmRows4[t]
	}
	return impls
}

// gemmTier builds the implementation of one instruction set from its tile
// kernels (largest first; nil ones are left out) and its single-row kernel.
func gemmTier(name string, raw dotAsmKernel, t Type, steps ...gemmStep) gemmKernel {
	k := gemmKernel{name: name, size: 1, dot: dotAsm(raw), raw: raw, typ: t}
	for _, s := range steps {
		if s.tile != nil {
			k.steps = append(k.steps, s)
		}
	}
	if len(k.steps) == 0 {
		k.name += "/rows"
	} else {
		k.size = k.steps[0].size
	}
	return k
}

// gemmBest returns the implementation that pairs with the dot product that
// DotKernel chooses for t: the last (fastest) one of gemmImpls, as the dot
// dispatch prefers AVX-512 to AVX2 to the twin where each exists.
func gemmBest(t Type) *gemmKernel {
	impls := gemmImpls(t)
	return &impls[len(impls)-1]
}
