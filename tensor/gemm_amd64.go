//go:build !purego

package tensor

// The tile kernels: four tokens (x2: two) of one weight row, with the lanes
// and the float operations of the single-row kernel of the same instruction set
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
func gemmIQ2XXSQ8KAVX2(x, y *byte, lda, nb int, out *float32, ldo int)

//go:noescape
func gemmIQ2XSQ8KAVX2(x, y *byte, lda, nb int, out *float32, ldo int)

//go:noescape
func gemmIQ2SQ8KAVX2(x, y *byte, lda, nb int, out *float32, ldo int)

//go:noescape
func gemmIQ3XXSQ8KAVX2(x, y *byte, lda, nb int, out *float32, ldo int)

//go:noescape
func gemmIQ3SQ8KAVX2(x, y *byte, lda, nb int, out *float32, ldo int)

//go:noescape
func gemmIQ1SQ8KAVX2(x, y *byte, lda, nb int, out *float32, ldo int)

//go:noescape
func gemmIQ1MQ8KAVX2(x, y *byte, lda, nb int, out *float32, ldo int)

//go:noescape
func gemmQ6KQ8KAVX2(x, y *byte, lda, nb int, out *float32, ldo int)

//go:noescape
func gemmQ2KQ8KAVX2(x, y *byte, lda, nb int, out *float32, ldo int)

//go:noescape
func gemmQ3KQ8KAVX2(x, y *byte, lda, nb int, out *float32, ldo int)

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

// The two-token kernels of AVX-512: the four-token ones for two tokens.

//go:noescape
func gemmQ4KQ8KAVX512x2(x, y *byte, lda, nb int, out *float32, ldo int)

//go:noescape
func gemmQ6KQ8KAVX512x2(x, y *byte, lda, nb int, out *float32, ldo int)

// The packed eight-token kernels: the eight tokens of the copy packed at q
// by packQ8K, the result of token k at out[k·ldo] (an element stride).

//go:noescape
func gemmQ4KQ8KAVX512x8p(x, q *byte, nb int, out *float32, ldo int)

//go:noescape
func gemmQ6KQ8KAVX512x8p(x, q *byte, nb int, out *float32, ldo int)

// The packed four- and two-token kernels: tokens 0-3 (0-1) of a packed
// copy, for the experts of a batched decode step.

//go:noescape
func gemmQ4KQ8KAVX512x4p(x, q *byte, nb int, out *float32, ldo int)

//go:noescape
func gemmQ4KQ8KAVX512x2p(x, q *byte, nb int, out *float32, ldo int)

//go:noescape
func gemmQ6KQ8KAVX512x4p(x, q *byte, nb int, out *float32, ldo int)

//go:noescape
func gemmQ6KQ8KAVX512x2p(x, q *byte, nb int, out *float32, ldo int)

// gemmQ6KQ8KAVX512x16p is the packed Q6_K kernel for sixteen tokens: two
// packed eight-token tiles, the second right after the first.
//
//go:noescape
func gemmQ6KQ8KAVX512x16p(x, q *byte, nb int, out *float32, ldo int)

// gemmQ4KQ8KAVX512x16p is the packed Q4_K kernel for sixteen tokens, as
// gemmQ6KQ8KAVX512x16p.
//
//go:noescape
func gemmQ4KQ8KAVX512x16p(x, q *byte, nb int, out *float32, ldo int)

// gemmQ6KQ8KLanes16 and gemmQ4KQ8KLanes16 are the sixteen-token tiles
// with the tokens in the vector lanes (gemmlanes_amd64.s), four weight
// rows a call; see gemmLanesFunc.
//
//go:noescape
func gemmQ6KQ8KLanes16(x *byte, ldw int, q *byte, nb int, out *float32, ldo int)

//go:noescape
func gemmQ4KQ8KLanes16(x *byte, ldw int, q *byte, nb int, out *float32, ldo int)

// packLanesValues is packLanesValuesGo in assembly: a 16x16 transpose of
// dwords per quarter block.
//
//go:noescape
func packLanesValues(q, act *byte, lda, nb int)

// The four-row kernels of short Q5_0 and Q8_0 rows (gemmrows_amd64.s):
// rows x, x+ldw, x+2·ldw, x+3·ldw of nb < 8 blocks against the activation
// row y, each result what the AVX-512 dot kernel gives, in out[0:4].

//go:noescape
func rows4Q50Q80AVX512(x *byte, ldw int, y *byte, nb int, out *float32)

//go:noescape
func rows4Q80Q80AVX512(x *byte, ldw int, y *byte, nb int, out *float32)

// The four-row, four-token kernels of the same rows: rows x … x+3·ldw
// against the tokens y … y+3·lda, token t's four results at out[t·ldo:],
// each what rows4 gives for that token.

//go:noescape
func rows4x4Q50Q80AVX512(x *byte, ldw int, y *byte, lda, nb int, out *float32, ldo int)

//go:noescape
func rows4x4Q80Q80AVX512(x *byte, ldw int, y *byte, lda, nb int, out *float32, ldo int)

// gemmRows4 lists the four-row kernels by weight type (AVX-512 tier), one
// token and four tokens at a time.
var gemmRows4 = map[Type]struct {
	one  func(x *byte, ldw int, y *byte, nb int, out *float32)
	four func(x *byte, ldw int, y *byte, lda, nb int, out *float32, ldo int)
}{
	Q5_0: {rows4Q50Q80AVX512, rows4x4Q50Q80AVX512},
	Q8_0: {rows4Q80Q80AVX512, rows4x4Q80Q80AVX512},
}

// gemmTiles lists the four-token tile kernels of each weight type per
// instruction set, and for AVX-512 the two-token ones and the packed eight-
// and sixteen-token ones (the 32 vector registers hold eight tokens'
// accumulators, or sixteen tokens' integer lanes); a type without a tile
// kernel for a set runs that set's single-row kernel per token.
var gemmTiles = map[Type]struct {
	avx2, avx512, avx512x2 gemmTileFunc
	avx512x8p, avx512x16p  gemmPackedFunc
	avx512x4p, avx512x2p   gemmPackedFunc
	lanes16                gemmLanesFunc
}{
	Q8_0:   {avx2: gemmQ80Q80AVX2, avx512: gemmQ80Q80AVX512},
	Q4_0:   {avx2: gemmQ40Q80AVX2, avx512: gemmQ40Q80AVX512},
	Q5_0:   {avx2: gemmQ50Q80AVX2, avx512: gemmQ50Q80AVX512},
	IQ4_NL: {avx2: gemmIQ4NLQ80AVX2, avx512: gemmIQ4NLQ80AVX512},
	Q4_K: {avx2: gemmQ4KQ8KAVX2, avx512: gemmQ4KQ8KAVX512, avx512x2: gemmQ4KQ8KAVX512x2,
		avx512x8p: gemmQ4KQ8KAVX512x8p, avx512x16p: gemmQ4KQ8KAVX512x16p,
		avx512x4p: gemmQ4KQ8KAVX512x4p, avx512x2p: gemmQ4KQ8KAVX512x2p, lanes16: gemmQ4KQ8KLanes16},
	Q2_K: {avx2: gemmQ2KQ8KAVX2},
	Q3_K: {avx2: gemmQ3KQ8KAVX2},
	Q5_K: {avx2: gemmQ5KQ8KAVX2},
	Q6_K: {avx2: gemmQ6KQ8KAVX2, avx512: gemmQ6KQ8KAVX512, avx512x2: gemmQ6KQ8KAVX512x2,
		avx512x8p: gemmQ6KQ8KAVX512x8p, avx512x16p: gemmQ6KQ8KAVX512x16p,
		avx512x4p: gemmQ6KQ8KAVX512x4p, avx512x2p: gemmQ6KQ8KAVX512x2p, lanes16: gemmQ6KQ8KLanes16},
	IQ4_XS:  {avx2: gemmIQ4XSQ8KAVX2},
	IQ2_XXS: {avx2: gemmIQ2XXSQ8KAVX2},
	IQ2_XS:  {avx2: gemmIQ2XSQ8KAVX2},
	IQ2_S:   {avx2: gemmIQ2SQ8KAVX2},
	IQ3_XXS: {avx2: gemmIQ3XXSQ8KAVX2},
	IQ3_S:   {avx2: gemmIQ3SQ8KAVX2},
	IQ1_S:   {avx2: gemmIQ1SQ8KAVX2},
	IQ1_M:   {avx2: gemmIQ1MQ8KAVX2},
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
		impls = append(impls, gemmTier("avx2", k.avx2, t, gemmStep{tile: tiles.avx2, size: 4}))
	}
	if dotAVX512 && k.avx512 != nil {
		impls = append(impls, gemmTier("avx512vnni", k.avx512, t,
			gemmStep{packed: tiles.avx512x16p, size: 16},
			gemmStep{packed: tiles.avx512x8p, size: 8}, gemmStep{tile: tiles.avx512, size: 4},
			gemmStep{tile: tiles.avx512x2, size: 2}))
		if tiles.avx512x4p != nil {
			impls[len(impls)-1].small = []gemmStep{{packed: tiles.avx512x4p, size: 4}, {packed: tiles.avx512x2p, size: 2}}
		}
		impls[len(impls)-1].rows4 = gemmRows4[t].one
		impls[len(impls)-1].rows4x4 = gemmRows4[t].four
		if tiles.lanes16 != nil {
			// The same tier with the lanes tile of sixteen in front: faster,
			// and within float rounding of the single-row kernel (see
			// gemmlanes_amd64.s). It comes last: BatchGemmKernel chooses
			// it, GemmKernel the exact tier before it.
			k := impls[len(impls)-1]
			k.name += "/lanes"
			k.steps = append([]gemmStep{{lanes: tiles.lanes16, size: 16}}, k.steps[1:]...)
			k.rounds = true
			impls = append(impls, k)
		}
	}
	return impls
}

// gemmTier builds the implementation of one instruction set from its tile
// kernels (largest first; nil ones are left out) and its single-row kernel.
func gemmTier(name string, raw dotAsmKernel, t Type, steps ...gemmStep) gemmKernel {
	k := gemmKernel{name: name, size: 1, dot: dotAsm(raw), raw: raw, typ: t}
	for _, s := range steps {
		if s.tile != nil || s.packed != nil || s.lanes != nil {
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
// DotKernel chooses for t: the last (fastest) one of gemmImpls whose results
// equal it bit for bit, as the dot dispatch prefers AVX-512 to AVX2 to the
// twin where each exists.
func gemmBest(t Type) *gemmKernel {
	impls := gemmImpls(t)
	i := len(impls) - 1
	for impls[i].rounds {
		i--
	}
	return &impls[i]
}
