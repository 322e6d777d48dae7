package cpu

import (
	"strings"
	"testing"

	"github.com/glmrun/glmrun/internal/meminfo"
)

// TestAllocBeyondMemory: a buffer larger than the memory the system has
// available is an error naming the sizes (not an out-of-memory kill), and
// its bytes are not left counted.
func TestAllocBeyondMemory(t *testing.T) {
	avail, ok := meminfo.Available()
	if !ok {
		t.Skip("no /proc/meminfo")
	}
	d := NewDevice(0, 1, 0)
	defer d.Close()
	_, err := d.Alloc(int(avail/4) + 1<<30)
	if err == nil || !strings.Contains(err.Error(), "memory available") {
		t.Fatalf("Alloc beyond the available memory: err %v", err)
	}
	if d.Used() != 0 {
		t.Errorf("after the failed Alloc %d bytes are counted", d.Used())
	}
}
