package tensor

// A Q2_K block (84 bytes) holds 256 elements in 16 sub-blocks of 16:
//
//	scales[16] @0 · qs[64] @16 · d f16 @80 · dmin f16 @82
//
// Sub-block i has scale scales[i]&15 and min scales[i]>>4. Half h (128
// elements) takes 2-bit values from qs[32h:32h+32], plane p from bits 2p:
// y[128h+32p+l] = (d·sc)·q − dmin·m for l = 0…31, sub-block 8h+2p+l/16.
const sizeQ2K = 84

func dequantQ2K(src []byte, dst []float32) {
	for i := range len(dst) / 256 {
		b := (*[sizeQ2K]byte)(src[i*sizeQ2K:])
		y := (*[256]float32)(dst[i*256:])
		d, dmin := f16(b[80:]), f16(b[82:])
		for h := range 2 {
			qs := (*[32]byte)(b[16+32*h:])
			for p := range 4 {
				shift := 2 * p
				for half := range 2 {
					sc := b[8*h+2*p+half]
					dl := d * float32(sc&15)
					ml := dmin * float32(sc>>4)
					out := (*[16]float32)(y[128*h+32*p+16*half:])
					q := (*[16]byte)(qs[16*half:])
					for l := range 16 {
						out[l] = float32(dl*float32(q[l]>>shift&3)) - ml
					}
				}
			}
		}
	}
}
