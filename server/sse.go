package server

import (
	"net/http"
)

// sse writes Server-Sent Events as OpenAI streams them: "data: JSON\n\n"
// per chunk, flushed at once, and "data: [DONE]\n\n" at the end.
type sse struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	err error
}

func newSSE(w http.ResponseWriter) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w, rc: http.NewResponseController(w)}
}

// send writes one chunk; it reports false once a write failed (the client
// went away).
func (s *sse) send(v any) bool {
	if s.err != nil {
		return false
	}
	b, err := marshal(v)
	if err != nil {
		s.err = err
		return false
	}
	s.write(append(append([]byte("data: "), b...), '\n', '\n'))
	return s.err == nil
}

// done writes the final "data: [DONE]".
func (s *sse) done() { s.write([]byte("data: [DONE]\n\n")) }

func (s *sse) write(b []byte) {
	if s.err != nil {
		return
	}
	if _, err := s.w.Write(b); err != nil {
		s.err = err
		return
	}
	if err := s.rc.Flush(); err != nil {
		s.err = err
	}
}
