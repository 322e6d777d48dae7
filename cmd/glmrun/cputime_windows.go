//go:build windows

package main

import (
	"time"

	"golang.org/x/sys/windows"
)

// cpuSeconds returns the user and system CPU time of the process so far.
func cpuSeconds() float64 {
	var created, exited, kernel, user windows.Filetime
	if err := windows.GetProcessTimes(windows.CurrentProcess(), &created, &exited, &kernel, &user); err != nil {
		return 0
	}
	return (filetimeDuration(kernel) + filetimeDuration(user)).Seconds()
}

// filetimeDuration reads a Filetime that holds a duration: 100-ns ticks.
func filetimeDuration(ft windows.Filetime) time.Duration {
	return time.Duration(int64(ft.HighDateTime)<<32|int64(ft.LowDateTime)) * 100
}
