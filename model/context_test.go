package model

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/glmrun/glmrun/tensor"
)

// used returns the bytes in use on all of m's devices.
func used(m *Model) int64 {
	n := int64(0)
	for _, d := range m.Devices() {
		n += d.Used()
	}
	return n
}

// cacheBytesPerToken is what one position of m's latent cache takes on
// one device: latent and rope key, and indexer key where a layer has one.
func cacheBytesPerToken(m *Model) int64 {
	c := m.Config()
	n := int64(0)
	for l := range c.Layers {
		n += int64(4 * (c.KVLoraRank + c.DRope))
		if m.Weights().Layers[l].Attn.Indexer != nil {
			n += int64(4 * c.IndexerDim)
		}
	}
	return n
}

// TestSessionContext: a session allocates its whole KV cache (on every
// device) when it starts, the default context is the training context
// capped at DefaultContextSize, decoding to the end of the context takes
// no more device memory, the token after it fails with ErrContextFull,
// and Close gives the cache back.
func TestSessionContext(t *testing.T) {
	const size = 40
	for _, tp := range []int{1, 2} {
		t.Run(fmt.Sprintf("tp=%d", tp), func(t *testing.T) {
			m, err := Load(modelPath(t, "glm5-mini.Q8_0"), Options{TensorParallel: tp, Fast: true})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			perToken := cacheBytesPerToken(m) * int64(tp)

			base := used(m)
			s, err := m.NewSession(SessionOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := min(m.Config().ContextLength, DefaultContextSize)
			if s.ContextSize() != want || s.CacheBytes() != int64(want)*perToken || used(m)-base != s.CacheBytes() {
				t.Errorf("default session: %d positions, %d cache bytes, %d bytes allocated; want %d positions of %d bytes",
					s.ContextSize(), s.CacheBytes(), used(m)-base, want, perToken)
			}
			s.Close()
			if used(m) != base {
				t.Errorf("%d bytes in use after Close, want %d", used(m), base)
			}

			s, err = m.NewSession(SessionOptions{ContextSize: size})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := used(m) - base; got != size*perToken {
				t.Errorf("a %d-position session allocated %d bytes, want %d", size, got, size*perToken)
			}
			logits := make([]float32, m.Config().VocabSize)
			if _, err := s.Prefill([]int32{1, 2, 3, 4}); err != nil {
				t.Fatal(err)
			}
			if err := s.DecodeInto(logits, 5); err != nil {
				t.Fatal(err)
			}
			after := used(m) // the cache and the step's scratch buffers
			for s.Pos() < size {
				if err := s.DecodeInto(logits, 6); err != nil {
					t.Fatal(err)
				}
			}
			if used(m) != after {
				t.Errorf("decoding to position %d took %d more bytes", size, used(m)-after)
			}
			err = s.DecodeInto(logits, 7)
			if !errors.Is(err, ErrContextFull) || !strings.Contains(err.Error(), "context is full") ||
				!strings.Contains(err.Error(), fmt.Sprint(size)) {
				t.Errorf("token %d of %d: error %v, want ErrContextFull naming the size", size+1, size, err)
			}
			if s.Pos() != size || used(m) != after {
				t.Errorf("after the refused token: position %d, %d bytes in use; want %d, %d", s.Pos(), used(m), size, after)
			}
		})
	}
}

// TestSessionCacheBudget: a context that does not fit the device's memory
// budget fails NewSession with an error naming the size and the device,
// leaving nothing allocated.
func TestSessionCacheBudget(t *testing.T) {
	path := modelPath(t, "glm5-mini.Q8_0")
	m, err := Load(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	weights := used(m)
	perToken := cacheBytesPerToken(m)
	m.Close()

	// Room for the weights and a 64-position cache, not for 65.
	m, err = Load(path, Options{DeviceMemory: weights + 64*perToken})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	_, err = m.NewSession(SessionOptions{ContextSize: 65})
	if err == nil || !strings.Contains(err.Error(), "65 positions") || !strings.Contains(err.Error(), "cpu:0") {
		t.Errorf("error %v, want one naming 65 positions and cpu:0", err)
	}
	if used(m) != weights {
		t.Errorf("%d bytes in use after the refused session, want the weights' %d", used(m), weights)
	}
	s, err := m.NewSession(SessionOptions{ContextSize: 64})
	if err != nil {
		t.Fatalf("a 64-position cache within the budget: %v", err)
	}
	s.Close()
}

// TestMaxContext: a context past the training context is refused unless
// RoPE scaling extends the positions the model is made for.
func TestMaxContext(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		want int
	}{
		{"no scaling", Config{ContextLength: 4096, RopeScaling: "none", RopeFactor: 1, RopeOrigCtx: 4096}, 4096},
		{"yarn, context_length already scaled", Config{ContextLength: 163840, RopeScaling: "yarn", RopeFactor: 40, RopeOrigCtx: 4096}, 163840},
		{"yarn extends context_length", Config{ContextLength: 4096, RopeScaling: "yarn", RopeFactor: 4, RopeOrigCtx: 4096}, 16384},
		{"linear", Config{ContextLength: 2048, RopeScaling: "linear", RopeFactor: 2, RopeOrigCtx: 2048}, 4096},
		{"factor below one", Config{ContextLength: 2048, RopeScaling: "linear", RopeFactor: 0.5, RopeOrigCtx: 2048}, 2048},
	} {
		if got := c.cfg.MaxContext(); got != c.want {
			t.Errorf("%s: MaxContext = %d, want %d", c.name, got, c.want)
		}
	}

	m, err := Load(modelPath(t, "glm5-mini.Q8_0"), Options{Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	train := m.Config().ContextLength
	_, err = m.NewSession(SessionOptions{ContextSize: train + 1})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprint(train+1)) || !strings.Contains(err.Error(), fmt.Sprintf("training context %d", train)) {
		t.Errorf("context %d of a model trained on %d: error %v, want one naming both", train+1, train, err)
	}
	s, err := m.NewSession(SessionOptions{ContextSize: train})
	if err != nil {
		t.Fatalf("the training context itself: %v", err)
	}
	s.Close()
}

// TestFitContext: a session asking for the default context gets the
// training context when its cache fits, and otherwise, with a note naming
// both sizes, the largest multiple of 256 positions whose cache fits in
// three quarters of the memory left (a device budget here), which then
// allocates.
func TestFitContext(t *testing.T) {
	probe, err := Load(modelPath(t, "glm5-mini.Q8_0"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	weights := used(probe)
	per := probe.CacheBytesPerToken(tensor.F16, false)
	train := probe.Config().ContextLength
	probe.Close()
	for _, tc := range []struct {
		name   string
		budget int64 // bytes beyond the weights
		want   int
	}{
		{"roomy", 2 * per * int64(train), train},
		{"tight", 1000 * per, 512}, // 750 positions fit: 512
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Load(modelPath(t, "glm5-mini.Q8_0"), Options{DeviceMemory: weights + tc.budget})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			n, note := m.FitContext(tensor.F16, false, 1)
			if n != tc.want || (n < train) != (note != "") {
				t.Fatalf("FitContext = %d, %q; want %d (training context %d)", n, note, tc.want, train)
			}
			if note != "" && !strings.Contains(note, fmt.Sprint(train)) {
				t.Errorf("note %q does not name the training context", note)
			}
			s, err := m.NewSession(SessionOptions{CacheType: tensor.F16})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if s.ContextSize() != n {
				t.Errorf("default session: %d positions, want %d", s.ContextSize(), n)
			}
			if two, _ := m.FitContext(tensor.F16, false, 2); tc.want < train && two >= n {
				t.Errorf("two sessions fit %d positions each, one %d", two, n)
			}
		})
	}
}
