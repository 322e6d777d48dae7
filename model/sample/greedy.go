package sample

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// greedy is Sample for greedy decoding with nothing to adjust. The general
// path copies the logits and reads them three times; a server samples
// every sequence of a batch each step, each from 151k logits for GLM, so
// this one scans them twice in place, with vector code where there is
// some: the maximum (checking for NaN and +Inf as it goes), then the first
// index holding it.
func greedy(logits []float32) (int32, error) {
	if len(logits) == 0 {
		return 0, errors.New("sample: no logits")
	}
	m, bad := maxCheck(logits)
	if bad {
		i := firstInvalid(logits)
		return 0, fmt.Errorf("sample: logit of token %d is %v", i, logits[i])
	}
	if math.IsInf(float64(m), -1) {
		return 0, ErrNoCandidates
	}
	return int32(index(logits, m)), nil
}

// maxCheckGeneric is the portable maxCheck.
func maxCheckGeneric(x []float32) (float32, bool) {
	m := float32(math.Inf(-1))
	for _, v := range x {
		if !(v <= math.MaxFloat32) { // NaN or +Inf
			return m, true
		}
		if v > m {
			m = v
		}
	}
	return m, false
}

// indexGeneric is the portable index.
func indexGeneric(x []float32, v float32) int { return slices.Index(x, v) }
