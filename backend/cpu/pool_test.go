package cpu

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// chunkCounter counts how often each chunk runs, sleeping on some so that
// workers interleave.
type chunkCounter struct{ runs []atomic.Int32 }

func (c *chunkCounter) run(_, i int) {
	c.runs[i].Add(1)
	if i%7 == 0 {
		time.Sleep(time.Microsecond)
	}
}

// TestPoolManyOperations runs thousands of short operations on two pools,
// with pauses that let the helpers park and a goroutine forcing GCs
// (which deschedules do between publishing and waking): every chunk runs
// exactly once, and no operation hangs. A late wake-up used to be taken
// for a new operation, which drove the busy count negative and hung the
// next do (seen within a few hundred operations under -race).
func TestPoolManyOperations(t *testing.T) {
	ops := 2000
	if testing.Short() {
		ops = 300
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
				time.Sleep(time.Millisecond)
			}
		}
	}()
	for round := range 4 {
		pools := []*pool{newPool(2), newPool(3)}
		done := make(chan string, 1)
		go func() {
			for op := range ops {
				for _, p := range pools {
					c := &chunkCounter{runs: make([]atomic.Int32, 1+op%9)}
					p.do(c, len(c.runs))
					for i := range c.runs {
						if n := c.runs[i].Load(); n != 1 {
							done <- "a chunk ran " + string(rune('0'+n)) + " times"
							return
						}
					}
				}
				if op%200 == 199 {
					time.Sleep(300 * time.Microsecond) // long enough for the helpers to park
				}
			}
			done <- ""
		}()
		select {
		case msg := <-done:
			if msg != "" {
				t.Fatalf("round %d: %s", round, msg)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("round %d: an operation hangs; busy counts %d, %d", round, pools[0].busy.Load(), pools[1].busy.Load())
		}
		for _, p := range pools {
			if b := p.busy.Load(); b != 0 {
				t.Errorf("round %d: busy %d after the last operation", round, b)
			}
			p.stop()
		}
	}
}

// TestPoolLateWake replays a late wake-up deterministically: after an
// operation, with the helper parked, it does what a do descheduled
// between publishing and waking does (clear the flag, send the wake-up)
// without publishing anything. The helper must wait again, not count a
// phantom operation: the busy count stays 0 and the next operations run
// every chunk once.
func TestPoolLateWake(t *testing.T) {
	p := newPool(2)
	defer p.stop()
	c := &chunkCounter{runs: make([]atomic.Int32, 4)}
	p.do(c, len(c.runs))
	h := &p.hs[0]
	deadline := time.Now().Add(10 * time.Second)
	for !h.asleep.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the helper never parked")
		}
		time.Sleep(100 * time.Microsecond)
	}
	if h.asleep.CompareAndSwap(true, false) {
		h.wake <- struct{}{}
	}
	time.Sleep(5 * time.Millisecond) // the helper runs on the wake-up
	if b := p.busy.Load(); b != 0 {
		t.Fatalf("busy %d after a wake-up without an operation; want 0", b)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 3 {
			c := &chunkCounter{runs: make([]atomic.Int32, 4)}
			p.do(c, len(c.runs))
			for i := range c.runs {
				if n := c.runs[i].Load(); n != 1 {
					t.Errorf("chunk %d ran %d times", i, n)
				}
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("do hangs after a late wake-up (busy %d)", p.busy.Load())
	}
}

// TestPoolStopDuringOperations: stop waits for an operation in progress.
// A do that found the pool running publishes its operation to helpers
// that must still be there: a helper that saw quit in between (parked, so
// no wake-up claimed it) would leave without doing it, and do would wait
// for it forever; stop runs as the cleanup of the pool's owner, which can
// become unreachable while do runs. Here the test holds do's lock, as a
// do does from its check of stopped to its end, with the helper parked:
// quit must stay open until the lock is released, and the next do then
// runs every chunk once on the caller.
func TestPoolStopDuringOperations(t *testing.T) {
	p := newPool(2)
	p.do(&chunkCounter{runs: make([]atomic.Int32, 4)}, 4)
	for deadline := time.Now().Add(10 * time.Second); !p.hs[0].asleep.Load(); {
		if time.Now().After(deadline) {
			t.Fatal("the helper never parked")
		}
		time.Sleep(100 * time.Microsecond)
	}
	p.mu.Lock()
	stopped := make(chan struct{})
	go func() {
		p.stop()
		close(stopped)
	}()
	time.Sleep(20 * time.Millisecond)
	if p.stopped() {
		t.Error("stop closed quit while an operation held the pool")
	}
	p.mu.Unlock()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("stop did not return after the operation")
	}
	c := &chunkCounter{runs: make([]atomic.Int32, 8)}
	p.do(c, len(c.runs))
	for i := range c.runs {
		if n := c.runs[i].Load(); n != 1 {
			t.Errorf("after stop: chunk %d ran %d times", i, n)
		}
	}
}
