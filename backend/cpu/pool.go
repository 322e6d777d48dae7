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
// n−1 helpers that wait on their own channel between operations. do hands
// out chunks through an atomic counter, so fast workers take more; no
// goroutine is started and nothing is allocated per operation. One
// operation runs at a time (do serializes callers); a task must not call
// do itself.
type pool struct {
	n     int
	mu    sync.Mutex
	wake  []chan struct{}
	wg    sync.WaitGroup
	t     task
	total int
	next  atomic.Int64
	quit  chan struct{}
}

// newPool starts n−1 helper goroutines (none for n ≤ 1).
func newPool(n int) *pool {
	p := &pool{n: max(n, 1), quit: make(chan struct{})}
	for w := 1; w < p.n; w++ {
		c := make(chan struct{}, 1)
		p.wake = append(p.wake, c)
		go p.helper(w, c)
	}
	return p
}

func (p *pool) helper(w int, wake chan struct{}) {
	for {
		select {
		case <-wake:
			p.work(w)
			p.wg.Done()
		case <-p.quit:
			return
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
	helpers := min(p.n-1, chunks-1)
	p.wg.Add(helpers)
	for _, c := range p.wake[:helpers] {
		c <- struct{}{}
	}
	p.work(0)
	p.wg.Wait()
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

// stop ends the helpers; do runs every chunk on its caller after.
func (p *pool) stop() {
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
