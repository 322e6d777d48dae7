//go:build !linux

package mmap

// hugePages does nothing: only Linux is asked for huge pages.
func hugePages([]byte) error { return nil }
