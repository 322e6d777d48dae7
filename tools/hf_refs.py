#!/usr/bin/env python3
"""Make llama.cpp conversion references for checkpoints derived from testdata/hf.

testdata/hf has four small checkpoints and what llama.cpp's converter wrote for
them. This makes three more cases out of them, runs the converter on each (through
tools/llamacpp_convert.py) and writes testdata/hf/NAME.llamacpp-OUTTYPE.json.gz in
the same form as the shipped references: every metadata value (arrays longer than 16
as their length and the sha256 of json.dumps(list, ensure_ascii=False)) and every
tensor's name, ggml type, ne and sha256 of its bytes. convert's tests rebuild the same
checkpoints in Go (derivedCheckpoint) and compare their conversion with these.

  glm5-mtps   glm5-hfs plus one NextN block: layer 4 is a copy of layer 3's tensors,
              with eh_proj = layer 0's mlp.down_proj, enorm = layer 0's input_layernorm,
              hnorm = layer 0's post_attention_layernorm, shared_head.norm = model.norm;
              config num_nextn_predict_layers = 1. Converted as is and with --no-mtp.
  glm5-shards glm5-hfs split round-robin over three shards (the i-th tensor in name
              order goes to shard i % 3) with a model.safetensors.index.json.
  ds3s        flash-hfs as DeepseekV3ForCausalLM (model_type deepseek_v3) with the
              same extra block as glm5-mtps (which the deepseek2 converter drops).

Reference data only. Run it from the repository root on a Debian system with
PyTorch, transformers and the llama.cpp-tools package (its converter):

    python3 tools/hf_refs.py
"""
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

from gguf import GGUFReader
from safetensors import safe_open
from safetensors.torch import save_file

HF = "testdata/hf"


def load(name):
    with safe_open(os.path.join(HF, name, "model.safetensors"), "pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}


def copy_dir(src, dst):
    os.makedirs(dst)
    for f in os.listdir(os.path.join(HF, src)):
        if f != "model.safetensors":
            shutil.copy(os.path.join(HF, src, f), dst)


def add_mtp_layer(t, trunk):
    last = f"model.layers.{trunk - 1}."
    mtp = f"model.layers.{trunk}."
    for k in list(t):
        if k.startswith(last):
            t[mtp + k[len(last):]] = t[k].clone()
    t[mtp + "eh_proj.weight"] = t["model.layers.0.mlp.down_proj.weight"].clone()
    t[mtp + "enorm.weight"] = t["model.layers.0.input_layernorm.weight"].clone()
    t[mtp + "hnorm.weight"] = t["model.layers.0.post_attention_layernorm.weight"].clone()
    t[mtp + "shared_head.norm.weight"] = t["model.norm.weight"].clone()


def edit_config(d, **kv):
    p = os.path.join(d, "config.json")
    with open(p) as f:
        c = json.load(f)
    c.update(kv)
    with open(p, "w") as f:
        json.dump(c, f, indent=2)


def make(tmp, name):
    d = os.path.join(tmp, name)
    if name == "glm5-mtps":
        copy_dir("glm5-hfs", d)
        t = load("glm5-hfs")
        add_mtp_layer(t, 4)
        save_file(t, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        edit_config(d, num_nextn_predict_layers=1)
    elif name == "glm5-shards":
        copy_dir("glm5-hfs", d)
        t = load("glm5-hfs")
        names = sorted(t)
        files = [f"model-{i + 1:05d}-of-00003.safetensors" for i in range(3)]
        weight_map = {}
        for i, f in enumerate(files):
            part = {k: t[k] for j, k in enumerate(names) if j % 3 == i}
            save_file(part, os.path.join(d, f), metadata={"format": "pt"})
            weight_map.update({k: f for k in part})
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": weight_map}, f, indent=2)
    elif name == "ds3s":
        copy_dir("flash-hfs", d)
        t = load("flash-hfs")
        add_mtp_layer(t, 4)
        save_file(t, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        edit_config(d, architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3", num_nextn_predict_layers=1)
    return d


def dump(path, out):
    r = GGUFReader(path)
    md = {}
    for k, f in r.fields.items():
        if k.startswith("GGUF."):
            continue
        v = f.contents()
        if isinstance(v, list) and len(v) > 16:
            v = {"len": len(v), "sha256": hashlib.sha256(json.dumps(v, ensure_ascii=False).encode()).hexdigest()}
        md[k] = v
    tensors = [{"name": t.name, "type": t.tensor_type.name, "ne": [int(x) for x in t.shape],
                "sha256": hashlib.sha256(t.data.tobytes()).hexdigest()} for t in r.tensors]
    with gzip.open(out, "wt") as f:
        json.dump({"file": os.path.basename(path), "metadata": md, "tensors": tensors}, f)


def main():
    cases = [("glm5-mtps", "bf16", []), ("glm5-mtps", "bf16", ["--no-mtp"]), ("glm5-shards", "bf16", []), ("ds3s", "bf16", [])]
    with tempfile.TemporaryDirectory() as tmp:
        made = {}
        for name, outtype, flags in cases:
            d = made.get(name) or make(tmp, name)
            made[name] = d
            suffix = outtype + ("-nomtp" if flags else "")
            gg = os.path.join(tmp, f"{name}.{suffix}.gguf")
            subprocess.run([sys.executable, "tools/llamacpp_convert.py", d, "--outtype", outtype, "--outfile", gg, *flags],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            dump(gg, os.path.join(HF, f"{name}.llamacpp-{suffix}.json.gz"))
            print("wrote", f"{name}.llamacpp-{suffix}.json.gz")


if __name__ == "__main__":
    main()
