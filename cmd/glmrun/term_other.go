//go:build !linux && !darwin && !dragonfly && !freebsd && !netbsd && !openbsd && !windows

package main

// isTerminalFd is false where glmrun has no way to ask: plain progress
// lines are the safe choice for a file or a pipe.
func isTerminalFd(fd uintptr) bool { return false }
