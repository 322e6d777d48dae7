//go:build !purego

package tensor

// The repacked products' assembly kernels (repack_amd64.s).

//go:noescape
func gemmQ4KR8x4AVX2(x *byte, nb int, y *byte, lda int, out *float32, ldo int)

//go:noescape
func gemmQ4KR8x1AVX2(x *byte, nb int, y *byte, out *float32)

//go:noescape
func gemmQ8R8x4AVX2(x *byte, nb int, y *byte, lda int, out *float32, ldo int)

//go:noescape
func gemmQ8R8x1AVX2(x *byte, nb int, y *byte, out *float32)

// gemmQ8R8Best is the product of 8-bit groups of this CPU (AVX2), or nil.
var gemmQ8R8Best = func() PackedGemmFunc {
	if !dotAVX2 {
		return nil
	}
	return gemmQ8R8AVX2
}()

//go:noescape
func gemmQ6KR8x4AVX2(x *byte, nb int, y *byte, lda int, out *float32, ldo int)

//go:noescape
func gemmQ6KR8x1AVX2(x *byte, nb int, y *byte, out *float32)

// gemmQ6KR8Best is the repacked Q6_K product of this CPU (AVX2), or nil:
// none with AVX-512 VNNI, whose lanes tiles are faster for prompts (as
// for Q4_K).
var gemmQ6KR8Best = func() PackedGemmFunc {
	if !dotAVX2 || dotAVX512 {
		return nil
	}
	return gemmQ6KR8AVX2
}()

var gemmQ6KR8AVX2 = packedAVX2(Q6_K, packedQ6KBlock, dotSizeQ8K, gemmQ6KR8x4AVX2, gemmQ6KR8x1AVX2)

// packedImpls returns the packed products of t this CPU runs, whether or
// not PackedGemm chooses them, for the tests.
func packedImpls(t Type) map[string]PackedGemmFunc {
	if !dotAVX2 {
		return nil
	}
	switch t {
	case Q4_K:
		return map[string]PackedGemmFunc{"avx2": gemmQ4KR8AVX2}
	case Q8_0, Q5_0:
		return map[string]PackedGemmFunc{"avx2": gemmQ8R8AVX2}
	case Q6_K:
		return map[string]PackedGemmFunc{"avx2": gemmQ6KR8AVX2}
	}
	return nil
}

var gemmQ8R8AVX2 = packedAVX2(Q8_0, packedQ8Block, dotSizeQ80, gemmQ8R8x4AVX2, gemmQ8R8x1AVX2)

// gemmQ4KR8Best is the repacked Q4_K product of this CPU (AVX2), or nil.
// With AVX-512 VNNI there is none: the row-major tiles with sixteen tokens
// in the vector lanes (gemmlanes_amd64.s) multiply prompts faster than the
// AVX2 packed kernel, and repacking would leave them nothing to read.
var gemmQ4KR8Best = func() PackedGemmFunc {
	if !dotAVX2 || dotAVX512 {
		return nil
	}
	return gemmQ4KR8AVX2
}()

var gemmQ4KR8AVX2 = packedAVX2(Q4_K, packedQ4KBlock, dotSizeQ8K, gemmQ4KR8x4AVX2, gemmQ4KR8x1AVX2)

// packedAVX2 returns the product of a packed layout (block bytes a group's
// block, actBlock bytes an activation block) by its AVX2 kernels of four
// tokens (x4) and one (x1).
func packedAVX2(t Type, block, actBlock int,
	x4 func(x *byte, nb int, y *byte, lda int, out *float32, ldo int),
	x1 func(x *byte, nb int, y *byte, out *float32)) PackedGemmFunc {
	return func(w []byte, act []byte, lda int, out []float32, ldo int, rows, m, n int) {
		nb := checkPacked(t, block, w, act, lda, out, ldo, rows, m, n)
		if rows == 0 || m == 0 {
			return
		}
		gemmPackedLoops(x4, x1, block, actBlock, w, act, lda, out, ldo, rows, m, nb)
	}
}
