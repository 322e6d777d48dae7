#!/bin/sh
# cpu-models.sh: run the test binaries of the packages with assembly kernels
# under qemu-x86_64's CPU models, so that an instruction the CPU lacks is a
# SIGILL here and not on a user's machine. GODEBUG=cpu.avx512f=off only
# turns off the dispatch; a kernel called directly still runs, and on the
# machine CI happens to get it may well exist.
#
#   Haswell: AVX2, FMA and F16C, no AVX-512 (most AMD Zen 2/3 and Intel
#            client CPUs people run on)
#   Nehalem: SSE4.2, no AVX at all (the pure-Go fallbacks behind amd64
#            assembly)
#
# qemu's TCG emulates neither AVX-512 nor VNNI, so every model here lacks
# them. Needs Debian's qemu-user (qemu-x86_64), version 7.2 or later for
# AVX2. Usage: scripts/cpu-models.sh [MODEL...] (default: Haswell Nehalem).
set -eu
cd "$(dirname "$0")/.."
if ! command -v qemu-x86_64 >/dev/null 2>&1; then
	echo "cpu-models.sh: qemu-x86_64 not found (apt-get install qemu-user)" >&2
	exit 1
fi
models=${*:-Haswell Nehalem}
pkgs=${PKGS:-"tensor backend/cpu model/sample attention"}
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
for p in $pkgs; do
	go test -c -o "$bin/$(echo "$p" | tr / _).test" "./$p/"
done
status=0
for m in $models; do
	for p in $pkgs; do
		b="$bin/$(echo "$p" | tr / _).test"
		# qemu warns about host features its TCG does not model; they are noise.
		if (cd "$p" && qemu-x86_64 -cpu "$m" "$b" -test.count=1 >"$bin/out" 2>&1); then
			echo "ok   $m $p"
		else
			echo "FAIL $m $p"
			grep -v "TCG doesn't support requested feature" "$bin/out" | head -40
			status=1
		fi
	done
done
exit $status
