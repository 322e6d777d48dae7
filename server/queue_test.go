package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// postCtx sends a chat request under ctx and returns the status, or the
// client's error once ctx ends.
func postCtx(ctx context.Context, url, body string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, nil
}

// gauges are what /health and /metrics say about the queue and slots.
type gauges struct {
	queued, active, canceled, completed float64
}

func gaugesOf(t *testing.T, ts *testServer) gauges {
	t.Helper()
	m := metricsOf(t, ts)
	g := gauges{m["glmrun_queue_depth"], m["glmrun_active_sequences"], m["glmrun_sequences_canceled_total"], m["glmrun_sequences_completed_total"]}
	status, body := get(t, ts.url, "/health")
	var h struct {
		QueueDepth      float64 `json:"queue_depth"`
		ActiveSequences float64 `json:"active_sequences"`
	}
	if err := json.Unmarshal(body, &h); status != 200 || err != nil {
		t.Fatalf("/health: %d %s %v", status, body, err)
	}
	if h.QueueDepth != g.queued || h.ActiveSequences != g.active {
		t.Fatalf("/health says %+v, /metrics %+v", h, g)
	}
	return g
}

// TestQueueDisconnect: requests whose clients go away while they wait for a
// slot leave the queue at once, without waiting for the busy scheduler,
// count as canceled, and free their places; once the server is idle the
// queue gauge is 0.
func TestQueueDisconnect(t *testing.T) {
	gate := &gateStepper{gate: make(chan struct{})}
	ts := newTestServer(t, func(c *Config) { c.Parallel = 1; c.QueueSize = 3; c.Stepper = gate }, nil)
	const body = `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "temperature": 0}`
	statuses := make(chan int, 2)
	send := func() {
		status, err := postCtx(context.Background(), ts.url, body)
		if err != nil {
			t.Error(err)
		}
		statuses <- status
	}
	go send() // takes the slot, then waits at the gate
	waitFor(t, "the first request in its slot", func() bool { return ts.s.metrics.active.Load() == 1 })

	// Fill the queue with clients that will give up.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if _, err := postCtx(ctx, ts.url, body); !errors.Is(err, context.Canceled) {
				t.Errorf("a request whose client gave up: %v, want context.Canceled", err)
			}
		})
	}
	waitFor(t, "three queued requests", func() bool { return ts.s.sched.queue.len() == 3 })
	if g := gaugesOf(t, ts); g != (gauges{queued: 3, active: 1}) {
		t.Fatalf("with 3 queued: %+v", g)
	}
	cancel()
	wg.Wait()
	// The scheduler is still blocked in its step: the queue emptied alone.
	waitFor(t, "the queue to empty", func() bool { return ts.s.metrics.canceled.Load() == 3 })
	if g := gaugesOf(t, ts); g != (gauges{queued: 0, active: 1, canceled: 3}) {
		t.Fatalf("after the queued clients left: %+v", g)
	}

	// Their places are free: a full queue takes three new requests.
	for range 3 {
		go send()
	}
	waitFor(t, "three new queued requests", func() bool { return ts.s.sched.queue.len() == 3 })
	close(gate.gate)
	for range 4 {
		select {
		case status := <-statuses:
			if status != http.StatusOK {
				t.Fatalf("a request that waited: status %d", status)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("timed out waiting for the queued requests")
		}
	}
	waitFor(t, "an idle server", func() bool { return ts.s.metrics.active.Load() == 0 })
	if g := gaugesOf(t, ts); g != (gauges{queued: 0, active: 0, canceled: 3, completed: 4}) {
		t.Fatalf("idle: %+v, want nothing queued or active, 3 canceled, 4 completed", g)
	}
}

// TestQueueCancelRace: a request whose context ends as it is queued counts
// as canceled exactly once, whether the queue's watch or the scheduler,
// admitting it, sees it first; its handler gets the context's error.
func TestQueueCancelRace(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.Parallel = 2; c.QueueSize = 2 }, nil)
	prompt := ts.tok.Encode("hi", true, true)
	const n = 60
	for i := range n {
		smp, e := ts.s.sampler(samplingParams{})
		if e != nil {
			t.Fatal(e)
		}
		ctx, cancel := context.WithCancel(context.Background())
		if i%2 == 0 {
			cancel() // already over when queued
		}
		r, e := ts.s.start(ctx, prompt, smp, 1, nil, false, 0, nil, extras{})
		if e != nil {
			t.Fatalf("request %d: %v", i, e)
		}
		cancel()
		wait, stop := context.WithTimeout(context.Background(), 10*time.Second)
		evs, err := next(wait, r)
		stop()
		if err != nil {
			t.Fatalf("request %d: no answer: %v", i, err)
		}
		last := evs[len(evs)-1]
		if !errors.Is(last.err, context.Canceled) && (i%2 == 0 || last.finish == "") {
			// Canceled just after queuing, a request may have finished first.
			t.Fatalf("request %d: last event %+v, want context.Canceled", i, last)
		}
		waitFor(t, "the request to settle", func() bool { return ts.s.metrics.active.Load() == 0 })
		done := ts.s.metrics.canceled.Load() + ts.s.metrics.completed.Load()
		if done != int64(i+1) {
			t.Fatalf("after %d requests %d canceled and %d completed: one was counted twice or never",
				i+1, ts.s.metrics.canceled.Load(), ts.s.metrics.completed.Load())
		}
	}
	if d := ts.s.metrics.queueDepth.Load(); d != 0 || ts.s.sched.queue.len() != 0 {
		t.Fatalf("queue gauge %d, queue %d after every request ended; want 0", d, ts.s.sched.queue.len())
	}
	if c := ts.s.metrics.canceled.Load(); c < n/2 {
		t.Fatalf("%d canceled, want at least the %d canceled before queuing", c, n/2)
	}
}
