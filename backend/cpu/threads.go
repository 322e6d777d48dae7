package cpu

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"sync"
)

// DefaultThreads is the worker count of a CPU made with workers <= 0: the
// number of physical cores (hyper-threads share the integer units that
// the dot kernels saturate), at most GOMAXPROCS, at least 1. Where the
// cores cannot be counted (no /proc/cpuinfo) it is GOMAXPROCS.
func DefaultThreads() int {
	n := runtime.GOMAXPROCS(0)
	if c := physicalCores(); c > 0 {
		n = min(n, c)
	}
	return max(n, 1)
}

// physicalCores counts the distinct (physical id, core id) pairs of
// /proc/cpuinfo once; 0 when unknown.
var physicalCores = sync.OnceValue(func() int {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return 0
	}
	type core struct{ pkg, id string }
	seen := map[core]bool{}
	var cur core
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if !ok {
			continue
		}
		switch string(bytes.TrimSpace(k)) {
		case "physical id":
			cur.pkg = string(bytes.TrimSpace(v))
		case "core id":
			cur.id = string(bytes.TrimSpace(v))
			seen[cur] = true
		}
	}
	return len(seen)
})
