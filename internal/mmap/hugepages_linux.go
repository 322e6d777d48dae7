package mmap

import "golang.org/x/sys/unix"

// hugePages asks for transparent huge pages on the page-aligned b.
func hugePages(b []byte) error { return unix.Madvise(b, unix.MADV_HUGEPAGE) }
