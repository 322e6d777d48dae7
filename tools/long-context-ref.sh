#!/bin/sh
# Makes testdata/refs/glm-dsa-widths.c6144.llama-perplexity.txt, the
# reference cmd/glmrun's TestSparseAttentionMatchesLlamaCpp compares with:
# what Debian's llama-perplexity prints for one 6144-token chunk of
# testdata/tinyglm/heldout.txt on a synthetic model with GLM-5's attention
# and indexer widths (64 heads, kv_lora 512, rope 64; 32 indexer heads of
# 128, top_k 2048) and small everything else. Two steps, from the
# repository root: where Go is,
#
#     go run ./cmd/glmrun synth --arch glm-dsa -o .scratch/glm-dsa-widths.gguf -layers 2 -embd 1024 \
#         -ffn 1024 -expert-ffn 256 -experts 4 -experts-used 2 -vocab 4096 -q-lora 512 -ctx 8192 -mix Q8_0
#
# (the test writes the same file: synth is deterministic), then on a Debian
# system with the llama.cpp-tools package
#
#     sh tools/long-context-ref.sh .scratch/glm-dsa-widths.gguf
set -eu
model=${1:?usage: $0 MODEL.gguf (made by glmrun synth as above)}
out=testdata/refs/glm-dsa-widths.c6144.llama-perplexity.txt
args="-m $model -f testdata/tinyglm/heldout.txt -c 6144 --chunks 1 -t 2"
{
	llama-perplexity --version 2>&1 | head -n 1
	echo "command: llama-perplexity $args"
	# shellcheck disable=SC2086
	llama-perplexity $args 2>&1
} >"$out"
echo "$out: $(grep 'Final estimate' "$out")"
