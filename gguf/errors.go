package gguf

import (
	"errors"
	"fmt"
	"strings"
)

// FormatError reports invalid GGUF: what is wrong, in which file, at which
// byte offset, and the metadata key or tensor concerned (when there is one).
type FormatError struct {
	Path   string // the file
	Off    int64  // byte offset in the file where the problem was found
	Key    string // metadata key, or ""
	Tensor string // tensor name, or ""
	Msg    string
}

func (e *FormatError) Error() string {
	var sb strings.Builder
	sb.WriteString("gguf: ")
	if e.Path != "" {
		sb.WriteString(e.Path)
		sb.WriteString(": ")
	}
	fmt.Fprintf(&sb, "offset %#x: ", e.Off)
	if e.Key != "" {
		fmt.Fprintf(&sb, "key %q: ", e.Key)
	}
	if e.Tensor != "" {
		fmt.Fprintf(&sb, "tensor %q: ", e.Tensor)
	}
	sb.WriteString(e.Msg)
	return sb.String()
}

// ErrMissingKey is wrapped by the typed getters when a key is absent.
var ErrMissingKey = errors.New("missing")
