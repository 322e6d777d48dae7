//go:build race

package glmrun

// raceEnabled reports a build with the race detector, which adds
// allocations (sync.Pool drops items) and slows memory-bound tests.
const raceEnabled = true
