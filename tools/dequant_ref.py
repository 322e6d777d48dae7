#!/usr/bin/env python3
"""Writes a dequantization oracle (testdata/dequant/<model>.json.gz) for a
quantized GGUF file: per tensor, the sha256 of ggml's own dequantization
as little-endian float32, its first 16 values and its exactly rounded sum.

ggml does the dequantizing: llama-quantize --allow-requantize MODEL DEQ F32
writes every tensor through the type's dequantize_row function. This script
only reads the two files (the gguf Python package, Debian's python3-gguf)
and summarizes them. Reference tool only; see tools/dequant-refs.sh.

    python3 tools/dequant_ref.py MODEL.gguf DEQ.gguf OUT.json.gz
"""
import gzip, hashlib, json, math, os, sys

import numpy as np
from gguf import GGUFReader

model, deq, out = sys.argv[1:4]
src = GGUFReader(model)
f32 = {t.name: t for t in GGUFReader(deq).tensors}
tensors, f32_in_source = {}, []
for t in src.tensors:
    d = f32[t.name]
    if d.tensor_type.name != "F32":
        sys.exit(f"{deq}: tensor {t.name} is {d.tensor_type.name}, not F32")
    v = np.ascontiguousarray(d.data, dtype="<f4").reshape(-1)
    ne = [int(x) for x in t.shape]
    if v.size != math.prod(ne):
        sys.exit(f"{t.name}: {v.size} values for shape {ne}")
    ty = t.tensor_type.name.lower().replace("_k", "_K")
    if ty == "f32":
        f32_in_source.append(t.name)
    tensors[t.name] = {
        "type": ty,
        "shape_ne": ne,
        "sha256_f32": hashlib.sha256(v.tobytes()).hexdigest(),
        "first16": [float(x) for x in v[:16]],
        "sum": math.fsum(float(x) for x in v),
    }
doc = {
    "model": os.path.basename(model),
    "note": "dequantized by llama.cpp (llama-quantize --allow-requantize SRC OUT F32); sha256_f32 = sha256 of "
            "the tensor's little-endian float32 bytes in ggml order (ne0 fastest); sum = exactly rounded float64 "
            "sum (math.fsum); tensors with type f32 were already F32 in the source file and are copied unchanged",
    "f32_in_source": f32_in_source,
    "tensors": tensors,
}
with gzip.open(out, "wt") as fh:
    json.dump(doc, fh)
