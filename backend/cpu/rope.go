package cpu

import (
	"math"

	"github.com/glmrun/glmrun/backend"
)

// Rope is backend.Rope: the rotary embedding parameters.
type Rope = backend.Rope

// YaRNCorrDims is backend.YaRNCorrDims.
func YaRNCorrDims(nDims, nCtxOrig int, base, betaFast, betaSlow float32) [2]float32 {
	return backend.YaRNCorrDims(nDims, nCtxOrig, base, betaFast, betaSlow)
}

// RopeTable writes the cos/sin pairs of r for position pos to dst (Dims
// values: cos θ_i, sin θ_i for i = 0 … Dims/2−1).
func RopeTable(dst []float32, r *Rope, pos int) {
	thetaScale := float32(math.Pow(float64(r.Base), -2/float64(r.Dims)))
	theta := float32(pos)
	for i0 := 0; i0 < r.Dims; i0 += 2 {
		thetaInterp := r.FreqScale * theta
		t := thetaInterp
		mscale := r.AttnFactor
		if r.ExtFactor != 0 {
			y := (float32(i0/2) - r.CorrDims[0]) / max(0.001, r.CorrDims[1]-r.CorrDims[0])
			rampMix := (1 - min(1, max(0, y))) * r.ExtFactor
			t = float32(thetaInterp*(1-rampMix)) + float32(theta*rampMix)
			mscale *= 1 + 0.1*float32(math.Log(float64(1/r.FreqScale)))
		}
		dst[i0] = float32(math.Cos(float64(t))) * mscale
		dst[i0+1] = float32(math.Sin(float64(t))) * mscale
		theta *= thetaScale
	}
}

// RopeNorm rotates adjacent pairs (x[2i], x[2i+1]) of x by the angles in
// table (from Rope.Table): ggml's NORM mode. Elements beyond len(table)
// are left alone.
func RopeNorm(x, table []float32) {
	for i := 0; i+1 < len(table); i += 2 {
		c, s := table[i], table[i+1]
		x0, x1 := x[i], x[i+1]
		// Each product rounded on its own (the conversions): a compiler
		// that fuses multiply-adds (Go does on arm64) would otherwise choose
		// which product to fuse by context, and two callers of this loop
		// could disagree in the last bit.
		x[i] = float32(x0*c) - float32(x1*s)
		x[i+1] = float32(x0*s) + float32(x1*c)
	}
}
