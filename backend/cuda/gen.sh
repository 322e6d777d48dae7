#!/bin/sh
# gen.sh: compile kernels/all.cu to ptx/glmrun.ptx with the pinned Debian
# clang (docs/CUDA.md section 1) and record the compiler and flags in
# ptx/MANIFEST. Run by `go generate ./backend/cuda`; only kernel authors
# need clang-19 (apt-get install -y --no-install-recommends clang-19).
set -eu
cd "$(dirname "$0")"
CLANG=${CLANG:-clang++-19}
FLAGS="-x cuda --cuda-device-only -nocudainc -nocudalib --cuda-gpu-arch=sm_80 --cuda-feature=+ptx78 -O3 -ffp-contract=off"
# shellcheck disable=SC2086
"$CLANG" $FLAGS -S kernels/all.cu -o ptx/glmrun.ptx
VERSION=$("$CLANG" --version | head -1)
PKG=$(dpkg-query -W -f='${Package} ${Version}' clang-19 2>/dev/null || echo unknown)
{
	echo "compiler: $VERSION"
	echo "package: $PKG"
	echo "command: clang++-19 $FLAGS -S kernels/all.cu -o ptx/glmrun.ptx"
	echo "sha256: $(sha256sum ptx/glmrun.ptx | cut -d' ' -f1)"
	echo "kernels: $(grep -c '^\.visible \.entry' ptx/glmrun.ptx)"
} >ptx/MANIFEST
