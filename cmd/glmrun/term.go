package main

import "os"

// isTerminal reports whether w is a terminal: the progress lines that
// redraw themselves with "\r" and chat's "> " prompt are for a person
// watching, and would litter a log file or a pipe. A character device is
// not enough (/dev/null is one); the terminal driver must answer.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	// Through SyscallConn rather than Fd, which would switch the file to
	// blocking mode.
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	tty := false
	if err := rc.Control(func(fd uintptr) { tty = isTerminalFd(fd) }); err != nil {
		return false
	}
	return tty
}
