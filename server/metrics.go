package server

import (
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// rateWindow is how many recent decode steps the tokens/s gauge averages.
const rateWindow = 64

// metrics are the server's counters, written as Prometheus text by
// GET /metrics.
type metrics struct {
	promptTokens atomic.Int64 // prompt tokens prefilled
	genTokens    atomic.Int64 // tokens generated
	prefillNanos atomic.Int64
	decodeNanos  atomic.Int64
	steps        atomic.Int64
	completed    atomic.Int64 // sequences that ended normally
	canceled     atomic.Int64 // requests dropped because the client left (queued or running)
	rejected     atomic.Int64 // requests refused with 503 (queue full)
	// prefixQueries are the prompt tokens of admitted requests, prefixHits
	// those of them found in a slot's KV cache.
	prefixQueries, prefixHits atomic.Int64
	// prefixBytes are the bytes the prefix cache holds, prefixEvictions
	// the blocks it dropped for room, prefixErrors the copies that failed.
	prefixBytes                   atomic.Int64
	prefixEvictions, prefixErrors atomic.Int64
	queueDepth                    atomic.Int64 // requests waiting for a slot (waitQueue keeps it)
	// drafted are the tokens the MTP block proposed, draftsKept those of
	// them the trunk's check kept (speculative decoding).
	drafted, draftsKept atomic.Int64
	active              atomic.Int64

	mu       sync.Mutex
	requests map[requestKey]int64
	recent   [rateWindow]stepSample // ring of the last steps
	nRecent  int
}

type requestKey struct {
	path string
	code int
}

type stepSample struct {
	tokens int
	dur    time.Duration
}

func newMetrics() *metrics { return &metrics{requests: make(map[requestKey]int64)} }

// request counts one answered HTTP request.
func (m *metrics) request(path string, code int) {
	m.mu.Lock()
	m.requests[requestKey{path, code}]++
	m.mu.Unlock()
}

// step records a decode step of n sequences that took d.
func (m *metrics) step(n int, d time.Duration) {
	m.steps.Add(1)
	m.decodeNanos.Add(int64(d))
	m.mu.Lock()
	m.recent[m.nRecent%rateWindow] = stepSample{n, d}
	m.nRecent++
	m.mu.Unlock()
}

// decodeRate returns the aggregate decode tokens/s of the recent steps.
func (m *metrics) decodeRate() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var tokens int
	var d time.Duration
	for i := range min(m.nRecent, rateWindow) {
		tokens += m.recent[i].tokens
		d += m.recent[i].dur
	}
	if d <= 0 {
		return 0
	}
	return float64(tokens) / d.Seconds()
}

// write writes every metric in the Prometheus text exposition format.
func (m *metrics) write(w io.Writer, parallel, queueCap int) error {
	m.mu.Lock()
	keys := make([]requestKey, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].path != keys[j].path {
			return keys[i].path < keys[j].path
		}
		return keys[i].code < keys[j].code
	})
	counts := make([]int64, len(keys))
	for i, k := range keys {
		counts[i] = m.requests[k]
	}
	m.mu.Unlock()

	var b []byte
	metric := func(name, typ, help string) {
		b = fmt.Appendf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	metric("glmrun_requests_total", "counter", "HTTP requests answered, by path and status code.")
	for i, k := range keys {
		b = fmt.Appendf(b, "glmrun_requests_total{path=%q,code=\"%d\"} %d\n", k.path, k.code, counts[i])
	}
	one := func(name, typ, help string, v any) {
		metric(name, typ, help)
		b = fmt.Appendf(b, "%s %v\n", name, v)
	}
	one("glmrun_prompt_tokens_total", "counter", "Prompt tokens run through the model.", m.promptTokens.Load())
	one("glmrun_generation_tokens_total", "counter", "Tokens generated.", m.genTokens.Load())
	one("glmrun_prefill_seconds_total", "counter", "Time spent prefilling prompts.", seconds(m.prefillNanos.Load()))
	one("glmrun_decode_seconds_total", "counter", "Time spent in decode steps.", seconds(m.decodeNanos.Load()))
	one("glmrun_decode_steps_total", "counter", "Decode steps (one token for every active sequence).", m.steps.Load())
	one("glmrun_decode_tokens_per_second", "gauge", "Aggregate decode tokens/s over the recent steps.", m.decodeRate())
	one("glmrun_sequences_completed_total", "counter", "Sequences that ended with a finish reason.", m.completed.Load())
	one("glmrun_sequences_canceled_total", "counter", "Requests dropped because their client went away, waiting for a slot or running.", m.canceled.Load())
	one("glmrun_requests_rejected_total", "counter", "Requests refused because the queue was full.", m.rejected.Load())
	one("glmrun_prefix_cache_queries_total", "counter", "Prompt tokens looked up in the slots' KV caches.", m.prefixQueries.Load())
	one("glmrun_prefix_cache_hits_total", "counter", "Prompt tokens found in a slot's KV cache or the prefix cache and not run again.", m.prefixHits.Load())
	one("glmrun_prefix_cache_bytes", "gauge", "Host bytes the prefix cache holds.", m.prefixBytes.Load())
	one("glmrun_prefix_cache_evictions_total", "counter", "Prefix-cache blocks dropped to stay within the budget.", m.prefixEvictions.Load())
	one("glmrun_prefix_cache_errors_total", "counter", "Prefix-cache copies that failed.", m.prefixErrors.Load())
	one("glmrun_spec_draft_tokens_total", "counter", "Tokens drafted by the MTP block (speculative decoding).", m.drafted.Load())
	one("glmrun_spec_draft_tokens_accepted_total", "counter", "Drafted tokens the model's check kept.", m.draftsKept.Load())
	one("glmrun_queue_depth", "gauge", "Requests waiting for a slot.", m.queueDepth.Load())
	one("glmrun_queue_capacity", "gauge", "Most requests that may wait for a slot.", queueCap)
	one("glmrun_active_sequences", "gauge", "Sequences holding a slot (prefilling or decoding).", m.active.Load())
	one("glmrun_slots", "gauge", "Sequences that may decode together (--parallel).", parallel)
	_, err := w.Write(b)
	return err
}

func seconds(nanos int64) float64 { return float64(nanos) / 1e9 }
