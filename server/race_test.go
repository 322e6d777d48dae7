//go:build race

package server

// raceEnabled: the race detector slows the model's loops about tenfold, so
// the heaviest tests run smaller.
const raceEnabled = true
