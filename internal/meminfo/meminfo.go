// Package meminfo reads how much memory the system can still give.
package meminfo

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
)

// Available returns the bytes of memory the system can give without
// swapping (Linux's MemAvailable), and false where that is not known.
func Available() (int64, bool) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	return parse(b)
}

// parse reads the MemAvailable line of a /proc/meminfo text.
func parse(b []byte) (int64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 2 || string(f[0]) != "MemAvailable:" {
			continue
		}
		n, err := strconv.ParseInt(string(f[1]), 10, 64)
		if err != nil || n < 0 {
			return 0, false
		}
		if len(f) >= 3 && string(f[2]) == "kB" {
			n *= 1024
		}
		return n, true
	}
	return 0, false
}
