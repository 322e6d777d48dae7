//go:build !purego

package tensor

// The repacked products' assembly kernels (repack_amd64.s): eight tokens
// (x8, the 8-bit layout only), four (x4) and one (x1) against a group of
// eight rows.

//go:noescape
func gemmQ4KR8x4AVX2(x *byte, nb int, y *byte, lda int, out *float32, ldo int)

//go:noescape
func gemmQ4KR8x1AVX2(x *byte, nb int, y *byte, out *float32)

//go:noescape
func gemmQ5KR8x4AVX2(x *byte, nb int, y *byte, lda int, out *float32, ldo int)

//go:noescape
func gemmQ5KR8x1AVX2(x *byte, nb int, y *byte, out *float32)

//go:noescape
func gemmIQ4XSR8x4AVX2(x *byte, nb int, y *byte, lda int, out *float32, ldo int)

//go:noescape
func gemmIQ4XSR8x1AVX2(x *byte, nb int, y *byte, out *float32)

//go:noescape
func gemmQ6KR8x4AVX2(x *byte, nb int, y *byte, lda int, out *float32, ldo int)

//go:noescape
func gemmQ6KR8x1AVX2(x *byte, nb int, y *byte, out *float32)

//go:noescape
func gemmQ8R8x8AVX2(x *byte, nb int, y *byte, lda int, out *float32, ldo int)

//go:noescape
func gemmQ8R8x4AVX2(x *byte, nb int, y *byte, lda int, out *float32, ldo int)

//go:noescape
func gemmQ8R8x1AVX2(x *byte, nb int, y *byte, out *float32)

// The AVX2 products of each layout (the 8-bit one serves Q8_0 and the
// widened Q5_0).
var (
	gemmQ4KR8AVX2 = packedAVX2(Q4_K, packedQ4KBlock, dotSizeQ8K, nil, gemmQ4KR8x4AVX2, gemmQ4KR8x1AVX2)
	gemmQ5KR8AVX2 = packedAVX2(Q5_K, packedQ5KBlock, dotSizeQ8K, nil, gemmQ5KR8x4AVX2, gemmQ5KR8x1AVX2)
	gemmXSR8AVX2  = packedAVX2(IQ4_XS, packedXSBlock, dotSizeQ8K, nil, gemmIQ4XSR8x4AVX2, gemmIQ4XSR8x1AVX2)
	gemmQ6KR8AVX2 = packedAVX2(Q6_K, packedQ6KBlock, dotSizeQ8K, nil, gemmQ6KR8x4AVX2, gemmQ6KR8x1AVX2)
	gemmQ8R8AVX2  = packedAVX2(Q8_0, packedQ8Block, dotSizeQ80, gemmQ8R8x8AVX2, gemmQ8R8x4AVX2, gemmQ8R8x1AVX2)
)

// The product each layout uses on this CPU, or nil (then it is not
// repacked). Q4_K and Q6_K have none with AVX-512 VNNI: the row-major tiles
// with sixteen tokens in the vector lanes (gemmlanes_amd64.s) multiply
// prompts faster than the AVX2 packed kernels, and repacking would leave
// them nothing to read.
var (
	gemmQ4KR8Best = packedOn(gemmQ4KR8AVX2, dotAVX2 && !dotAVX512)
	gemmQ5KR8Best = packedOn(gemmQ5KR8AVX2, dotAVX2)
	gemmQ6KR8Best = packedOn(gemmQ6KR8AVX2, dotAVX2 && !dotAVX512)
	gemmQ8R8Best  = packedOn(gemmQ8R8AVX2, dotAVX2)
	gemmXSR8Best  = packedOn(gemmXSR8AVX2, dotAVX2)

	// A single-token matrix (HeadPackedGemm) is repacked wherever AVX2
	// runs: the lanes tiles do nothing for one token.
	gemmQ4KR8Head = packedOn(gemmQ4KR8AVX2, dotAVX2)
	gemmQ5KR8Head = packedOn(gemmQ5KR8AVX2, dotAVX2)
	gemmQ6KR8Head = packedOn(gemmQ6KR8AVX2, dotAVX2)
)

// packedOn returns f where use holds, else nil.
func packedOn(f PackedGemmFunc, use bool) PackedGemmFunc {
	if !use {
		return nil
	}
	return f
}

// packedImpls returns the packed products of t this CPU runs, whether or
// not PackedGemm chooses them, for the tests.
func packedImpls(t Type) map[string]PackedGemmFunc {
	if !dotAVX2 {
		return nil
	}
	switch t {
	case Q4_K:
		return map[string]PackedGemmFunc{"avx2": gemmQ4KR8AVX2}
	case Q5_K:
		return map[string]PackedGemmFunc{"avx2": gemmQ5KR8AVX2}
	case IQ4_XS:
		return map[string]PackedGemmFunc{"avx2": gemmXSR8AVX2}
	case Q6_K:
		return map[string]PackedGemmFunc{"avx2": gemmQ6KR8AVX2}
	case Q8_0, Q5_0:
		return map[string]PackedGemmFunc{"avx2": gemmQ8R8AVX2}
	}
	return nil
}

// packedAVX2 returns the product of a packed layout (block bytes a group's
// block, actBlock bytes an activation block) by its AVX2 kernels of eight
// tokens (x8, or nil), four (x4) and one (x1).
func packedAVX2(t Type, block, actBlock int,
	x8, x4 func(x *byte, nb int, y *byte, lda int, out *float32, ldo int),
	x1 func(x *byte, nb int, y *byte, out *float32)) PackedGemmFunc {
	return func(w []byte, act []byte, lda int, out []float32, ldo int, rows, m, n int) {
		nb := checkPacked(t, block, w, act, lda, out, ldo, rows, m, n)
		if rows == 0 || m == 0 {
			return
		}
		gemmPackedLoops(x8, x4, x1, block, actBlock, w, act, lda, out, ldo, rows, m, nb)
	}
}
