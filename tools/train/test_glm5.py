#!/usr/bin/env python3
"""Checks glm5.py against transformers' logits on the repository's small
Hugging Face checkpoints (testdata/hf): glm5-hfs (all layers full, index_topk 8,
so positions 8 on are sparse) and glm52-hfs (GLM-5.2's shared indexer layers).

The references are transformers' GlmMoeDsaForCausalLM in float32 with its
indexer rotated by the interleaved RoPE that GLM-5 means. With --live it also
runs the installed transformers itself, with that one function patched, and
compares against it too.

Run from the repository root: python3 tools/train/test_glm5.py [--live]
Exit status 0 when every logit is within TOL of the reference.
"""
import gzip
import json
import os
import sys

import torch
from safetensors.torch import load_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import glm5  # noqa: E402

# float32 against float32 over a 4-layer model: rounding only. glmrun's Go
# code meets the same references at ~1e-4 with different eps placement.
TOL = 1e-4
HF = "testdata/hf"


def ours(name):
    d = os.path.join(HF, name)
    cfg = glm5.Config.from_hf(json.load(open(os.path.join(d, "config.json"))))
    m = glm5.Model(cfg)
    glm5.load_hf_state_dict(m, load_file(os.path.join(d, "model.safetensors")))
    m.eval()
    return m


def run(m, ids):
    t = torch.tensor([ids])
    pos = torch.arange(len(ids))[None]
    doc = torch.zeros_like(t)
    with torch.no_grad():
        h, _, _ = m.trunk(t, pos, doc, mode="sparse")
        return m.logits(h)[0]


def live(name, ids):
    import transformers
    from transformers.models.glm_moe_dsa import modeling_glm_moe_dsa as mm

    def interleaved(q, k, cos, sin, unsqueeze_dim=1):
        # transformers 5.12.1 rotates the indexer half-split; GLM-5 means interleaved.
        q2, k2 = mm.apply_rotary_pos_emb_interleave(q.transpose(1, 2), k.transpose(1, 2), cos, sin)
        return q2.transpose(1, 2), k2.transpose(1, 2)

    mm.apply_rotary_pos_emb = interleaved
    m = transformers.AutoModelForCausalLM.from_pretrained(os.path.join(HF, name), dtype=torch.float32,
                                                          attn_implementation="eager")
    m.eval()
    with torch.no_grad():
        return m(torch.tensor([ids])).logits[0]


def main():
    worst = 0.0
    for name in ("glm5-hfs", "glm52-hfs"):
        ref = json.load(gzip.open(os.path.join(HF, name + ".P.batch.json.gz"), "rt"))
        ids = ref["tokens"]
        want = torch.tensor([p["logits"] for p in ref["prompt_logits"]])
        got = run(ours(name), ids)
        d = (got - want).abs().max().item()
        print(f"{name}: max |logit - transformers| = {d:.3g} over {len(ids)} positions")
        worst = max(worst, d)
        if "--live" in sys.argv:
            d2 = (got - live(name, ids)).abs().max().item()
            print(f"{name}: max |logit - live transformers| = {d2:.3g}")
            worst = max(worst, d2)
    if worst > TOL:
        print(f"FAIL: {worst:.3g} > {TOL}")
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
