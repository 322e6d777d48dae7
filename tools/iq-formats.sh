#!/bin/sh
# Rebuilds the IQ1/IQ2/IQ3 test files, testdata/formats/llama-dense.real.<T>.gguf,
# and their dequantization oracles, testdata/dequant/llama-dense.real.<T>.json.gz.
# With GLM5_MINI_BF16 set to the BF16 glm5-mini file (not shipped: 19 MB) it
# also makes testdata/models/glm5-mini.IQ-mix.gguf, a GLM-5-shaped model with
# all seven types (--tensor-type picks one per kind of matrix), its oracle
# and llama-perplexity's results on it and on its dequantized F32 image
# (testdata/refs/glm5-mini.IQ-mix[.deq-F32].llama-perplexity.txt).
# Reference data only: it needs a chroot with Debian's llama.cpp (llama-imatrix,
# llama-quantize, llama-perplexity) and python3-gguf.
#
#   SID_CHROOT=/path/to/sid-chroot.sh [GLM5_MINI_BF16=FILE] tools/iq-formats.sh [WORKDIR]
#
# llama-quantize refuses the 1- and 2-bit IQ types without an importance
# matrix; llama-imatrix makes one from the BF16 model and a short text
# (testdata/tinyglm/heldout.txt). Each quantized file is then dequantized by
# ggml itself (llama-quantize --allow-requantize ... F32) and summarized by
# tools/dequant_ref.py.
set -eu
: "${SID_CHROOT:?set SID_CHROOT to the chroot runner script}"
repo=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-/var/tmp/glmrun-iq-formats}
mkdir -p "$work"
m=llama-dense.real
cp "$repo/testdata/formats/$m.BF16.gguf" "$repo/testdata/tinyglm/heldout.txt" "$repo/tools/dequant_ref.py" "$work/"
cd "$work"
sh "$SID_CHROOT" run llama-imatrix -m "$m.BF16.gguf" -f heldout.txt -o "$m.imatrix.gguf" -c 128 --chunks 8 -t 2 >imatrix.log 2>&1
for t in IQ1_S IQ1_M IQ2_XXS IQ2_XS IQ2_S IQ3_XXS IQ3_S; do
  sh "$SID_CHROOT" run llama-quantize --imatrix "$m.imatrix.gguf" "$m.BF16.gguf" "$m.$t.gguf" "$t" >"quantize-$t.log" 2>&1
  sh "$SID_CHROOT" run llama-quantize --allow-requantize "$m.$t.gguf" "$m.$t.deq-F32.gguf" F32 >"dequantize-$t.log" 2>&1
  sh "$SID_CHROOT" run python3 dequant_ref.py "$m.$t.gguf" "$m.$t.deq-F32.gguf" "$m.$t.json.gz"
  cp "$m.$t.gguf" "$repo/testdata/formats/"
  cp "$m.$t.json.gz" "$repo/testdata/dequant/"
done
[ -n "${GLM5_MINI_BF16:-}" ] || exit 0
g=glm5-mini
cp "$GLM5_MINI_BF16" "$work/$g.BF16.gguf"
mkdir -p "$work/testdata/tinyglm" "$work/testdata/models" "$work/testdata/refs" "$work/tools"
cp heldout.txt "$work/testdata/tinyglm/"
cp "$repo/tools/perplexity-ref.sh" "$work/tools/"
sh "$SID_CHROOT" run llama-imatrix -m "$g.BF16.gguf" -f heldout.txt -o "$g.imatrix.gguf" -c 128 --chunks 8 -t 2 >imatrix-$g.log 2>&1
# shellcheck disable=SC2046 # the overrides are words without spaces
sh "$SID_CHROOT" run llama-quantize --imatrix "$g.imatrix.gguf" $(printf -- '--tensor-type %s ' \
  attn_q_a=iq1_s attn_q_b=iq1_m attn_kv_a_mqa=iq2_xs attn_output=iq2_s ffn_up=iq3_xxs ffn_gate=iq3_s indexer=iq3_s) \
  "$g.BF16.gguf" "testdata/models/$g.IQ-mix.gguf" IQ2_XXS >"quantize-$g.log" 2>&1
sh "$SID_CHROOT" run llama-quantize --allow-requantize "testdata/models/$g.IQ-mix.gguf" "testdata/models/$g.IQ-mix.deq-F32.gguf" F32 >"dequantize-$g.log" 2>&1
sh "$SID_CHROOT" run python3 dequant_ref.py "testdata/models/$g.IQ-mix.gguf" "testdata/models/$g.IQ-mix.deq-F32.gguf" "$g.IQ-mix.json.gz"
sh "$SID_CHROOT" run sh tools/perplexity-ref.sh "$g.IQ-mix"
sh "$SID_CHROOT" run sh tools/perplexity-ref.sh "$g.IQ-mix.deq-F32"
cp "testdata/models/$g.IQ-mix.gguf" "$repo/testdata/models/"
cp "$g.IQ-mix.json.gz" "$repo/testdata/dequant/"
cp "testdata/refs/$g.IQ-mix.llama-perplexity.txt" "testdata/refs/$g.IQ-mix.deq-F32.llama-perplexity.txt" "$repo/testdata/refs/"
