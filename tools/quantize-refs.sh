#!/bin/sh
# Rebuilds testdata/quantize/llamacpp-refs.json.gz, llama-quantize's results
# on the test inputs of "glmrun quantize" (see tools/quantref). Reference
# data only: it needs a chroot with Debian's llama.cpp and its converter.
#
#   SID_CHROOT=/path/to/sid-chroot.sh tools/quantize-refs.sh [WORKDIR]
#
# SID_CHROOT is a script that runs "SID_CHROOT run CMD ARGS" inside the
# chroot with the current directory mounted as its working directory.
# Besides the inputs that internal/quantref builds from testdata, it
# records the type choices for the tiny HF checkpoints of testdata/hf as
# llama.cpp's converter turns them into bf16 GGUFs.
set -eu
: "${SID_CHROOT:?set SID_CHROOT to the chroot runner script}"
repo=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-/var/tmp/glmrun-quantize-refs}
mkdir -p "$work"
cp "$repo/tools/llamacpp_convert.py" "$work/"
extra=""
for m in glm5-hfs flash-hfs; do
  rm -rf "${work:?}/$m"
  cp -r "$repo/testdata/hf/$m" "$work/$m"
  (cd "$work" && sh "$SID_CHROOT" run python3 llamacpp_convert.py "$m" --outtype bf16 --outfile "$m.bf16.gguf" >"$m.convert.log" 2>&1)
  extra="$extra $work/$m.bf16.gguf"
done
cd "$repo"
# shellcheck disable=SC2086 # extra is a list of paths without spaces
go run ./tools/quantref -work "$work/q" -llama-quantize "sh $SID_CHROOT run llama-quantize" \
  -testdata testdata -o testdata/quantize/llamacpp-refs.json.gz $extra
