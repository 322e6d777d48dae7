package tensor

// A Q3_K block (110 bytes) holds 256 elements in 16 sub-blocks of 16:
//
//	hmask[32] @0 · qs[64] @32 · scales[12] @96 · d f16 @108
//
// The 6-bit scale S_i of sub-block i has low 4 bits scales[i]&15 (i < 8) or
// scales[i−8]>>4 (i ≥ 8) and high 2 bits (scales[8+i%4] >> 2(i/4)) & 3.
// Half h takes 2-bit values from qs[32h:32h+32], plane p from bits 2p, and
// bit 4h+p of hmask[l]; a clear bit subtracts 4:
// y[128h+32p+l] = (d·(S−32))·(q − 4·!hbit), sub-block 8h+2p+l/16.
const sizeQ3K = 110

func dequantQ3K(src []byte, dst []float32) {
	for i := range len(dst) / 256 {
		b := (*[sizeQ3K]byte)(src[i*sizeQ3K:])
		y := (*[256]float32)(dst[i*256:])
		d := f16(b[108:])
		hmask := (*[32]byte)(b[0:])
		sc := (*[12]byte)(b[96:])
		var scales [16]int
		for j := range 16 {
			lo := sc[j%8] >> (4 * (j / 8)) & 15
			hi := sc[8+j%4] >> (2 * (j / 4)) & 3
			scales[j] = int(lo|hi<<4) - 32
		}
		for h := range 2 {
			qs := (*[32]byte)(b[32+32*h:])
			for p := range 4 {
				shift := 2 * p
				hb := 4*h + p // bit of hmask
				for half := range 2 {
					dl := d * float32(scales[8*h+2*p+half])
					out := (*[16]float32)(y[128*h+32*p+16*half:])
					q := (*[16]byte)(qs[16*half:])
					hm := (*[16]byte)(hmask[16*half:])
					for l := range 16 {
						// Subtract 4 where the hmask bit is clear, without a branch.
						v := int(q[l]>>shift&3) - int(^hm[l]>>hb&1)<<2
						out[l] = dl * float32(v)
					}
				}
			}
		}
	}
}
