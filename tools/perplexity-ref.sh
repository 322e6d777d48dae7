#!/bin/sh
# Makes testdata/refs/NAME[SUFFIX].llama-perplexity.txt: what Debian's
# llama-perplexity prints (stdout and stderr) for testdata/models/NAME.gguf
# (or a MODEL.gguf path: NAME is then its base name) on
# testdata/tinyglm/heldout.txt, the reference cmd/glmrun's
# TestPerplexityMatchesLlamaCpp and TestSparseAttentionMatchesLlamaCpp
# compare glmrun perplexity with. Further arguments go to llama-perplexity
# after the defaults (-c 512 --chunks 20 -t 2), which they override, and
# name the file: with "-ctk q8_0" the output is
# NAME.ctk-q8_0.llama-perplexity.txt. Run from the repository root on a
# Debian system with the llama.cpp-tools package:
#
#     sh tools/perplexity-ref.sh glm5-mini.Q8_0
#     sh tools/perplexity-ref.sh glm5-tiny.Q8_0 -ctk q8_0 -ctv q8_0
#
# The GLM-5-widths model of TestSparseAttentionMatchesLlamaCpp is made by
# glmrun synth with the flags in the test (glmDSAWidths; synth is
# deterministic), then:
#
#     sh tools/perplexity-ref.sh .scratch/glm-dsa-widths.gguf -c 6144 --chunks 1
set -eu
name=${1:?usage: $0 MODEL_NAME|MODEL.gguf [llama-perplexity args] (MODEL_NAME: a file testdata/models/MODEL_NAME.gguf)}
shift
case $name in
*.gguf) model=$name; name=$(basename "$name" .gguf) ;;
*) model=testdata/models/$name.gguf ;;
esac
suffix=$(echo "$*" | tr -s ' ' | sed -e 's/^-*//' -e 's/ -*/-/g' -e 's/^\(.\)/.\1/')
out=testdata/refs/$name$suffix.llama-perplexity.txt
args="-m $model -f testdata/tinyglm/heldout.txt -c 512 --chunks 20 -t 2 $*"
{
	llama-perplexity --version 2>&1 | head -n 1
	echo "command: llama-perplexity $args"
	# shellcheck disable=SC2086
	llama-perplexity $args 2>&1
} >"$out"
echo "$out: $(grep 'Final estimate' "$out")"
