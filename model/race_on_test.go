//go:build race

package model

// raceEnabled: the race detector adds allocations (sync.Pool drops items).
const raceEnabled = true
