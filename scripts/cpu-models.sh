#!/bin/sh
# cpu-models.sh: run the test binaries of the packages with assembly kernels
# under qemu-user's CPU models, so that an instruction the CPU lacks is a
# SIGILL here and not on a user's machine. GODEBUG=cpu.avx512f=off only
# turns off the dispatch; a kernel called directly still runs, and on the
# machine CI happens to get it may well exist.
#
#   Haswell: AVX2, FMA and F16C, no AVX-512 (most AMD Zen 2/3 and Intel
#            client CPUs people run on)
#   Nehalem: SSE4.2, no AVX at all (the pure-Go fallbacks behind amd64
#            assembly)
#   arm64:   the packages built for GOARCH=arm64 and run by qemu-aarch64
#            (its "max" CPU: NEON with SDOT): the NEON kernels, both the
#            SDOT and the plain builds, and the pure-Go ones as ARM machines
#            run them, where Go fuses multiply-adds (a kernel whose result
#            depends on which product the compiler fuses shows up here)
#   cortex-a53: the same binaries on an Armv8.0 core without SDOT, so that
#            the dispatch falls back to the plain NEON kernels (an SDOT
#            reached anyway is a SIGILL)
#
# qemu's TCG emulates neither AVX-512 nor VNNI, so every x86 model here
# lacks them. Needs Debian's qemu-user (qemu-x86_64, qemu-aarch64), version
# 7.2 or later for AVX2. Usage: scripts/cpu-models.sh [MODEL...] (default:
# Haswell Nehalem arm64 cortex-a53).
set -eu
cd "$(dirname "$0")/.."
models=${*:-Haswell Nehalem arm64 cortex-a53}
pkgs=${PKGS:-"tensor backend/cpu model/sample attention"}
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
for m in $models; do
	case $m in
	arm64 | cortex-a53) q=qemu-aarch64 ;;
	*) q=qemu-x86_64 ;;
	esac
	if ! command -v $q >/dev/null 2>&1; then
		echo "cpu-models.sh: $q not found (apt-get install qemu-user)" >&2
		exit 1
	fi
done
for p in $pkgs; do
	name=$(echo "$p" | tr / _)
	go test -c -o "$bin/$name.test" "./$p/"
	case " $models " in
	*" arm64 "* | *" cortex-a53 "*) GOARCH=arm64 go test -c -o "$bin/$name.arm64.test" "./$p/" ;;
	esac
done
status=0
for m in $models; do
	for p in $pkgs; do
		name=$(echo "$p" | tr / _)
		case $m in
		arm64) run="qemu-aarch64 $bin/$name.arm64.test" ;;
		cortex-a53) run="qemu-aarch64 -cpu cortex-a53 $bin/$name.arm64.test" ;;
		*) run="qemu-x86_64 -cpu $m $bin/$name.test" ;;
		esac
		# qemu warns about host features its TCG does not model; they are noise.
		if (cd "$p" && $run -test.count=1 >"$bin/out" 2>&1); then
			echo "ok   $m $p"
		else
			echo "FAIL $m $p"
			grep -v "TCG doesn't support requested feature" "$bin/out" | head -40
			status=1
		fi
	done
done
exit $status
