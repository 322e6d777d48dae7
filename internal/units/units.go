// Package units formats quantities for messages.
package units

import "fmt"

// Bytes formats a byte count with binary prefixes and two decimals
// ("512 B", "1.50 KiB", "2.75 GiB").
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	x := float64(n)
	prefixes := []string{"KiB", "MiB", "GiB", "TiB"}
	i := -1
	for x >= unit && i < len(prefixes)-1 {
		x /= unit
		i++
	}
	return fmt.Sprintf("%.2f %s", x, prefixes[i])
}
