package main

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
)

// Flag checks shared by the commands that load a model. Every command
// checks all its flag values before it opens a file, so that a typo costs
// an immediate usage error (exit 2) rather than a load of minutes followed
// by a failure, or a run that silently ignores the value.

// maxThreads bounds -t: far more than any machine glmrun runs on has, and
// low enough that a typo (-t 100000000) cannot ask for a goroutine pool
// that exhausts memory.
const maxThreads = 4096

// numCPU is the CPU count -t is compared with (a variable for tests).
var numCPU = runtime.NumCPU

// knownBackends are the backends this binary registers (logits.go imports
// them), so that --backend can be checked before anything is loaded.
var knownBackends = []string{"cpu", "cuda"}

// usageErr returns a usage error (exit 2) with the formatted message.
func usageErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, a...))
}

// checkThreads checks a worker-thread count per device (0: the default,
// the physical cores). It returns a warning, not an error, when the
// threads of all tp devices together exceed the machine's CPUs: that is
// legal and sometimes measured on purpose, but usually a mistake that
// makes every step slower, as llama.cpp's threads contend the same way.
func checkThreads(name string, threads, tp int) (warning string, err error) {
	switch {
	case threads < 0:
		return "", usageErr("%s %d: want >= 1, or 0 for the physical cores", name, threads)
	case threads > maxThreads:
		return "", usageErr("%s %d: want at most %d", name, threads, maxThreads)
	}
	// tp is at most a few devices once checked; compare without
	// multiplying in case it is not checked yet.
	if cpus := numCPU(); threads > 0 && (threads > cpus || tp > cpus/threads) {
		total := fmt.Sprint(threads)
		if tp > 1 {
			total = fmt.Sprintf("%d × %d devices", threads, tp)
		}
		return fmt.Sprintf("%s %d: %s worker threads for the %d CPUs of this machine; they will contend for them (0: the physical cores)", name, threads, total, cpus), nil
	}
	return "", nil
}

// checkDevices checks the thread count (flag name threadsFlag) and the
// --backend name of a command that runs the model on tp devices,
// appending checkThreads' warning, if any, to warnings.
func checkDevices(threadsFlag string, threads, tp int, backend string, warnings *[]string) error {
	warn, err := checkThreads(threadsFlag, threads, tp)
	if err != nil {
		return err
	}
	if warn != "" {
		*warnings = append(*warnings, warn)
	}
	return checkBackend(backend)
}

// checkBackend checks a --backend name.
func checkBackend(name string) error {
	if !slices.Contains(knownBackends, name) {
		return usageErr("--backend %q: want %s", name, strings.Join(knownBackends, " or "))
	}
	return nil
}

// finite32 reports whether v stays a finite number as the float32 the
// sampler gets: NaN, ±Inf and values beyond float32's range do not.
func finite32(v float64) bool {
	f := float64(float32(v))
	return !math.IsNaN(f) && !math.IsInf(f, 0)
}
