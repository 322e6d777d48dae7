//go:build !linux

package mmap

// hugePagesWithin does nothing: only Linux is asked for huge pages.
func hugePagesWithin([]byte) error { return nil }
