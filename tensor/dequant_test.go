package tensor

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// implemented lists every type Dequantize converts.
var implemented = []Type{F32, F16, BF16, F64, I8, I16, I32, I64, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1,
	Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ4_NL, IQ4_XS, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M}

// unsupported lists the known types Dequantize refuses.
var unsupported = []Type{TQ1_0, TQ2_0, MXFP4, NVFP4}

// refElem computes element k of one block b of type t straight from the
// per-element formulas of docs/FILE-LAYOUTS.md section 3, rounding each
// product to float32 in ggml's order (explicit conversions keep the
// compiler from fusing a product into the following addition). It is the
// slow twin the kernels are checked against on random blocks.
func refElem(t Type, b []byte, k int) float32 {
	le := binary.LittleEndian
	h := func(off int) float32 { return F16ToF32(le.Uint16(b[off:])) }
	nib := func(qs []byte, k int) int { // "low nibbles → first half" of 32
		if k < 16 {
			return int(qs[k] & 15)
		}
		return int(qs[k-16] >> 4)
	}
	switch t {
	case F32:
		return math.Float32frombits(le.Uint32(b))
	case F16:
		return h(0)
	case BF16:
		return math.Float32frombits(uint32(le.Uint16(b)) << 16)
	case F64:
		return float32(math.Float64frombits(le.Uint64(b)))
	case I8:
		return float32(int8(b[0]))
	case I16:
		return float32(int16(le.Uint16(b)))
	case I32:
		return float32(int32(le.Uint32(b)))
	case I64:
		return float32(int64(le.Uint64(b)))
	case Q4_0:
		return float32(nib(b[2:], k)-8) * h(0)
	case Q4_1:
		return float32(float32(nib(b[4:], k))*h(0)) + h(2)
	case Q5_0, Q5_1:
		off := 2
		if t == Q5_1 {
			off = 4
		}
		qh := le.Uint32(b[off:])
		q := nib(b[off+4:], k) | int(qh>>k&1)<<4
		if t == Q5_0 {
			return float32(q-16) * h(0)
		}
		return float32(float32(q)*h(0)) + h(2)
	case Q8_0:
		return float32(int8(b[2+k])) * h(0)
	case Q8_1:
		return float32(int8(b[4+k])) * h(0)
	case IQ4_NL:
		return h(0) * float32(kvaluesIQ4NL[nib(b[2:], k)])
	case Q8_K:
		return math.Float32frombits(le.Uint32(b)) * float32(int8(b[4+k]))
	case Q4_K, Q5_K:
		c, l, high := k/64, k%32, k%64 >= 32
		j := 2*c + k%64/32 // sub-block
		var sc, m int
		s := b[4:16]
		if j < 4 {
			sc, m = int(s[j]&63), int(s[j+4]&63)
		} else {
			sc = int(s[j+4]&15) | int(s[j-4]>>6)<<4
			m = int(s[j+4]>>4) | int(s[j]>>6)<<4
		}
		qs := b[16:]
		if t == Q5_K {
			qs = b[48:]
		}
		q := int(qs[32*c+l] & 15)
		if high {
			q = int(qs[32*c+l] >> 4)
		}
		if t == Q5_K {
			q += 16 * int(b[16+l]>>j&1)
		}
		ds := h(0) * float32(sc)
		dm := h(2) * float32(m)
		return float32(ds*float32(q)) - dm
	case Q6_K:
		hh, r := k/128, k%128
		quarter, l := r/32, r%32
		ql, qh := b[64*hh:], b[128+32*hh:]
		var q int
		switch quarter {
		case 0:
			q = int(ql[l]&15) | int(qh[l]&3)<<4
		case 1:
			q = int(ql[l+32]&15) | int(qh[l]>>2&3)<<4
		case 2:
			q = int(ql[l]>>4) | int(qh[l]>>4&3)<<4
		case 3:
			q = int(ql[l+32]>>4) | int(qh[l]>>6&3)<<4
		}
		sc := int8(b[192+8*hh+l/16+2*quarter])
		ds := h(208) * float32(sc)
		return ds * float32(q-32)
	case Q2_K:
		hh, r := k/128, k%128
		p, l := r/32, r%32
		i := 8*hh + 2*p + l/16
		q := int(b[16+32*hh+l] >> (2 * p) & 3)
		dl := h(80) * float32(b[i]&15)
		ml := h(82) * float32(b[i]>>4)
		return float32(dl*float32(q)) - ml
	case Q3_K:
		hh, r := k/128, k%128
		p, l := r/32, r%32
		i := 8*hh + 2*p + l/16
		s := b[96:108]
		lo := int(s[i%8] >> (4 * (i / 8)) & 15)
		hi := int(s[8+i%4]>>(2*(i/4))) & 3
		q := int(b[32+32*hh+l] >> (2 * p) & 3)
		if b[l]>>(4*hh+p)&1 == 0 {
			q -= 4
		}
		dl := h(108) * float32(lo|hi<<4-32)
		return dl * float32(q)
	case IQ4_XS:
		j, r := k/32, k%32
		ls := int(b[4+j/2]>>(4*(j%2))&15) | int(le.Uint16(b[2:])>>(2*j)&3)<<4
		dl := h(0) * float32(ls-32)
		return dl * float32(kvaluesIQ4NL[nib(b[8+16*j:], r)])
	case IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S:
		return refElemIQSigned(t, b, k)
	case IQ1_S, IQ1_M:
		return refElemIQ1(t, b, k)
	}
	panic("refElem: no formula for " + t.String())
}

// refElemIQSigned is refElem for the codebook types with sign bits
// (docs/FILE-LAYOUTS.md section 3.10): element k is in group g of 32, value
// group l of 8, position j.
func refElemIQSigned(t Type, b []byte, k int) float32 {
	le := binary.LittleEndian
	d := F16ToF32(le.Uint16(b))
	g, l, j := k/32, k%32/8, k%8
	var mag uint8 // the grid value
	var neg bool  // its sign
	var scale float32
	// ksign is the 8-sign pattern of a 7-bit index: the 8th is the parity.
	ksign := func(p uint32) bool {
		p &= 127
		if j == 7 {
			n := 0
			for ; p != 0; p &= p - 1 {
				n++
			}
			return n%2 == 1
		}
		return p>>j&1 == 1
	}
	half := func(sc byte) float32 { // d·(0.5 + nibble)·0.25 of the value's half-group
		nibble := sc & 15
		if l >= 2 {
			nibble = sc >> 4
		}
		return float32(d*(0.5+float32(nibble))) * 0.25
	}
	switch t {
	case IQ2_XXS:
		aux := le.Uint32(b[2+8*g+4:])
		mag = byte(iq2xxsGrid[b[2+8*g+l]] >> (8 * j))
		neg = ksign(aux >> (7 * l))
		scale = float32(d*(0.5+float32(aux>>28))) * 0.25
	case IQ2_XS:
		q := le.Uint16(b[2+8*g+2*l:])
		mag = byte(iq2xsGrid[q&511] >> (8 * j))
		neg = ksign(uint32(q >> 9))
		scale = half(b[66+g])
	case IQ2_S:
		idx := int(b[2+4*g+l]) + 256*int(b[66+g]>>(2*l)&3)
		mag = byte(iq2sGrid[idx] >> (8 * j))
		neg = b[34+4*g+l]>>j&1 == 1
		scale = half(b[74+g])
	case IQ3_XXS:
		aux := le.Uint32(b[66+4*g:])
		mag = byte(iq3xxsGrid[b[2+8*g+2*l+j/4]] >> (8 * (j % 4)))
		neg = ksign(aux >> (7 * l))
		scale = float32(d*(0.5+float32(aux>>28))) * 0.5
	case IQ3_S:
		q := 2*l + j/4 // which of the group's 8 indices
		idx := int(b[2+8*g+q]) + 256*int(b[66+g]>>q&1)
		mag = byte(iq3sGrid[idx] >> (8 * (j % 4)))
		neg = b[74+4*g+l]>>j&1 == 1
		scale = d * float32(1+2*int(b[106+g/2]>>(4*(g%2))&15))
	}
	v := scale * float32(mag)
	if neg {
		v = -v
	}
	return v
}

// refElemIQ1 is refElem for IQ1_S and IQ1_M (docs/FILE-LAYOUTS.md section
// 3.10).
func refElemIQ1(t Type, b []byte, k int) float32 {
	le := binary.LittleEndian
	g, l, j := k/32, k%32/8, k%8
	var d, delta float32
	var idx, s int
	if t == IQ1_S {
		qh := le.Uint16(b[34+2*g:])
		d = F16ToF32(le.Uint16(b))
		idx = int(b[2+4*g+l]) + 256*int(qh>>(3*l)&7)
		s = int(qh >> 12 & 7)
		delta = 0.125
		if qh>>15 == 1 {
			delta = -0.125
		}
	} else {
		var h uint16 // d: the top nibble of each scale word, lowest word first
		for w := range 4 {
			h |= le.Uint16(b[48+2*w:]) >> 12 << (4 * w)
		}
		d = F16ToF32(h)
		qh := b[32+2*g+l/2] >> (4 * (l % 2)) // this index's nibble
		idx = int(b[4*g+l]) + 256*int(qh&7)
		s = int(le.Uint16(b[48+2*(g/2):]) >> (6*(g%2) + 3*(l/2)) & 7)
		delta = 0.125
		if qh&8 != 0 {
			delta = -0.125
		}
	}
	grid := int8(iq1sGrid[idx] >> (8 * j))
	return float32(d*float32(2*s+1)) * (float32(grid) + delta)
}

// randomBlocks returns n random blocks of t whose f16/f32 scales are
// finite values of moderate size.
func randomBlocks(r *rand.Rand, t Type, n int) []byte {
	b := make([]byte, n*t.TypeSize())
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	scale := func() uint16 { return F32ToF16(float32(r.NormFloat64() * 0.01)) }
	le := binary.LittleEndian
	for i := range n {
		blk := b[i*t.TypeSize() : (i+1)*t.TypeSize()]
		switch t {
		case Q4_0, Q5_0, Q8_0, IQ4_NL, IQ4_XS, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S:
			le.PutUint16(blk[0:], scale())
		case IQ1_M: // d is the top nibbles of the four scale words
			d := scale()
			for w := range 4 {
				p := blk[48+2*w:]
				le.PutUint16(p, le.Uint16(p)&0x0fff|(d>>(4*w)&15)<<12)
			}
		case Q4_1, Q5_1, Q8_1, Q4_K, Q5_K:
			le.PutUint16(blk[0:], scale())
			le.PutUint16(blk[2:], scale())
		case Q2_K:
			le.PutUint16(blk[80:], scale())
			le.PutUint16(blk[82:], scale())
		case Q3_K:
			le.PutUint16(blk[108:], scale())
		case Q6_K:
			le.PutUint16(blk[208:], scale())
		case Q8_K:
			le.PutUint32(blk[0:], math.Float32bits(float32(r.NormFloat64()*0.01)))
		case F16:
			le.PutUint16(blk, scale())
		case F32:
			le.PutUint32(blk, math.Float32bits(float32(r.NormFloat64())))
		case F64:
			le.PutUint64(blk, math.Float64bits(r.NormFloat64()))
		}
	}
	return b
}

// TestDequantizeTwin checks every kernel against refElem on random blocks,
// bit for bit.
func TestDequantizeTwin(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, ty := range implemented {
		t.Run(ty.String(), func(t *testing.T) {
			const nblocks = 8
			bs, ts := ty.BlockSize(), ty.TypeSize()
			n := nblocks * 256 / bs * bs
			if bs == 1 {
				n = 1000
			}
			src := randomBlocks(r, ty, n/bs)
			dst := make([]float32, n)
			if err := Dequantize(ty, src, dst); err != nil {
				t.Fatal(err)
			}
			for k := range n {
				blk := src[k/bs*ts : (k/bs+1)*ts]
				want := refElem(ty, blk, k%bs)
				if math.Float32bits(dst[k]) != math.Float32bits(want) {
					t.Fatalf("element %d: %g (%#08x), formula %g (%#08x)",
						k, dst[k], math.Float32bits(dst[k]), want, math.Float32bits(want))
				}
			}
		})
	}
}

func f16b(f float32) []byte { return binary.LittleEndian.AppendUint16(nil, F32ToF16(f)) }

// TestDequantizeKnownBlocks decodes hand-built blocks whose values are
// worked out by hand.
func TestDequantizeKnownBlocks(t *testing.T) {
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	rep := func(v byte, n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = v
		}
		return b
	}
	// q4 = nibbles 0x1 low, 0xe high in every byte.
	cases := []struct {
		name string
		t    Type
		src  []byte
		want map[int]float32 // element → value
	}{
		{"Q4_0", Q4_0, cat(f16b(0.5), rep(0xe1, 16)), map[int]float32{0: (1 - 8) * 0.5, 15: -3.5, 16: (14 - 8) * 0.5, 31: 3}},
		{"Q4_1", Q4_1, cat(f16b(0.25), f16b(-1), rep(0xe1, 16)), map[int]float32{0: 0.25 - 1, 16: 14*0.25 - 1}},
		// qh bit 0 and bit 16 set: element 0 = 1|16 = 17, element 16 = 14|16 = 30, element 1 = 1.
		{"Q5_0", Q5_0, cat(f16b(2), []byte{1, 0, 1, 0}, rep(0xe1, 16)), map[int]float32{0: 2, 1: -30, 16: 28, 17: -4}},
		{"Q5_1", Q5_1, cat(f16b(2), f16b(0.5), []byte{1, 0, 1, 0}, rep(0xe1, 16)), map[int]float32{0: 34.5, 1: 2.5, 16: 60.5, 17: 28.5}},
		{"Q8_0", Q8_0, cat(f16b(0.125), []byte{0x80, 0x7f, 0xff, 0}, rep(3, 28)), map[int]float32{0: -16, 1: 15.875, 2: -0.125, 3: 0, 31: 0.375}},
		{"IQ4_NL", IQ4_NL, cat(f16b(0.5), rep(0xf0, 16)), map[int]float32{0: -63.5, 16: 56.5}},
		{"Q8_K", Q8_K, cat(binary.LittleEndian.AppendUint32(nil, math.Float32bits(0.5)), []byte{0x81, 5}, rep(0, 254), rep(0, 32)),
			map[int]float32{0: -63.5, 1: 2.5, 2: 0}},
		// Q4_K: d = 1, dmin = 0.5; sub-block 0: sc 3, m 2; sub-block 1: sc 5, m 1;
		// sub-block 4: sc = 0x12 (low 2 from byte 8, high from byte 0 bits 6-7 = 1), m = 0x21.
		{"Q4_K", Q4_K, cat(f16b(1), f16b(0.5),
			[]byte{3 | 1<<6, 5, 0, 0, 2 | 2<<6, 1, 0, 0, 0x2 | 0x1<<4, 0, 0, 0},
			rep(0x72, 128)),
			map[int]float32{0: 3*2 - 0.5*2, 32: 5*7 - 0.5*1, 128: 0x12*2 - 0.5*0x21, 255: 0}},
		// Q6_K: d = 0.5, scales 0..15 = 1..16; ql = 0x21, qh = 0b11100100 → q0 = 1|0<<4, q1 = 1|1<<4,
		// q2 = 2|2<<4, q3 = 2|3<<4.
		{"Q6_K", Q6_K, cat(rep(0x21, 128), rep(0xe4, 64),
			[]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0xf0}, f16b(0.5)),
			map[int]float32{0: 0.5 * 1 * (1 - 32), 16: 0.5 * 2 * (1 - 32), 32: 0.5 * 3 * (17 - 32),
				64: 0.5 * 5 * (34 - 32), 96: 0.5 * 7 * (50 - 32), 255: 0.5 * -16 * (50 - 32)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if len(c.src) != c.t.TypeSize() {
				t.Fatalf("test block has %d bytes, want %d", len(c.src), c.t.TypeSize())
			}
			dst := make([]float32, c.t.BlockSize())
			if err := Dequantize(c.t, c.src, dst); err != nil {
				t.Fatal(err)
			}
			for k, want := range c.want {
				if dst[k] != want {
					t.Errorf("element %d = %g, want %g", k, dst[k], want)
				}
			}
		})
	}
}

func TestDequantizeErrors(t *testing.T) {
	for _, ty := range unsupported {
		t.Run(ty.String(), func(t *testing.T) {
			n := ty.BlockSize()
			err := Dequantize(ty, make([]byte, ty.TypeSize()), make([]float32, n))
			if !errors.Is(err, ErrNotSupported) {
				t.Fatalf("err = %v, want ErrNotSupported", err)
			}
			if want := "quant type " + ty.String() + " is not supported yet"; err.Error() != want {
				t.Errorf("err = %q, want %q", err, want)
			}
		})
	}
	if err := Dequantize(TQ1_0, nil, make([]float32, 256)); err == nil || err.Error() != "quant type TQ1_0 is not supported yet" {
		t.Errorf("TQ1_0: %v", err)
	}
	for _, id := range []Type{4, 5, 31, 41, 1000} {
		if err := Dequantize(id, nil, nil); !errors.Is(err, ErrUnknownType) {
			t.Errorf("type %d: err = %v, want ErrUnknownType", id, err)
		}
		if err := Quantize(id, nil, nil); !errors.Is(err, ErrUnknownType) {
			t.Errorf("Quantize type %d: err = %v, want ErrUnknownType", id, err)
		}
	}
	for _, ty := range implemented {
		t.Run("len/"+ty.String(), func(t *testing.T) {
			bs, ts := ty.BlockSize(), ty.TypeSize()
			bad := []struct {
				nbytes, n int
			}{
				{ts - 1, bs}, {ts + 1, bs}, {0, bs}, {2 * ts, bs}, {ts, 2 * bs},
			}
			if bs > 1 {
				bad = append(bad, struct{ nbytes, n int }{ts, bs + 1}, struct{ nbytes, n int }{ts, bs - 1})
			}
			for _, b := range bad {
				if err := Dequantize(ty, make([]byte, b.nbytes), make([]float32, b.n)); err == nil {
					t.Errorf("%d bytes for %d elements: no error", b.nbytes, b.n)
				}
			}
			if err := Dequantize(ty, nil, nil); err != nil {
				t.Errorf("empty: %v", err)
			}
		})
	}
}

// TestDequantizeNoAllocs enforces the hot-path rule.
func TestDequantizeNoAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, ty := range implemented {
		n := 2048
		src := randomBlocks(r, ty, n/ty.BlockSize())
		dst := make([]float32, n)
		if a := testing.AllocsPerRun(10, func() { _ = Dequantize(ty, src, dst) }); a != 0 {
			t.Errorf("%s: %v allocations per call", ty, a)
		}
	}
	for _, ty := range []Type{F32, F16, BF16, Q5_0, Q5_1, Q8_0, Q8_K, Q4_K, Q5_K, Q6_K} {
		src := make([]float32, 2048)
		for i := range src {
			src[i] = float32(r.NormFloat64())
		}
		sz, _ := ty.RowSize(2048)
		dst := make([]byte, sz)
		if a := testing.AllocsPerRun(10, func() { _ = Quantize(ty, src, dst) }); a != 0 {
			t.Errorf("Quantize %s: %v allocations per call", ty, a)
		}
	}
}
