package tensor

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"unsafe"
)

// Multi-token dot products: the matrix products of prompt processing.
//
// A GemmFunc multiplies several weight rows with several activation rows.
// Every output of GemmKernel's equals, bit for bit, what the DotFunc that
// DotKernel returns for the same weight type gives for that (row, token)
// pair: prefill and decode compute the same numbers. BatchGemmKernel's may
// instead take tiles that add in another order, within float rounding of
// it (sixteen tokens in the vector lanes for AVX-512 Q4_K and Q6_K,
// gemmlanes_amd64.s). The speed comes from two things. Tile
// kernels in assembly (gemm*_amd64.s) decode one weight block (nibbles,
// high bits, sub-block scales, signs) once and multiply it with the blocks
// of several tokens, keeping each token's integer lanes and float
// accumulators exactly as the single-row kernel of the same instruction set
// does: four tokens for Q8_0, Q4_0, Q5_0, IQ4_NL, Q4_K, Q5_K, Q6_K and
// IQ4_XS with AVX2, and with AVX-512 where the single-row kernel has that
// tier, and sixteen, eight and two for Q4_K and Q6_K there (the sixteen-
// and eight-token ones read the tokens' values from a cache-line-aligned
// packed copy, see packQ8K; two tokens are common among the experts of a
// batched decode step). And the loop order: tokens are taken
// in blocks of about gemmTokenBytes of activations and weight rows in blocks
// of about gemmRowBytes, so that both stay in the L2 cache while every tile
// of the token block passes over every row of the row block; each weight
// row is read from memory once per token block. Other types (Q4_1, Q5_1,
// F32, F16, BF16) run their single-row kernel per token inside the same
// blocked loops (tile 1).
// A call reads whole blocks, allocates nothing and starts no goroutines;
// threads split rows or tokens among themselves.

// GemmFunc computes the dot products of rows weight rows with m activation
// rows, each of n elements:
//
//	out[j*ldo + r] = DotFunc(w[r*ldw:], act[j*lda:], n)   for r < rows, j < m
//
// (bit for bit for GemmKernel's, within float rounding for BatchGemmKernel's).
// w holds weight rows ldw bytes apart, act activation rows of the weight
// type's VecDotType lda bytes apart, out the results of token j at
// out[j*ldo:], row r at offset r. n must be a multiple of the weight type's
// block size and the slices long enough for the last row and token;
// otherwise the function panics, as an index out of range would.
type GemmFunc func(w []byte, ldw int, act []byte, lda int, out []float32, ldo int, rows, m, n int)

// GemmKernel returns the multi-token product for weight rows of type t, the
// fastest one this CPU runs, and its tile: the number of tokens it
// processes together (1 where it calls the single-row kernel per token).
// Callers that split tokens among threads should split them in multiples of
// the tile. It fails, wrapping ErrNotSupported, for a type without a dot
// kernel (see DotKernel).
func GemmKernel(t Type) (f GemmFunc, tile int, err error) {
	if _, err := DotKernel(t); err != nil {
		return nil, 0, fmt.Errorf("tensor: matrix product with %s weights: %w", t, &notSupportedError{t: t})
	}
	k := gemmBest(t)
	return k.run, k.size, nil
}

// BatchGemmKernel is GemmKernel for products whose rows need not be
// batch-invariant: it may choose tiles that add a token's products in
// another order than the single-row kernel, so that each output agrees
// with DotKernel's within float rounding (not bit for bit) and a token's
// result can depend on how many tokens a call multiplies together. With
// AVX-512, Q4_K and Q6_K rows take sixteen tokens at a time with the tokens
// in the vector lanes, faster than the exact tile (see gemmlanes_amd64.s).
// For other types, and without AVX-512, it returns GemmKernel's product.
func BatchGemmKernel(t Type) (f GemmFunc, tile int, err error) {
	if _, err := DotKernel(t); err != nil {
		return nil, 0, fmt.Errorf("tensor: matrix product with %s weights: %w", t, &notSupportedError{t: t})
	}
	impls := gemmImpls(t)
	k := &impls[len(impls)-1]
	return k.run, k.size, nil
}

// gemmRowBytes and gemmTokenBytes are the sizes of the blocks of weight rows
// and of activation rows that the loops keep in cache together: about an
// eighth and half of the 2 MiB L2 cache per core of the machines this is
// tuned on.
const (
	gemmRowBytes   = 256 << 10
	gemmTokenBytes = 1 << 20
)

// GemmPackRows is the fewest weight rows for which a GemmFunc packs the
// tokens of its four- and two-token tiles into aligned memory, as it
// always packs those of its eight- and sixteen-token ones (AVX-512 Q4_K
// and Q6_K): the copy is made once per token block and read by every row,
// so from this many rows on it is a small part of the product, and the
// packed tiles, reading aligned memory, beat the in-place ones. A caller
// that splits a product of a few tokens into chunks of rows (the experts
// of a batched decode step) keeps its chunks at least this large to get
// them.
const GemmPackRows = 256

// gemmTileFunc computes one weight row (nb blocks at x) against the tile's
// tokens, whose activation rows start at y, lda bytes apart: the result of
// token t goes to out[t*ldo] (an element stride). nb may not be zero.
type gemmTileFunc func(x, y *byte, lda, nb int, out *float32, ldo int)

// gemmPackedFunc computes one weight row (nb blocks at x) against the
// tokens of Q8_K activations packed at q by packQ8K (consecutive packed
// groups of eight for a tile of sixteen), for loads aligned to cache
// lines: the result of token t goes to out[t*ldo]. nb may not be zero.
type gemmPackedFunc func(x, q *byte, nb int, out *float32, ldo int)

// gemmLanesFunc computes lanesRows weight rows (nb blocks at x, x+ldw, …)
// against sixteen tokens packed at q by packLanes16: the result of token t
// and row x+i·ldw goes to out[t*ldo+i]. A row's result does not depend on
// the other rows of the call. nb may not be zero; ldw may be zero (the
// same row four times).
type gemmLanesFunc func(x *byte, ldw int, q *byte, nb int, out *float32, ldo int)

// lanesRows is the number of weight rows a gemmLanesFunc computes.
const lanesRows = 4

// gemmStep is a tile kernel and the number of tokens it computes, reading
// the activations in place (tile) or packed (packed, or lanes for sixteen
// tokens in the vector lanes; these steps come first and have sizes that
// are multiples of 8).
type gemmStep struct {
	tile   gemmTileFunc
	packed gemmPackedFunc
	lanes  gemmLanesFunc
	size   int
}

// packLanes16 copies the Q8_K activation rows of tokens j..j+15 (nb blocks
// each, lda bytes apart) to q in the layout of the lanes kernels
// (gemmlanes_amd64.s), lanesBlock bytes a block: the values in groups of
// four elements, group g at 64·g with token t's four bytes at 4·t; the
// tokens' scales dy at 4096 + 4·t; lanesMagic − 32·bsum of each 16-element
// sub-block s (Q6_K's offset of −32) at 4160 + 64·s + 4·t; and the sums of
// the 32-element sub-blocks 2i and 2i+1 (Q4_K's min terms, int16 pairs) at
// 5184 + 64·i + 4·t.
func packLanes16(q, act []byte, lda, j, nb int) {
	const bs = 292
	// The kernels read whole packed blocks and every token's nb blocks.
	_ = q[nb*lanesBlock-1]
	_ = act[(j+15)*lda+nb*bs-1]
	packLanesValues(&q[0], &act[j*lda], lda, nb)
	for t := range 16 {
		a := act[(j+t)*lda:]
		for b := range nb {
			blk := a[b*bs : (b+1)*bs : (b+1)*bs]
			p := q[b*lanesBlock : (b+1)*lanesBlock : (b+1)*lanesBlock]
			copy(p[4096+4*t:4096+4*t+4], blk[:4])
			bsums := blk[4+256 : bs : bs]
			var b16 [16]int16
			for s := range b16 {
				b16[s] = int16(binary.LittleEndian.Uint16(bsums[2*s:]))
				binary.LittleEndian.PutUint32(p[4160+64*s+4*t:], lanesMagic-uint32(32*int32(b16[s])))
			}
			for i := range 4 {
				lo := uint16(b16[4*i] + b16[4*i+1])
				hi := uint16(b16[4*i+2] + b16[4*i+3])
				binary.LittleEndian.PutUint32(p[5184+64*i+4*t:], uint32(lo)|uint32(hi)<<16)
			}
		}
	}
}

// packLanesValuesGo is the pure-Go twin of packLanesValues: the values of
// sixteen tokens' Q8_K blocks (token t's nb blocks at act + t·lda) to the
// packed blocks at q, group g of block b at q + lanesBlock·b + 64·g, token
// t's four bytes at 4·t.
func packLanesValuesGo(q, act *byte, lda, nb int) {
	const bs = 292
	for t := range 16 {
		for b := range nb {
			src := unsafe.Add(unsafe.Pointer(act), t*lda+b*bs+4)
			dst := unsafe.Add(unsafe.Pointer(q), b*lanesBlock+4*t)
			for g := range 64 {
				*(*[4]byte)(unsafe.Add(dst, 64*g)) = *(*[4]byte)(unsafe.Add(src, 4*g))
			}
		}
	}
}

// lanesMagic is the bits of the float 1.5·2²³ (MAGIC in gemmlanes_amd64.s),
// where the lanes kernels start their integer sums: MAGIC + k is the float
// 1.5·2²³ + k for |k| < 2²², so one subtraction turns the sum to a float.
const lanesMagic = 0x4B400000

// lanesBlock is the bytes of one block of sixteen tokens packed by
// packLanes16 (LANESB in gemmlanes_amd64.s), a multiple of 64.
const lanesBlock = 4096 + 64 + 16*64 + 4*64

// packQ8K copies the int8 values and block sums of the Q8_K activation
// rows of tokens j..j+7 (nb blocks each, lda bytes apart) to q, which holds
// packQ8KBlock bytes a block: block b's values of token k at
// q[packQ8KBlock·b+256·k:], its sixteen int16 block sums at +2048+32·k,
// their eight pair sums (bsums[2i]+bsums[2i+1]) at +2304+16·k, and its
// scale dy at +2432+4·k. The packed kernels then load whole cache lines: a
// Q8_K block is 292 bytes, and in place most 64-byte loads of its values
// straddle two lines.
func packQ8K(q, act []byte, lda, j, nb int) { packQ8KTokens(q, act, lda, j, nb, 8) }

// packQ8KTokens is packQ8K for tokens j..j+count−1 (count ≤ 8), in slots
// 0..count−1 of the group: the four- and two-token packed tiles read
// slots 0-3 and 0-1.
func packQ8KTokens(q, act []byte, lda, j, nb, count int) {
	const bs, qs = 292, 256
	for k := range count {
		a := act[(j+k)*lda:]
		for b := range nb {
			blk := a[b*bs : (b+1)*bs]
			p := q[b*packQ8KBlock : (b+1)*packQ8KBlock]
			copy(p[k*qs:(k+1)*qs], blk[4:4+qs])
			bsums := blk[4+qs : bs : bs]
			copy(p[2048+32*k:2048+32*(k+1)], bsums)
			copy(p[2432+4*k:2432+4*(k+1)], blk[:4])
			// Four sums a word: pairs (0,1) and (2,3) of each.
			sums := p[2304+16*k : 2304+16*(k+1) : 2304+16*(k+1)]
			for i := range 4 {
				v := binary.LittleEndian.Uint64(bsums[8*i:])
				lo := uint16(int16(v) + int16(v>>16))
				hi := uint16(int16(v>>32) + int16(v>>48))
				binary.LittleEndian.PutUint32(sums[4*i:], uint32(lo)|uint32(hi)<<16)
			}
		}
	}
}

// packQ8KBlock is the bytes of one block of eight tokens packed by
// packQ8K (PACKB in gemmk_amd64.s), a multiple of 64.
const packQ8KBlock = 8*256 + 8*32 + 8*16 + 64

// gemmPacks holds the buffers of packed activations between calls, so that
// a GemmFunc allocates nothing in steady state (a cache, as fmt's printer
// pool: any buffer serves any call).
var gemmPacks = sync.Pool{New: func() any { return new([]byte) }}

// alignedPack returns a 64-byte aligned slice of n bytes of *buf, growing it.
func alignedPack(buf *[]byte, n int) []byte {
	if cap(*buf) < n+64 {
		*buf = make([]byte, n+64)
	}
	b := (*buf)[:n+64]
	off := int((64 - uintptr(unsafe.Pointer(&b[0]))%64) % 64)
	return b[off : off+n]
}

// gemmKernel is one implementation of a GemmFunc: its tile kernels, largest
// first, each equal to dot, the single-row kernel (twin signature: nb whole
// blocks) that computes the tokens left over; size is the largest tile (1
// without tile kernels).
type gemmKernel struct {
	name  string
	steps []gemmStep
	// small, when set, are packed tiles of fewer than eight tokens (four,
	// then two) that replace the in-place tiles of those sizes for the
	// tokens past the last whole group of eight when a product has at
	// least GemmPackRows rows (see run).
	small []gemmStep
	size  int
	dot   func(x, y []byte, nb int) float32
	typ   Type
	// raw, when set, is dot's assembly kernel itself (nb > 0, pointers to
	// whole blocks), which the rows of a single token call directly: a
	// decode step computes some 350k short rows, and the adapter's checks
	// and indirect call were a tenth of a 1536-wide Q4_K row.
	raw func(x, y *byte, nb int) float32
	// rounds is set where a tile (the lanes tile of sixteen) adds its
	// products in another order than the single-row kernel: its results
	// agree with dot within float rounding, not bit for bit.
	rounds bool
	// rows4, when set, computes four rows ldw apart against one token,
	// each exactly as raw, for rows of fewer than 8 blocks (gemmrows_amd64.s).
	rows4 func(x *byte, ldw int, y *byte, nb int, out *float32)
	// rows4x4, when set with rows4, computes four rows against four
	// tokens (lda bytes apart, results ldo apart), each exactly as rows4.
	rows4x4 func(x *byte, ldw int, y *byte, lda, nb int, out *float32, ldo int)
}

// runLanes computes rows [r0, r1) of w against the sixteen tokens packed at
// q with the lanes kernel f, lanesRows rows a call; the results of token t
// go to out[t*ldo+r]. Where the rows are not a multiple of lanesRows, the
// last call takes the chunk's last lanesRows rows again (a row's result
// does not depend on the call), and a chunk of fewer rows computes each
// row alone into scratch.
func runLanes(f gemmLanesFunc, w []byte, ldw int, q *byte, nb int, out []float32, ldo, r0, r1 int) {
	if r1-r0 < lanesRows {
		var one [16 * lanesRows]float32
		for r := r0; r < r1; r++ {
			f(&w[r*ldw], 0, q, nb, &one[0], lanesRows)
			for t := range 16 {
				out[t*ldo+r] = one[t*lanesRows]
			}
		}
		return
	}
	for r := r0; r < r1; r += lanesRows {
		r = min(r, r1-lanesRows)
		f(&w[r*ldw], ldw, q, nb, &out[r], ldo)
	}
}

// gemmShape checks the arguments of a GemmFunc for weight type t and returns
// the number of blocks per row.
func gemmShape(t Type, w []byte, ldw int, act []byte, lda int, out []float32, ldo int, rows, m, n int) int {
	bs := t.BlockSize()
	if n < 0 || n%bs != 0 {
		panic(fmt.Sprintf("tensor: %s matrix product: %d elements are not a whole number of %d-element blocks", t, n, bs))
	}
	if rows < 0 || m < 0 || ldw < 0 || lda < 0 || ldo < 0 {
		panic(fmt.Sprintf("tensor: %s matrix product: negative shape: %d rows, %d tokens, strides %d, %d, %d",
			t, rows, m, ldw, lda, ldo))
	}
	nb := n / bs
	if rows == 0 || m == 0 {
		return nb
	}
	wb, wok := gemmSpan(rows, ldw, nb*t.TypeSize())
	ab, aok := gemmSpan(m, lda, nb*t.VecDotType().TypeSize())
	ob, ook := gemmSpan(m, ldo, rows)
	if !wok || !aok || !ook || len(w) < wb || len(act) < ab || len(out) < ob {
		panic(fmt.Sprintf("tensor: %s matrix product of %d rows and %d tokens of %d elements needs %d weight bytes, "+
			"%d activation bytes and %d outputs, got %d, %d and %d", t, rows, m, n, wb, ab, ob, len(w), len(act), len(out)))
	}
	return nb
}

// gemmSpan returns (count−1)·stride + last, the length that count items of
// last elements, stride apart, need, and false if it overflows an int.
func gemmSpan(count, stride, last int) (int, bool) {
	if stride > 0 && count-1 > (math.MaxInt-last)/stride {
		return 0, false
	}
	return (count-1)*stride + last, true
}

// run is the GemmFunc of k: blocks of tokens, blocks of weight rows, token
// tiles (the largest first) over each row of the block, the tokens left
// over one by one.
func (k *gemmKernel) run(w []byte, ldw int, act []byte, lda int, out []float32, ldo int, rows, m, n int) {
	nb := gemmShape(k.typ, w, ldw, act, lda, out, ldo, rows, m, n)
	if rows == 0 || m == 0 {
		return
	}
	if nb == 0 {
		for j := range m {
			clear(out[j*ldo : j*ldo+rows])
		}
		return
	}
	rb := max(1, gemmRowBytes/max(1, ldw))
	tb := max(k.size, gemmTokenBytes/max(1, lda)/k.size*k.size)
	// Rows of fewer than 8 blocks with a four-row kernel (MLA's 192-wide
	// attn_k_b) run it, four tokens at a time where there are four, for
	// every token: a tile's per-row overhead weighs on rows that short,
	// and four rows per call share it.
	steps := k.steps
	if k.rows4 != nil && nb < 8 {
		steps = nil
	}
	// The packed tiles (the first steps, where they have them) read the
	// tokens of each token block from a copy made once per token block,
	// eight tokens at a time: a sixteen-token tile reads two such groups.
	//
	// With small packed tiles and enough rows to pay for the copy, the
	// tokens past the last group of eight go through them instead of the
	// in-place tiles of the same sizes, each tile's tokens packed into a
	// group of their own after the groups of eight (slots 0-3 or 0-1, where
	// those tiles read).
	//
	// A lanes tile of sixteen (the first step, where there is one) reads
	// its tokens from a copy of its own (packLanes16); the groups of
	// sixteen of a token block come first in the buffer, then its groups
	// of eight.
	var pack []byte
	packed := len(steps) > 0 && (steps[0].packed != nil || steps[0].lanes != nil) && m >= 8
	lanes := packed && steps[0].lanes != nil
	small := len(steps) > 0 && k.small != nil && rows >= GemmPackRows && m%8 >= 2
	if packed || small {
		buf := gemmPacks.Get().(*[]byte)
		defer gemmPacks.Put(buf)
		n := min(m, tb)
		size := packQ8KBlock * nb * (n/8 + len(k.small))
		if lanes {
			size = nb * (n/16*lanesBlock + (n%16/8+len(k.small))*packQ8KBlock)
		}
		pack = alignedPack(buf, size)
	}
	// The small packed tiles of a token block: their steps and first tokens.
	var smallS [2]gemmStep
	var smallJ [2]int
	for j0 := 0; j0 < m; j0 += tb {
		j1 := min(m, j0+tb)
		big := j0 + (j1-j0)/8*8 // tokens [j0, big) in groups of sixteen or eight
		j16 := j0               // tokens [j0, j16) in groups of sixteen
		if lanes {
			j16 += (j1 - j0) / 16 * 16
		}
		base8 := (j16 - j0) / 16 * lanesBlock * nb // the first group of eight
		if packed {
			for j := j0; j < j16; j += 16 {
				packLanes16(pack[(j-j0)/16*lanesBlock*nb:], act, lda, j, nb)
			}
			for j := j16; j < big; j += 8 {
				packQ8K(pack[base8+(j-j16)/8*packQ8KBlock*nb:], act, lda, j, nb)
			}
		}
		ns := 0
		if small {
			j := big
			for _, s := range k.small {
				if j+s.size <= j1 && ns < len(smallS) {
					smallS[ns], smallJ[ns] = s, j
					packQ8KTokens(pack[base8+((big-j16)/8+ns)*packQ8KBlock*nb:], act, lda, j, nb, s.size)
					ns++
					j += s.size
				}
			}
		}
		for r0 := 0; r0 < rows; r0 += rb {
			r1 := min(rows, r0+rb)
			j := j0
			for _, s := range steps {
				if ns > 0 && s.packed == nil && s.lanes == nil {
					break // the small packed tiles take the tokens from here
				}
				for ; j+s.size <= j1; j += s.size {
					if s.lanes != nil {
						runLanes(s.lanes, w, ldw, &pack[(j-j0)/16*lanesBlock*nb], nb, out[j*ldo:], ldo, r0, r1)
						continue
					}
					if s.packed != nil {
						q := &pack[base8+(j-j16)/8*packQ8KBlock*nb]
						for r := r0; r < r1; r++ {
							s.packed(&w[r*ldw], q, nb, &out[j*ldo+r], ldo)
						}
						continue
					}
					for r := r0; r < r1; r++ {
						s.tile(&w[r*ldw], &act[j*lda], lda, nb, &out[j*ldo+r], ldo)
					}
				}
			}
			for i := range ns {
				s := smallS[i]
				q := &pack[base8+((big-j16)/8+i)*packQ8KBlock*nb]
				for r := r0; r < r1; r++ {
					s.packed(&w[r*ldw], q, nb, &out[smallJ[i]*ldo+r], ldo)
				}
				j = smallJ[i] + s.size
			}
			if k.rows4x4 != nil && nb < 8 {
				// gemmShape checked that every row and token lies within
				// w, act and out.
				wp := unsafe.Pointer(&w[r0*ldw])
				for ; j+4 <= j1; j += 4 {
					i := 0
					for ; i+4 <= r1-r0; i += 4 {
						k.rows4x4((*byte)(unsafe.Add(wp, i*ldw)), ldw, &act[j*lda], lda, nb, &out[j*ldo+r0+i], ldo)
					}
					for t := j; t < j+4; t++ {
						for r := r0 + i; r < r1; r++ {
							out[t*ldo+r] = k.raw(&w[r*ldw], &act[t*lda], nb)
						}
					}
				}
			}
			for ; j < j1; j++ {
				a := act[j*lda:]
				o := out[j*ldo:]
				if k.raw != nil {
					// gemmShape checked that every row and token lies
					// within w, act and out.
					ap, wp := &a[0], unsafe.Pointer(&w[r0*ldw])
					o := o[r0:r1]
					i := 0
					if k.rows4 != nil && nb < 8 {
						for ; i+4 <= len(o); i += 4 {
							k.rows4((*byte)(unsafe.Add(wp, i*ldw)), ldw, ap, nb, &o[i])
						}
					}
					for ; i < len(o); i++ {
						o[i] = k.raw((*byte)(unsafe.Add(wp, i*ldw)), ap, nb)
					}
					continue
				}
				for r := r0; r < r1; r++ {
					o[r] = k.dot(w[r*ldw:], a, nb)
				}
			}
		}
	}
}
