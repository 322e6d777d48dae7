package tensor

// A Q6_K block (210 bytes) holds 256 elements in 16 sub-blocks of 16 with
// int8 scales:
//
//	ql[128] @0 · qh[64] @128 · scales i8[16] @192 · d f16 @208
//
// Half h (128 elements) uses ql[64h:], qh[32h:], scales[8h:]; for l = 0…31
// and s = l/16 the four 6-bit values
//
//	q0 = ql[l]&15    | (qh[l]>>0&3)<<4   → y[128h+l]     scale 8h+s
//	q1 = ql[l+32]&15 | (qh[l]>>2&3)<<4   → y[128h+l+32]  scale 8h+s+2
//	q2 = ql[l]>>4    | (qh[l]>>4&3)<<4   → y[128h+l+64]  scale 8h+s+4
//	q3 = ql[l+32]>>4 | (qh[l]>>6&3)<<4   → y[128h+l+96]  scale 8h+s+6
//
// give y = (d·scale)·(q − 32).
const sizeQ6K = 210

// q6kQuants decodes a Q6_K block's 256 unsigned 6-bit quants q (the
// element is d·scale·(q − 32)), in element order.
func q6kQuants(b []byte) (q [256]uint8) {
	for h := range 2 {
		ql := (*[64]byte)(b[64*h:])
		qh := (*[32]byte)(b[128+32*h:])
		o := (*[128]uint8)(q[128*h:])
		for l := range 32 {
			o[l] = ql[l]&15 | qh[l]&3<<4
			o[l+32] = ql[l+32]&15 | qh[l]>>2&3<<4
			o[l+64] = ql[l]>>4 | qh[l]>>4&3<<4
			o[l+96] = ql[l+32]>>4 | qh[l]>>6&3<<4
		}
	}
	return q
}

// putQ6KQuants writes 256 unsigned 6-bit quants into a Q6_K block's ql and
// qh (its first 192 bytes), the inverse of q6kQuants.
func putQ6KQuants(b []byte, q *[256]uint8) {
	for h := range 2 {
		ql := (*[64]byte)(b[64*h:])
		qh := (*[32]byte)(b[128+32*h:])
		x := (*[128]uint8)(q[128*h:])
		for l := range 32 {
			ql[l] = x[l]&15 | x[l+64]&15<<4
			ql[l+32] = x[l+32]&15 | x[l+96]&15<<4
			qh[l] = x[l]>>4 | x[l+32]>>4<<2 | x[l+64]>>4<<4 | x[l+96]>>4<<6
		}
	}
}

func dequantQ6K(src []byte, dst []float32) {
	for i := range len(dst) / 256 {
		b := (*[sizeQ6K]byte)(src[i*sizeQ6K:])
		y := (*[256]float32)(dst[i*256:])
		d := f16(b[208:])
		for h := range 2 {
			ql := (*[64]byte)(b[64*h:])
			qh := (*[32]byte)(b[128+32*h:])
			sc := (*[8]byte)(b[192+8*h:])
			out := (*[128]float32)(y[128*h:])
			for s := range 2 {
				d0 := d * float32(int8(sc[s]))
				d1 := d * float32(int8(sc[s+2]))
				d2 := d * float32(int8(sc[s+4]))
				d3 := d * float32(int8(sc[s+6]))
				for l := 16 * s; l < 16*s+16; l++ {
					hb := qh[l]
					q0 := int(ql[l]&15|hb&3<<4) - 32
					q1 := int(ql[l+32]&15|hb>>2&3<<4) - 32
					q2 := int(ql[l]>>4|hb>>4&3<<4) - 32
					q3 := int(ql[l+32]>>4|hb>>6&3<<4) - 32
					out[l] = d0 * float32(q0)
					out[l+32] = d1 * float32(q1)
					out[l+64] = d2 * float32(q2)
					out[l+96] = d3 * float32(q3)
				}
			}
		}
	}
}
