package cuda

import (
	"regexp"
	"strings"
	"testing"
)

// TestPTX checks the embedded module: PTX ISA 7.8 for sm_80 (what every
// supported driver JIT-compiles forward), every kernel the Go code
// launches present as a .visible .entry with the parameter sizes the call
// sites pass, and no entry the Go code never launches.
func TestPTX(t *testing.T) {
	src := string(ptxSource)
	for _, want := range []string{"\n.version 7.8\n", "\n.target sm_80\n", "\n.address_size 64\n"} {
		if !strings.Contains(src, want) {
			t.Errorf("PTX lacks %q", strings.TrimSpace(want))
		}
	}
	entries := parseEntries(t, src)
	sigs := Signatures()
	for name, sig := range sigs {
		params, ok := entries[name]
		if !ok {
			t.Errorf("kernel %s is launched but not in the PTX", name)
			continue
		}
		if len(params) != len(sig) {
			t.Errorf("%s: PTX has %d parameters, Go passes %d", name, len(params), len(sig))
			continue
		}
		for i, p := range params {
			want := map[byte]string{pPtr: ".u64", pInt: ".u32", pF32: ".f32"}[sig[i]]
			if p != want {
				t.Errorf("%s parameter %d: PTX %s, Go passes %s", name, i, p, want)
			}
		}
	}
	for name := range entries {
		if _, ok := sigs[name]; !ok {
			t.Errorf("PTX entry %s is never launched", name)
		}
	}
	if len(entries) < 40 {
		t.Errorf("only %d entries", len(entries))
	}
}

var (
	entryRE = regexp.MustCompile(`(?s)\.visible \.entry (\w+)\((.*?)\)`)
	paramRE = regexp.MustCompile(`\.param (\.\w+) \w+`)
)

// parseEntries returns each .visible .entry's parameter types (.u64,
// .u32, .f32).
func parseEntries(t *testing.T, src string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, m := range entryRE.FindAllStringSubmatch(src, -1) {
		var types []string
		for _, p := range paramRE.FindAllStringSubmatch(m[2], -1) {
			types = append(types, p[1])
		}
		out[m[1]] = types
	}
	return out
}
