#!/bin/sh
# Makes testdata/refs/NAME[SUFFIX].llama-perplexity.txt: what Debian's
# llama-perplexity prints (stdout and stderr) for testdata/models/NAME.gguf
# on testdata/tinyglm/heldout.txt, the reference cmd/glmrun's
# TestPerplexityMatchesLlamaCpp compares glmrun perplexity with. Further
# arguments go to llama-perplexity, and name the file: with "-ctk q8_0"
# the output is NAME.ctk-q8_0.llama-perplexity.txt. Run from the
# repository root on a Debian system with the llama.cpp-tools package:
#
#     sh tools/perplexity-ref.sh glm5-mini.Q8_0
#     sh tools/perplexity-ref.sh glm5-tiny.Q8_0 -ctk q8_0
set -eu
name=${1:?usage: $0 MODEL_NAME [llama-perplexity args] (a file testdata/models/MODEL_NAME.gguf)}
shift
suffix=$(echo "$*" | tr -s ' ' | sed -e 's/^-*//' -e 's/ -*/-/g' -e 's/^\(.\)/.\1/')
out=testdata/refs/$name$suffix.llama-perplexity.txt
args="-m testdata/models/$name.gguf -f testdata/tinyglm/heldout.txt -c 512 --chunks 20 -t 2 $*"
{
	llama-perplexity --version 2>&1 | head -n 1
	echo "command: llama-perplexity $args"
	# shellcheck disable=SC2086
	llama-perplexity $args 2>&1
} >"$out"
echo "$out: $(grep 'Final estimate' "$out")"
