package cuda

import (
	"errors"
	"fmt"
)

var (
	// ErrNoDriver reports that libcuda.so.1 could not be loaded or lacks
	// the driver API glmrun needs.
	ErrNoDriver = errors.New("cuda: no CUDA driver")
	// ErrNoDevice reports a driver without a usable device.
	ErrNoDevice = errors.New("cuda: no CUDA device")
)

// Error is a failed driver call: the call's name and the CUDA result code
// with its name and description from the driver.
type Error struct {
	Call string // e.g. "cuMemAlloc_v2"
	Code int    // CUresult
	Name string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Text string // e.g. "out of memory"
	// Log is the JIT error log of a failed module load (may be empty).
	Log string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("cuda: %s: %s (%d): %s", e.Call, e.Name, e.Code, e.Text)
	if e.Log != "" {
		s += "\n" + e.Log
	}
	return s
}

// CUDA result codes glmrun branches on.
const (
	errNotInitialized = 3
	errNoDevice       = 100
	errInvalidDevice  = 101
)
