package glmrun

import (
	"testing"

	"github.com/glmrun/glmrun/internal/testmodels"
)

// TestContextSizes: a session's context comes from SessionOptions, else
// from the Model's Options, else the training context capped at
// DefaultContextSize; the whole cache is allocated by NewSession and
// given back by Close.
func TestContextSizes(t *testing.T) {
	m := testModel(t, mini) // Options.ContextSize 64
	for _, tc := range []struct {
		name string
		opts SessionOptions
		want int
	}{
		{"model option", SessionOptions{}, 64},
		{"session option", SessionOptions{ContextSize: 8}, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := m.NewSession(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if s.ContextSize() != tc.want {
				t.Errorf("ContextSize %d, want %d", s.ContextSize(), tc.want)
			}
		})
	}
	t.Run("default", func(t *testing.T) {
		d, err := Load(testmodels.Path(t, mini), Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		dev := d.m.Devices()[0]
		before := dev.Used()
		s, err := d.NewSession(SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if want := min(d.Config().ContextLength, DefaultContextSize); s.ContextSize() != want {
			t.Errorf("ContextSize %d, want %d", s.ContextSize(), want)
		}
		if got := dev.Used() - before; got != s.s.CacheBytes() || got == 0 {
			t.Errorf("NewSession allocated %d bytes, its cache holds %d", got, s.s.CacheBytes())
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if dev.Used() != before {
			t.Errorf("%d bytes in use after Close, want %d", dev.Used(), before)
		}
	})
}
