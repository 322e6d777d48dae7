package cpu

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
)

// bigAlloc is the buffer size from which Alloc, on a device without a
// budget, checks the memory the system has available: a context size or
// batch far beyond the machine then fails with an error naming the sizes
// instead of the process being killed when the buffer is first written.
const bigAlloc = 64 << 20

// memAvailable returns the bytes of memory the system can give without
// swapping (Linux's MemAvailable), and false where that is not known.
func memAvailable() (int64, bool) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	return parseMemAvailable(b)
}

// parseMemAvailable reads the MemAvailable line of a /proc/meminfo text.
func parseMemAvailable(b []byte) (int64, bool) {
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
