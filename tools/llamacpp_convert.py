#!/usr/bin/env python3
"""Convert a tiny Hugging Face checkpoint to GGUF with llama.cpp's own converter.

The converter recognises a BPE pre-tokenizer by hashing how a fixed text
tokenizes, and the test checkpoints' small GLM vocabulary is not one it
knows. Their pre-tokenizer is GLM-4/GLM-5's regex, so this names it "glm4"
(what the converter writes for the real GLM-5 vocabulary) and then runs the
converter unchanged. Reference data only: run it on a Debian system with
the llama.cpp-tools package (its converter and gguf-py), e.g.

    python3 tools/llamacpp_convert.py DIR --outtype bf16 --outfile OUT.gguf
"""
import runpy
import sys

sys.path.insert(1, "/usr/share/llama.cpp/llama.cpp-tools")
from conversion import base  # noqa: E402

base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "glm4"
sys.argv[0] = "/usr/share/doc/llama.cpp-tools/scripts/convert_hf_to_gguf.py"
runpy.run_path(sys.argv[0], run_name="__main__")
