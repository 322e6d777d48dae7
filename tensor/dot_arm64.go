//go:build !purego

package tensor

import "golang.org/x/sys/cpu"

// The NEON kernels (dot_arm64.s) of the types of the Q4_K_M, Q8_0 and
// UD-Q4_K_XL mixes (Q4_K, Q5_K, Q6_K, Q8_0, IQ4_XS);
// the other types run their pure-Go twins. Each kernel comes with SDOT
// (cpu.ARM64.HasASIMDDP: Armv8.2 cores and later, Apple M1 and later) and
// without (plain widening multiplies); both give the twin's bits.

// dotArmDP reports whether this CPU has the SDOT instruction.
var dotArmDP = cpu.ARM64.HasASIMDDP

//go:noescape
func dotQ80Q80DP(x, y *byte, nb int) float32

//go:noescape
func dotQ80Q80NEON(x, y *byte, nb int) float32

//go:noescape
func dotQ4KQ8KDP(x, y *byte, nb int) float32

//go:noescape
func dotQ4KQ8KNEON(x, y *byte, nb int) float32

//go:noescape
func dotQ5KQ8KDP(x, y *byte, nb int) float32

//go:noescape
func dotQ5KQ8KNEON(x, y *byte, nb int) float32

//go:noescape
func dotIQ4XSQ8KDP(x, y *byte, nb int) float32

//go:noescape
func dotIQ4XSQ8KNEON(x, y *byte, nb int) float32

//go:noescape
func dotQ6KQ8KDP(x, y *byte, nb int) float32

//go:noescape
func dotQ6KQ8KNEON(x, y *byte, nb int) float32

// dotArmKernels lists the NEON kernels of each type that has them.
var dotArmKernels = map[Type]struct {
	neon, dp func(x, y *byte, nb int) float32
}{
	Q8_0:   {dotQ80Q80NEON, dotQ80Q80DP},
	Q4_K:   {dotQ4KQ8KNEON, dotQ4KQ8KDP},
	Q5_K:   {dotQ5KQ8KNEON, dotQ5KQ8KDP},
	Q6_K:   {dotQ6KQ8KNEON, dotQ6KQ8KDP},
	IQ4_XS: {dotIQ4XSQ8KNEON, dotIQ4XSQ8KDP},
}

// dotArchImpls returns the NEON kernels of t this CPU runs (both builds
// where it has SDOT), for the tests and benchmarks.
func dotArchImpls(t Type) []dotImpl {
	k, ok := dotArmKernels[t]
	if !ok {
		return nil
	}
	impls := []dotImpl{{"neon", dotArm(k.neon)}}
	if dotArmDP {
		impls = append(impls, dotImpl{"neon-dotprod", dotArm(k.dp)})
	}
	return impls
}

// dotArm adapts a kernel to the twins' signature.
func dotArm(f func(x, y *byte, nb int) float32) func(x, y []byte, nb int) float32 {
	return func(x, y []byte, nb int) float32 {
		if nb == 0 {
			return 0
		}
		return f(&x[0], &y[0], nb)
	}
}

func dotQ80Q80Arch(x, y []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	if dotArmDP {
		return dotQ80Q80DP(&x[0], &y[0], nb)
	}
	return dotQ80Q80NEON(&x[0], &y[0], nb)
}

func dotQ4KQ8KArch(x, y []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	if dotArmDP {
		return dotQ4KQ8KDP(&x[0], &y[0], nb)
	}
	return dotQ4KQ8KNEON(&x[0], &y[0], nb)
}

func dotQ6KQ8KArch(x, y []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	if dotArmDP {
		return dotQ6KQ8KDP(&x[0], &y[0], nb)
	}
	return dotQ6KQ8KNEON(&x[0], &y[0], nb)
}

func dotQ5KQ8KArch(x, y []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	if dotArmDP {
		return dotQ5KQ8KDP(&x[0], &y[0], nb)
	}
	return dotQ5KQ8KNEON(&x[0], &y[0], nb)
}

func dotIQ4XSQ8KArch(x, y []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	if dotArmDP {
		return dotIQ4XSQ8KDP(&x[0], &y[0], nb)
	}
	return dotIQ4XSQ8KNEON(&x[0], &y[0], nb)
}
