#!/usr/bin/env python3
"""Writes a training checkpoint as a Hugging Face GLM-5 checkpoint.

    python3 tools/train/export.py --run DIR --out HFDIR

HFDIR gets config.json (GlmMoeDsaForCausalLM, num_nextn_predict_layers 1),
model.safetensors (float32, one tensor per expert, the MTP block as layer
num_hidden_layers, as GLM-5's checkpoints lay it out), generation_config.json,
tokenizer.json and tokenizer_config.json with GLM-5's chat template. glmrun
convert turns it into GGUF; transformers loads it as is (it ignores the MTP
layer).
"""
import argparse
import json
import os
import shutil
import sys

import torch
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import glm5  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    st = torch.load(os.path.join(args.run, "ckpt.pt"), weights_only=False)
    hf = dict(st["config"])
    hf.setdefault("vocab_size", st["args"]["vocab"])
    cfg = glm5.Config.from_hf(hf)
    model = glm5.Model(cfg)
    model.load_state_dict(st["model"])
    tok = json.load(open(os.path.join(args.run, "tokenizer.json")))
    ids = {t["content"]: t["id"] for t in tok["added_tokens"]}
    hf = dict(hf, dtype="float32", eos_token_id=[ids["<|endoftext|>"], ids["<|user|>"], ids["<|observation|>"]],
              pad_token_id=ids["<|endoftext|>"], bos_token_id=None, transformers_version="5.12.1")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(hf, f, indent=2)
    with open(os.path.join(args.out, "generation_config.json"), "w") as f:
        json.dump({"eos_token_id": hf["eos_token_id"], "pad_token_id": hf["pad_token_id"],
                   "transformers_version": "5.12.1"}, f, indent=2)
    shutil.copy(os.path.join(args.run, "tokenizer.json"), os.path.join(args.out, "tokenizer.json"))
    template = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "chat_template.jinja")).read()
    with open(os.path.join(args.out, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": cfg.max_position_embeddings,
                   "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
                   "clean_up_tokenization_spaces": False, "chat_template": template}, f, indent=2)
    sd = glm5.hf_state_dict(model)
    save_file(sd, os.path.join(args.out, "model.safetensors"), metadata={"format": "pt"})
    print(f"wrote {args.out}: {len(sd)} tensors, {sum(v.numel() for v in sd.values())} parameters, step {st['step']}")


if __name__ == "__main__":
    main()
