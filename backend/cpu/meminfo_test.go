package cpu

import (
	"strings"
	"testing"
)

func TestParseMemAvailable(t *testing.T) {
	for _, tc := range []struct {
		text string
		want int64
		ok   bool
	}{
		{"MemTotal:       24576000 kB\nMemFree:  100 kB\nMemAvailable:   23000000 kB\n", 23000000 << 10, true},
		{"MemAvailable: 4096\n", 4096, true},
		{"MemTotal: 1 kB\n", 0, false},
		{"MemAvailable: lots kB\n", 0, false},
		{"MemAvailable: -5 kB\n", 0, false},
		{"", 0, false},
	} {
		got, ok := parseMemAvailable([]byte(tc.text))
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseMemAvailable(%q) = %d, %v; want %d, %v", tc.text, got, ok, tc.want, tc.ok)
		}
	}
}

// TestAllocBeyondMemory: a buffer larger than the memory the system has
// available is an error naming the sizes (not an out-of-memory kill), and
// its bytes are not left counted.
func TestAllocBeyondMemory(t *testing.T) {
	avail, ok := memAvailable()
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
