package meminfo

import "testing"

func TestParse(t *testing.T) {
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
		got, ok := parse([]byte(tc.text))
		if got != tc.want || ok != tc.ok {
			t.Errorf("parse(%q) = %d, %v; want %d, %v", tc.text, got, ok, tc.want, tc.ok)
		}
	}
}
