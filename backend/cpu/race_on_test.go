//go:build race

package cpu

// raceEnabled: the race detector adds allocations (sync.Pool drops items).
const raceEnabled = true
