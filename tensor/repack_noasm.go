//go:build !amd64 || purego

package tensor

// Without assembly there is no repacked product: the pure-Go twin is no
// faster than the row-major one, and repacking would only cost memory.
var gemmQ4KR8Best, gemmQ5KR8Best, gemmQ8R8Best, gemmXSR8Best, gemmQ6KR8Best, gemmQ4KR8Head, gemmQ5KR8Head, gemmQ6KR8Head PackedGemmFunc

// packedImpls returns the packed products of t this CPU runs: none.
func packedImpls(Type) map[string]PackedGemmFunc { return nil }
