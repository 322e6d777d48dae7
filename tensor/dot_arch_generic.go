//go:build (!amd64 && !arm64) || purego

package tensor

// Without assembly for this architecture the types the arm64 build
// multiplies with NEON run their twins too.

func dotArchImpls(Type) []dotImpl { return nil }

func dotQ80Q80Arch(x, y []byte, nb int) float32   { return dotQ80Q80Generic(x, y, nb) }
func dotQ4KQ8KArch(x, y []byte, nb int) float32   { return dotQ4KQ8KGeneric(x, y, nb) }
func dotQ6KQ8KArch(x, y []byte, nb int) float32   { return dotQ6KQ8KGeneric(x, y, nb) }
func dotQ5KQ8KArch(x, y []byte, nb int) float32   { return dotQ5KQ8KGeneric(x, y, nb) }
func dotIQ4XSQ8KArch(x, y []byte, nb int) float32 { return dotIQ4XSQ8KGeneric(x, y, nb) }
