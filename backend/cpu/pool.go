package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// task is one parallel operation: run computes chunk i on worker w (0 is
// the calling goroutine), so that a task can keep per-worker scratch.
// Chunks must be independent: any worker may take any chunk.
type task interface {
	run(w, i int)
}

// pool is a persistent set of worker goroutines: the caller of do and
// n−1 helpers. do publishes an operation by bumping a generation counter
// and hands out chunks through an atomic counter, so fast workers take
// more; no goroutine is started and nothing is allocated per operation.
// One operation runs at a time (do serializes callers); a task must not
// call do itself.
//
// Decode runs about a hundred short operations per token, most of them a
// fraction of a millisecond, so waking a parked goroutine for each (a
// futex and, in a virtual machine, an inter-processor interrupt: tens of
// microseconds) would leave the helpers idle for much of every product.
// Helpers therefore spin for a while (spinRounds) on the generation
// counter after an operation before they park on their channel, and the
// caller spins until the helpers are done.
type pool struct {
	n     int
	mu    sync.Mutex
	t     task
	total int
	next  atomic.Int64
	gen   atomic.Uint64 // number of operations published
	busy  atomic.Int64  // helpers not yet done with the current operation
	hs    []helperState
	quit  chan struct{}
}

// helperState is how do wakes a parked helper: the helper sets asleep
// before it blocks on wake, and do sends on wake to the helpers whose
// asleep it clears.
type helperState struct {
	asleep atomic.Bool
	wake   chan struct{}
	_      [48]byte // keep helpers' flags on separate cache lines
}

// spinRounds is how many times a helper checks for the next operation
// (with a pause or, every yieldEvery rounds, a yield to other goroutines)
// before it parks: about a hundred microseconds, longer than the gaps
// between the operations of one decode step.
const (
	spinRounds = 2000
	yieldEvery = 16
)

// newPool starts n−1 helper goroutines (none for n ≤ 1).
func newPool(n int) *pool {
	p := &pool{n: max(n, 1), quit: make(chan struct{})}
	p.hs = make([]helperState, p.n-1)
	for i := range p.hs {
		p.hs[i].wake = make(chan struct{}, 1)
		go p.helper(i + 1)
	}
	return p
}

func (p *pool) helper(w int) {
	h := &p.hs[w-1]
	var seen uint64
	for {
		if !p.await(h, seen) {
			return
		}
		seen++
		p.work(w)
		p.busy.Add(-1)
	}
}

// await waits until operation seen+1 is published (true) or the pool is
// stopped (false): spinning first, then parked on h.wake.
//
// A wake-up can arrive late: do publishes, then wakes the parked helpers,
// and if its goroutine is descheduled in between, a helper may see the
// operation by spinning, finish it and park again before do's wake-up
// reaches it. That wake-up is not a new operation, so after any wake-up
// the helper checks the generation and otherwise waits again (returning
// true for it made the helper count operations that never came and drive
// busy negative, and the next do then waited forever).
func (p *pool) await(h *helperState, seen uint64) bool {
	for {
		for i := 0; i < spinRounds; i++ {
			if p.gen.Load() != seen {
				return true
			}
			if i%yieldEvery == yieldEvery-1 {
				runtime.Gosched()
			} else {
				spinPause()
			}
		}
		h.asleep.Store(true)
		if p.gen.Load() != seen {
			// Published meanwhile: take the flag back, or, if a do already
			// took it, drain the wake-up it sends.
			if !h.asleep.CompareAndSwap(true, false) {
				<-h.wake
			}
			return true
		}
		select {
		case <-h.wake:
		case <-p.quit:
			// A do that raced with stop may have claimed the flag: then
			// its wake-up is on the way.
			if h.asleep.CompareAndSwap(true, false) {
				return false
			}
			<-h.wake
		}
		if p.gen.Load() != seen {
			return true
		}
	}
}

// work runs chunks until none is left.
func (p *pool) work(w int) {
	for {
		i := int(p.next.Add(1) - 1)
		if i >= p.total {
			return
		}
		p.t.run(w, i)
	}
}

// do runs chunks [0, chunks) of t on the workers and returns when all are
// done. With one worker or one chunk it runs on the caller alone.
func (p *pool) do(t task, chunks int) {
	if chunks <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == 1 || chunks == 1 || p.stopped() {
		for i := range chunks {
			t.run(0, i)
		}
		return
	}
	p.t, p.total = t, chunks
	p.next.Store(0)
	p.busy.Store(int64(p.n - 1))
	p.gen.Add(1)
	for i := range p.hs {
		if h := &p.hs[i]; h.asleep.Load() && h.asleep.CompareAndSwap(true, false) {
			h.wake <- struct{}{}
		}
	}
	p.work(0)
	for i := 0; p.busy.Load() != 0; i++ {
		if i%yieldEvery == yieldEvery-1 {
			runtime.Gosched()
		} else {
			spinPause()
		}
	}
	p.t = nil
}

// stopped reports whether stop was called (do then runs on the caller).
func (p *pool) stopped() bool {
	select {
	case <-p.quit:
		return true
	default:
		return false
	}
}

// stop ends the helpers; do runs every chunk on its caller after. It takes
// do's lock, so that it never lands between do's check of stopped and the
// helpers' work on what do publishes: a helper that left on quit before
// an operation was published would never report it done, and do would
// wait for it forever. (stop runs as a cleanup when the pool's owner
// becomes unreachable, which can happen while do runs on the pool.)
func (p *pool) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.quit:
	default:
		close(p.quit)
	}
}

// stopWith ends the helpers of p once owner is unreachable, so that a CPU
// that is simply dropped does not leak goroutines.
func stopWith[T any](owner *T, p *pool) {
	runtime.AddCleanup(owner, func(p *pool) { p.stop() }, p)
}
