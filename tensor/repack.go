package tensor

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"sync"
)

// Repacked weights: the layout of the prompt-processing kernels.
//
// A GGUF matrix stores each row's blocks one after the other, so a kernel
// that multiplies several rows with one token loads every row's quants and
// scales separately and ends every (row, token) pair with a horizontal sum.
// Repack rewrites a matrix, once when it is loaded, into groups of PackRows
// rows whose blocks are interleaved: block b of the group holds block b of
// all eight rows, its quants in 4-byte slices, row r's slice of a group of
// quants at 4·r, so that one 32-byte load feeds eight rows and the eight
// results of a token are the eight lanes of one vector. Scales are unpacked
// to bytes. The packed kernels multiply a group with one token's broadcast
// activations (four tokens a call) and need neither horizontal sums nor
// per-row scale decoding; they agree with the single-row kernels within
// float rounding (they add the same integers, then scale and sum them in
// another order), and every token's result is computed the same way in a
// call of one token as of four, so prefill equals decoding with them.
//
// Q4_K, for each of eight rows r and 32-element sub-blocks j (bytes, in
// this order): d[r] f16 ×8 · dmin[r] f16 ×8 · scale[j][r] u8 ×64 ·
// min pairs (min[r][2i], min[r][2i+1]) for i = 0..3, r = 0..7 ×64 · quants
// ×1024: for chunk c = 0..3 of 64 elements and slice g = 0..7, row r's
// bytes qs[32c+4g : 32c+4g+4] of its block at 160 + 256c + 32g + 4r (low
// nibbles sub-block 2c, high nibbles 2c+1, as in the row's own block).

// Q5_K, the same as Q4_K (its quants' low four bits in Q4_K's slices),
// then its fifth bits ×256: row r's qh[4g : 4g+4] at 1184 + 32g + 4r.

// IQ4_XS, for each of eight rows r and 32-element sub-blocks j: d[r] f16
// ×8 · ls_j − 32 (int8, its 6-bit scale unpacked) at 16 + 8j + r ×64 ·
// quants ×1024: row r's qs[16j+4g : 16j+4g+4] at 80 + 128j + 32g + 4r.

// 8-bit groups (Q8_0, and Q5_0 widened), for each of eight rows' 32-element
// blocks: d[r] f16 ×8 · quants ×256: row r's int8 elements 4g..4g+3 at
// 16 + 32g + 4r. The block is 272 bytes, eight times Q8_0's, so that
// decoding reads no more than the file's rows (its 32-byte loads may cross
// a cache line: the loads are not what limits these kernels).

// Q6_K, for each of eight rows r and 16-element sub-blocks s: d[r] as
// float32 ×8 · scale[s][r] int8 ×128, the pairs of sub-blocks 2i, 2i+1
// side by side (scale[2i+j][r] at 32 + 16i + 2r + j) · quants ×1536: sub-block
// s in three 32-byte slices at 160 + 96s + 32v (v = 0, 1, 2), row r's
// byte 4r + e holding its 6-bit quant of element 16s + 4v + e in bits 0-5
// and bits 2v, 2v+1 of its quant of element 16s + 12 + e in bits 6-7. The
// fourth group of a sub-block is thus spread over the other three, which
// costs its decoding a few shifts instead of a second load and a merge per
// group (the file's layout keeps each quant's low and high bits apart).

// PackRows is the number of weight rows a repacked group interleaves.
const PackRows = 8

// The bytes of one block of eight repacked rows, per layout.
const (
	packedQ4KBlock = 32 + 64 + 64 + 1024
	packedQ5KBlock = packedQ4KBlock + 256
	packedXSBlock  = 16 + 64 + 1024
	packedQ8Block  = 16 + 256
	packedQ6KBlock = 32 + 128 + 1024 + 512
)

// PackedGemmFunc computes the products of the groups of a repacked matrix
// (rows rows, rows a multiple of PackRows, of n elements, from Repack)
// with m activation rows of the weight type's VecDotType, lda bytes apart:
// out[j*ldo + r] for r < rows, j < m. w starts at a group. A call reads
// whole blocks, allocates nothing and starts no goroutines.
type PackedGemmFunc func(w []byte, act []byte, lda int, out []float32, ldo int, rows, m, n int)

// packedKernel is one type's repacked layout and products.
type packedKernel struct {
	block int                                         // bytes of one block of PackRows rows
	pack  func(dst []byte, rows [PackRows][]byte)     // interleaves one block of each row
	row   func(dst []byte, src []byte, r int)         // row r's original block from a packed one
	twin  func(x []byte, nb int, y []byte) [8]float32 // pure-Go product of one group and one token
	gemm  PackedGemmFunc                              // the fastest product this CPU runs, or nil
	head  PackedGemmFunc                              // the product for single-token matrices, or nil
}

func packedKernelOf(t Type) *packedKernel {
	switch t {
	case Q4_K:
		return &packedQ4K
	case Q5_K:
		return &packedQ5K
	case IQ4_XS:
		return &packedXS
	case Q8_0:
		return &packedQ80
	case Q5_0:
		return &packedQ50
	case Q6_K:
		return &packedQ6K
	}
	return nil
}

var packedQ6K = packedKernel{
	block: packedQ6KBlock,
	pack:  packQ6KBlock,
	row:   unpackQ6KRow,
	twin:  gemmQ6KR8Generic,
	gemm:  gemmQ6KR8Best,
	head:  gemmQ6KR8Head,
}

var packedQ80 = packedKernel{
	block: packedQ8Block,
	pack:  packQ80Block,
	row:   unpackQ80Row,
	twin:  gemmQ8R8Generic,
	gemm:  gemmQ8R8Best,
	head:  gemmQ8R8Best,
}

// Q5_0 is repacked to the 8-bit layout, its weights widened (w − 16 as
// int8): the product is then Q8_0's, at 1.6 times the memory.
var packedQ50 = packedKernel{
	block: packedQ8Block,
	pack:  packQ50Block,
	row:   unpackQ50Row,
	twin:  gemmQ8R8Generic,
	gemm:  gemmQ8R8Best,
	head:  gemmQ8R8Best,
}

var packedQ4K = packedKernel{
	block: packedQ4KBlock,
	pack:  packQ4KBlock,
	row:   unpackQ4KRow,
	twin:  gemmQ4KR8Generic,
	gemm:  gemmQ4KR8Best,
	head:  gemmQ4KR8Head,
}

var packedQ5K = packedKernel{
	block: packedQ5KBlock,
	pack:  packQ5KBlock,
	row:   unpackQ5KRow,
	twin:  gemmQ5KR8Generic,
	gemm:  gemmQ5KR8Best,
	head:  gemmQ5KR8Head,
}

var packedXS = packedKernel{
	block: packedXSBlock,
	pack:  packXSBlock,
	row:   unpackXSRow,
	twin:  gemmXSR8Generic,
	gemm:  gemmXSR8Best,
	head:  gemmXSR8Best,
}

// PackedGemm returns the product of matrices of type t repacked by Repack,
// and whether this CPU has one (a fast kernel for the layout: where it has
// none, Repack is not worth its memory).
func PackedGemm(t Type) (PackedGemmFunc, bool) {
	k := packedKernelOf(t)
	if k == nil || k.gemm == nil {
		return nil, false
	}
	return k.gemm, true
}

// HeadPackedGemm is PackedGemm for a matrix that a model multiplies with
// one token per sequence and step (its output head, which a prompt needs
// for its last token only): the repacked product wherever this CPU has one,
// also where PackedGemm leaves t in its own layout because another kernel
// multiplies prompts faster (Q4_K and Q6_K with AVX-512 VNNI). Such a
// matrix is streamed from memory once per generated token, which the
// repacked single-token kernels read fastest.
func HeadPackedGemm(t Type) (PackedGemmFunc, bool) {
	k := packedKernelOf(t)
	if k == nil || k.head == nil {
		return nil, false
	}
	return k.head, true
}

// PackedSize returns the bytes of a matrix of rows rows of cols elements of
// type t in the repacked layout, or an error if t has no such layout here
// or the shape does not fit it (rows a multiple of PackRows, cols of whole
// blocks).
func PackedSize(t Type, rows, cols int) (int64, error) {
	if k := packedKernelOf(t); k == nil || k.gemm == nil {
		return 0, fmt.Errorf("tensor: no repacked layout for %s on this CPU", t)
	}
	return layoutSize(t, rows, cols)
}

// HeadPackedSize is PackedSize for a matrix repacked for HeadPackedGemm.
func HeadPackedSize(t Type, rows, cols int) (int64, error) {
	if k := packedKernelOf(t); k == nil || k.head == nil {
		return 0, fmt.Errorf("tensor: no repacked layout for %s on this CPU", t)
	}
	return layoutSize(t, rows, cols)
}

// layoutSize is PackedSize for a type with a layout, whether or not this
// CPU has its product.
func layoutSize(t Type, rows, cols int) (int64, error) {
	k := packedKernelOf(t)
	bs := t.BlockSize()
	if rows <= 0 || rows%PackRows != 0 || cols <= 0 || cols%bs != 0 {
		return 0, fmt.Errorf("tensor: %s matrix of %d x %d cannot be repacked: rows must be a multiple of %d and columns of %d",
			t, rows, cols, PackRows, bs)
	}
	return int64(rows/PackRows) * int64(cols/bs) * int64(k.block), nil
}

// Repack writes the matrix data (rows rows of cols elements of type t, one
// row after the other as in a GGUF file) to dst in the repacked layout;
// dst must hold PackedSize (or HeadPackedSize) bytes.
func Repack(t Type, dst, data []byte, rows, cols int) error {
	if _, err := HeadPackedSize(t, rows, cols); err != nil {
		return err
	}
	return repackLayout(t, dst, data, rows, cols)
}

// repackLayout is Repack for a type with a layout, whether or not this CPU
// has its product (the tests check the layout everywhere).
func repackLayout(t Type, dst, data []byte, rows, cols int) error {
	size, err := layoutSize(t, rows, cols)
	if err != nil {
		return err
	}
	k := packedKernelOf(t)
	nb, ts := cols/t.BlockSize(), t.TypeSize()
	rb := nb * ts
	if int64(len(dst)) != size || len(data) != rows*rb {
		return fmt.Errorf("tensor: repacking %d x %d %s: %d bytes of data and %d of room, want %d and %d",
			rows, cols, t, len(data), len(dst), rows*rb, size)
	}
	groups := rows / PackRows
	pack := func(g0, g1 int) {
		var blk [PackRows][]byte
		for g := g0; g < g1; g++ {
			for b := range nb {
				for r := range PackRows {
					off := (g*PackRows+r)*rb + b*ts
					blk[r] = data[off : off+ts]
				}
				off := (g*nb + b) * k.block
				k.pack(dst[off:off+k.block], blk)
			}
		}
	}
	// A model's weights are repacked as it loads: large matrices take
	// every core (the groups are independent).
	workers := min(runtime.GOMAXPROCS(0), max(1, len(data)>>20), groups)
	if workers <= 1 {
		pack(0, groups)
		return nil
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() { pack(groups*w/workers, groups*(w+1)/workers) })
	}
	wg.Wait()
	return nil
}

// UnpackRow writes row r of a repacked matrix (rows of cols elements of
// type t) to dst in the type's own layout: the inverse of Repack, which
// shows that the layout keeps every byte of the file's.
func UnpackRow(t Type, dst, packed []byte, cols, r int) {
	k := packedKernelOf(t)
	nb, ts := cols/t.BlockSize(), t.TypeSize()
	g, i := r/PackRows, r%PackRows
	for b := range nb {
		off := (g*nb + b) * k.block
		k.row(dst[b*ts:(b+1)*ts], packed[off:off+k.block], i)
	}
}

// sliceMap lists the 4-byte quant slices of a packed layout: slice i of
// row r lies at at[i] + 4r in the packed block and at from[i] in the row's
// own block.
type sliceMap struct{ at, from []int }

func (m *sliceMap) add(at, from int) {
	m.at = append(m.at, at)
	m.from = append(m.from, from)
}

// pack copies row r's slices from its block x into the packed block dst.
func (m *sliceMap) pack(dst, x []byte, r int) {
	for i, at := range m.at {
		copy(dst[at+4*r:at+4*r+4], x[m.from[i]:m.from[i]+4])
	}
}

// unpack copies row r's slices from the packed block src back to dst.
func (m *sliceMap) unpack(dst, src []byte, r int) {
	for i, at := range m.at {
		copy(dst[m.from[i]:m.from[i]+4], src[at+4*r:at+4*r+4])
	}
}

// The layouts' slices (see the tables at the top of the file).
var (
	q4kSlices = func() (m sliceMap) {
		for c := range 4 {
			for g := range 8 {
				m.add(160+256*c+32*g, 16+32*c+4*g)
			}
		}
		return m
	}()
	// Q5_K's low bits come from its qs (after its 32 qh bytes), the
	// fifth bits from qh.
	q5kSlices = func() (m sliceMap) {
		for c := range 4 {
			for g := range 8 {
				m.add(160+256*c+32*g, 48+32*c+4*g)
			}
		}
		for g := range 8 {
			m.add(packedQ4KBlock+32*g, 16+4*g)
		}
		return m
	}()
	xsSlices = func() (m sliceMap) {
		for j := range 8 {
			for g := range 4 {
				m.add(80+128*j+32*g, 8+16*j+4*g)
			}
		}
		return m
	}()
	q80Slices = func() (m sliceMap) {
		for g := range 8 {
			m.add(q8PackedAt(0, 4*g), 2+4*g)
		}
		return m
	}()
)

// packQ4KBlock interleaves one Q4_K block of each of eight rows.
func packQ4KBlock(dst []byte, rows [PackRows][]byte) {
	for r, x := range rows {
		packK4Header(dst, x, r)
		q4kSlices.pack(dst, x, r)
	}
}

// packQ5KBlock interleaves one Q5_K block of each of eight rows.
func packQ5KBlock(dst []byte, rows [PackRows][]byte) {
	for r, x := range rows {
		packK4Header(dst, x, r)
		q5kSlices.pack(dst, x, r)
	}
}

// packK4Header writes row r's d, dmin, scales and mins (the first 16
// bytes of its Q4_K or Q5_K block x) to their places in the packed block.
func packK4Header(dst, x []byte, r int) {
	copy(dst[2*r:2*r+2], x[0:2])
	copy(dst[16+2*r:16+2*r+2], x[2:4])
	sc, m := dotScalesK4(x[4:16])
	for j := range 8 {
		dst[32+8*j+r] = byte(sc[j])
	}
	for i := range 4 {
		dst[96+16*i+2*r] = byte(m[2*i])
		dst[96+16*i+2*r+1] = byte(m[2*i+1])
	}
}

// packXSBlock interleaves one IQ4_XS block of each of eight rows.
func packXSBlock(dst []byte, rows [PackRows][]byte) {
	for r, x := range rows {
		copy(dst[2*r:2*r+2], x[0:2])
		h := binary.LittleEndian.Uint16(x[2:])
		for j := range 8 {
			ls := int(x[4+j/2]>>(4*(j%2))&15) | int(h>>(2*j)&3)<<4
			dst[16+8*j+r] = byte(int8(ls - 32))
		}
		xsSlices.pack(dst, x, r)
	}
}

// unpackXSRow rebuilds row r's IQ4_XS block from a packed one.
func unpackXSRow(dst, src []byte, r int) {
	copy(dst[0:2], src[2*r:2*r+2])
	var h uint16
	clear(dst[4:8])
	for j := range 8 {
		ls := byte(int8(src[16+8*j+r]) + 32)
		dst[4+j/2] |= ls & 15 << (4 * (j % 2))
		h |= uint16(ls>>4) << (2 * j)
	}
	binary.LittleEndian.PutUint16(dst[2:], h)
	xsSlices.unpack(dst, src, r)
}

// gemmXSR8Generic is the pure-Go product of one group of eight repacked
// IQ4_XS rows and one token's Q8_K row, with the assembly kernels' steps:
// per block and row the integer sum Σ_j (ls_j − 32)·Σ w·a, times d·dy,
// added.
func gemmXSR8Generic(x []byte, nb int, y []byte) [8]float32 {
	var acc [8]float32
	for b := range nb {
		xb := x[b*packedXSBlock : (b+1)*packedXSBlock]
		yb := y[b*dotSizeQ8K : (b+1)*dotSizeQ8K]
		dy := math.Float32frombits(binary.LittleEndian.Uint32(yb))
		for r := range PackRows {
			var sum int32
			for j := range 8 {
				var dot int32
				for l := range 16 {
					q := xb[80+128*j+32*(l/4)+4*r+l%4]
					dot += int32(kvaluesIQ4NL[q&15]) * int32(int8(yb[4+32*j+l]))
					dot += int32(kvaluesIQ4NL[q>>4]) * int32(int8(yb[4+32*j+16+l]))
				}
				sum += int32(int8(xb[16+8*j+r])) * dot
			}
			acc[r] += float32(float32(sum) * float32(dotF16At(xb, 2*r)*dy))
		}
	}
	return acc
}

// unpackQ4KRow rebuilds row r's Q4_K block from a packed one.
func unpackQ4KRow(dst, src []byte, r int) {
	unpackK4Header(dst, src, r)
	q4kSlices.unpack(dst, src, r)
}

// unpackQ5KRow rebuilds row r's Q5_K block from a packed one.
func unpackQ5KRow(dst, src []byte, r int) {
	unpackK4Header(dst, src, r)
	q5kSlices.unpack(dst, src, r)
}

// unpackK4Header is packK4Header's inverse: the 6-bit scales and mins
// packed back as get_scale_min_k4 reads them.
func unpackK4Header(dst, src []byte, r int) {
	copy(dst[0:2], src[2*r:2*r+2])
	copy(dst[2:4], src[16+2*r:16+2*r+2])
	var sc, m [8]byte
	for j := range 8 {
		sc[j] = src[32+8*j+r]
		m[j] = src[96+16*(j/2)+2*r+j%2]
	}
	for j := range 4 {
		dst[4+j] = sc[j] | sc[j+4]>>4<<6
		dst[8+j] = m[j] | m[j+4]>>4<<6
		dst[12+j] = sc[j+4]&15 | m[j+4]&15<<4
	}
}

// gemmQ4KR8Generic is the pure-Go product of one group of eight repacked
// Q4_K rows (nb blocks at x) and one token's Q8_K row y, with the float
// steps of the assembly kernels: per block and row, the integer sum
// Σ_j sc_j·Σ q·a scaled by d·dy and added, then the min term
// dmin·dy·Σ_j m_j·bsum_j subtracted.
func gemmQ4KR8Generic(x []byte, nb int, y []byte) [8]float32 {
	return gemmK4R8Generic(x, nb, y, packedQ4KBlock)
}

// gemmQ5KR8Generic is gemmQ4KR8Generic for repacked Q5_K: each quant
// gains its fifth bit from the qh plane.
func gemmQ5KR8Generic(x []byte, nb int, y []byte) [8]float32 {
	return gemmK4R8Generic(x, nb, y, packedQ5KBlock)
}

// gemmK4R8Generic is the product of Q4_K's layout (block bytes
// packedQ4KBlock) or Q5_K's (packedQ5KBlock, with its fifth bits).
func gemmK4R8Generic(x []byte, nb int, y []byte, block int) [8]float32 {
	var acc [8]float32
	for b := range nb {
		xb := x[b*block : (b+1)*block]
		yb := y[b*dotSizeQ8K : (b+1)*dotSizeQ8K]
		dy := math.Float32frombits(binary.LittleEndian.Uint32(yb))
		var bs [8]int32
		for j := range bs {
			bs[j] = int32(int16(binary.LittleEndian.Uint16(yb[260+4*j:]))) +
				int32(int16(binary.LittleEndian.Uint16(yb[262+4*j:])))
		}
		for r := range PackRows {
			var sum, mins int32
			for j := range 8 {
				c, shift := j/2, 4*(j%2)
				var dot int32
				for l := range 32 {
					q := int32(xb[160+256*c+32*(l/4)+4*r+l%4] >> shift & 15)
					if block == packedQ5KBlock {
						q |= int32(xb[packedQ4KBlock+32*(l/4)+4*r+l%4]>>j&1) << 4
					}
					dot += q * int32(int8(yb[4+32*j+l]))
				}
				sum += int32(xb[32+8*j+r]) * dot
				mins += int32(xb[96+16*(j/2)+2*r+j%2]) * bs[j]
			}
			d := dotF16At(xb, 2*r)
			dmin := dotF16At(xb, 16+2*r)
			acc[r] += float32(float32(sum) * float32(d*dy))
			acc[r] -= float32(float32(mins) * float32(dmin*dy))
		}
	}
	return acc
}

// gemmPackedLoops is the blocked loop of the assembly products: tokens in
// blocks of about gemmTokenBytes of activations, groups in blocks of about
// gemmRowBytes, each group of a block multiplied with the block's tokens
// eight at a time (x8, where the layout has such a kernel), then four at a
// time (x4) and the rest one at a time (x1). x8, x4 and x1 compute every
// token alike.
func gemmPackedLoops(x8, x4 func(x *byte, nb int, y *byte, lda int, out *float32, ldo int),
	x1 func(x *byte, nb int, y *byte, out *float32),
	block, actBlock int, w, act []byte, lda int, out []float32, ldo int, rows, m, nb int) {
	groups := rows / PackRows
	gb := nb * block
	_ = w[groups*gb-1]
	_ = act[(m-1)*lda+nb*actBlock-1]
	_ = out[(m-1)*ldo+rows-1]
	tb := max(8, gemmTokenBytes/max(1, nb*actBlock)&^7)
	rgb := max(1, gemmRowBytes/gb)
	for j0 := 0; j0 < m; j0 += tb {
		j1 := min(m, j0+tb)
		for g0 := 0; g0 < groups; g0 += rgb {
			for g := g0; g < min(groups, g0+rgb); g++ {
				x := &w[g*gb]
				j := j0
				if x8 != nil {
					for ; j+8 <= j1; j += 8 {
						x8(x, nb, &act[j*lda], lda, &out[j*ldo+g*PackRows], ldo)
					}
				}
				for ; j+4 <= j1; j += 4 {
					x4(x, nb, &act[j*lda], lda, &out[j*ldo+g*PackRows], ldo)
				}
				for ; j < j1; j++ {
					x1(x, nb, &act[j*lda], &out[j*ldo+g*PackRows])
				}
			}
		}
	}
}

// checkPacked checks the arguments of a PackedGemmFunc and returns the
// blocks per row.
func checkPacked(t Type, block int, w, act []byte, lda int, out []float32, ldo int, rows, m, n int) int {
	bs := t.BlockSize()
	if rows < 0 || rows%PackRows != 0 || n <= 0 || n%bs != 0 || m < 0 || lda < 0 || ldo < 0 {
		panic(fmt.Sprintf("tensor: repacked %s product of %d rows, %d tokens of %d elements, strides %d, %d", t, rows, m, n, lda, ldo))
	}
	nb := n / bs
	if rows == 0 || m == 0 {
		return nb
	}
	ab := (m-1)*lda + nb*t.VecDotType().TypeSize()
	if len(w) < rows/PackRows*nb*block || len(act) < ab || len(out) < (m-1)*ldo+rows || ldo < rows {
		panic(fmt.Sprintf("tensor: repacked %s product of %d rows and %d tokens of %d elements: %d weight bytes, %d activation bytes, %d outputs (stride %d)",
			t, rows, m, n, len(w), len(act), len(out), ldo))
	}
	return nb
}

// q8PackedAt is where element l of row r lies in a block of the 8-bit
// layout.
func q8PackedAt(r, l int) int { return 16 + 32*(l/4) + 4*r + l%4 }

// packQ80Block interleaves one Q8_0 block of each of eight rows.
func packQ80Block(dst []byte, rows [PackRows][]byte) {
	for r, x := range rows {
		copy(dst[2*r:2*r+2], x[:2])
		q80Slices.pack(dst, x, r)
	}
}

// unpackQ80Row rebuilds row r's Q8_0 block from a packed one.
func unpackQ80Row(dst, src []byte, r int) {
	copy(dst[:2], src[2*r:2*r+2])
	q80Slices.unpack(dst, src, r)
}

// packQ50Block interleaves one Q5_0 block of each of eight rows, widened:
// element l is (its nibble | its bit of qh << 4) − 16.
func packQ50Block(dst []byte, rows [PackRows][]byte) {
	for r, x := range rows {
		copy(dst[2*r:2*r+2], x[:2])
		qh := binary.LittleEndian.Uint32(x[2:])
		for l := range 32 {
			q := x[6+l%16] >> (4 * (l / 16)) & 15
			v := int8(q|byte(qh>>l&1)<<4) - 16
			dst[q8PackedAt(r, l)] = byte(v)
		}
	}
}

// unpackQ50Row rebuilds row r's Q5_0 block from a widened one.
func unpackQ50Row(dst, src []byte, r int) {
	copy(dst[:2], src[2*r:2*r+2])
	var qh uint32
	clear(dst[6:22])
	for l := range 32 {
		v := byte(int8(src[q8PackedAt(r, l)]) + 16)
		dst[6+l%16] |= v & 15 << (4 * (l / 16))
		qh |= uint32(v>>4&1) << l
	}
	binary.LittleEndian.PutUint32(dst[2:], qh)
}

// gemmQ8R8Generic is the pure-Go product of one group of eight rows in the
// 8-bit layout (nb blocks at x) and one token's Q8_0 row y: per block and
// row, the integer sum scaled by d·dy and added, as the single-row
// kernels do.
func gemmQ8R8Generic(x []byte, nb int, y []byte) [8]float32 {
	var acc [8]float32
	for b := range nb {
		xb := x[b*packedQ8Block : (b+1)*packedQ8Block]
		yb := y[b*dotSizeQ80 : (b+1)*dotSizeQ80]
		dy := dotF16At(yb, 0)
		for r := range PackRows {
			var sum int32
			for l := range 32 {
				sum += int32(int8(xb[q8PackedAt(r, l)])) * int32(int8(yb[2+l]))
			}
			d := dotF16At(xb, 2*r)
			acc[r] += float32(float32(sum) * float32(d*dy))
		}
	}
	return acc
}

// q6kPackedAt is the byte of a packed Q6_K block that holds row r's
// quant of element 16s + 4v + e (v < 3), and bits 2v, 2v+1 of its element
// 16s + 12 + e.
func q6kPackedAt(r, s, v, e int) int { return 160 + 96*s + 32*v + 4*r + e }

// packQ6KBlock interleaves one Q6_K block of each of eight rows.
func packQ6KBlock(dst []byte, rows [PackRows][]byte) {
	for r, x := range rows {
		binary.LittleEndian.PutUint32(dst[4*r:], math.Float32bits(dotF16At(x, 208)))
		for i := range 8 {
			dst[32+16*i+2*r] = x[192+2*i]
			dst[32+16*i+2*r+1] = x[192+2*i+1]
		}
		q := q6kQuants(x)
		for s := range 16 {
			for v := range 3 {
				for e := range 4 {
					dst[q6kPackedAt(r, s, v, e)] = q[16*s+4*v+e] | (q[16*s+12+e]>>(2*v)&3)<<6
				}
			}
		}
	}
}

// unpackQ6KRow rebuilds row r's Q6_K block from a packed one.
func unpackQ6KRow(dst, src []byte, r int) {
	binary.LittleEndian.PutUint16(dst[208:], F32ToF16(math.Float32frombits(binary.LittleEndian.Uint32(src[4*r:]))))
	for i := range 8 {
		dst[192+2*i] = src[32+16*i+2*r]
		dst[192+2*i+1] = src[32+16*i+2*r+1]
	}
	var q [256]uint8
	for s := range 16 {
		for v := range 3 {
			for e := range 4 {
				b := src[q6kPackedAt(r, s, v, e)]
				q[16*s+4*v+e] = b & 63
				q[16*s+12+e] |= (b >> 6) << (2 * v)
			}
		}
	}
	putQ6KQuants(dst, &q)
}

// gemmQ6KR8Generic is the pure-Go product of one group of eight repacked
// Q6_K rows (nb blocks at x) and one token's Q8_K row y, with the steps of
// the assembly kernels: per block and row, Σ_s scale_s·(Σ q·a −
// 32·bsums[s]) with the unsigned 6-bit q, scaled by d·dy and added.
func gemmQ6KR8Generic(x []byte, nb int, y []byte) [8]float32 {
	var acc [8]float32
	for b := range nb {
		xb := x[b*packedQ6KBlock : (b+1)*packedQ6KBlock]
		yb := y[b*dotSizeQ8K : (b+1)*dotSizeQ8K]
		dy := math.Float32frombits(binary.LittleEndian.Uint32(yb))
		for r := range PackRows {
			var sum int32
			for s := range 16 {
				var dot int32
				for e := range 4 {
					var fourth byte
					for v := range 3 {
						q := xb[q6kPackedAt(r, s, v, e)]
						dot += int32(q&63) * int32(int8(yb[4+16*s+4*v+e]))
						fourth |= (q >> 6) << (2 * v)
					}
					dot += int32(fourth) * int32(int8(yb[4+16*s+12+e]))
				}
				bs := int32(int16(binary.LittleEndian.Uint16(yb[260+2*s:])))
				sum += int32(int8(xb[32+16*(s/2)+2*r+s%2])) * (dot - 32*bs)
			}
			d := math.Float32frombits(binary.LittleEndian.Uint32(xb[4*r:]))
			acc[r] += float32(float32(sum) * float32(d*dy))
		}
	}
	return acc
}
