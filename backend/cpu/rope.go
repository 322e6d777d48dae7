package cpu

import "math"

// Rope holds the rotary position embedding parameters of ggml's rope with
// YaRN (GLM5-MATH section 3.6, section 5). The zero ExtFactor and a
// FreqScale of 1 give plain RoPE.
type Rope struct {
	Dims       int        // rotated leading elements (n_rot), even
	Base       float32    // rope.freq_base
	FreqScale  float32    // 1/scaling factor (1 without scaling)
	ExtFactor  float32    // YaRN extrapolation mix: 1 with YaRN, else 0
	AttnFactor float32    // magnitude handed to rope (1 without YaRN)
	CorrDims   [2]float32 // YaRN ramp ends (see YaRNCorrDims)
}

// YaRNCorrDims returns the first and last rotated pair index of the YaRN
// ramp for n_dims rotated dims, original context nCtxOrig and the two
// betas, computed in float32 as ggml does.
func YaRNCorrDims(nDims, nCtxOrig int, base, betaFast, betaSlow float32) [2]float32 {
	corr := func(nRot float32) float32 {
		return float32(nDims) * float32(math.Log(float64(float32(nCtxOrig)/(nRot*2*float32(math.Pi))))) /
			(2 * float32(math.Log(float64(base))))
	}
	start := float32(math.Floor(float64(corr(betaFast))))
	end := float32(math.Ceil(float64(corr(betaSlow))))
	return [2]float32{max(0, start), min(float32(nDims-1), end)}
}

// Table writes the cos/sin pairs for position pos to dst (Dims values:
// cos θ_i, sin θ_i for i = 0 … Dims/2−1).
func (r *Rope) Table(dst []float32, pos int) {
	thetaScale := float32(math.Pow(float64(r.Base), -2/float64(r.Dims)))
	theta := float32(pos)
	for i0 := 0; i0 < r.Dims; i0 += 2 {
		thetaInterp := r.FreqScale * theta
		t := thetaInterp
		mscale := r.AttnFactor
		if r.ExtFactor != 0 {
			y := (float32(i0/2) - r.CorrDims[0]) / max(0.001, r.CorrDims[1]-r.CorrDims[0])
			rampMix := (1 - min(1, max(0, y))) * r.ExtFactor
			t = thetaInterp*(1-rampMix) + theta*rampMix
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
		x[i] = x0*c - x1*s
		x[i+1] = x0*s + x1*c
	}
}
