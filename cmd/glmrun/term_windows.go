package main

import "golang.org/x/sys/windows"

// isTerminalFd reports whether fd is a console.
func isTerminalFd(fd uintptr) bool {
	var mode uint32
	return windows.GetConsoleMode(windows.Handle(fd), &mode) == nil
}
