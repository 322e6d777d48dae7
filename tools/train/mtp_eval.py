#!/usr/bin/env python3
"""Measures the MTP (NextN) block of a trained checkpoint on held-out text.

    python3 tools/train/mtp_eval.py --run DIR [--samples 300]

For every position t of held-out samples (teacher-forced), the MTP block's
top-1 guess for token t+2 (from the trunk's state at t and token t+1) is
compared with the trunk's own top-1 prediction at t+1 (what speculative
decoding has to agree with) and with the real token t+2; both over all
positions and over the assistant's tokens only.
"""
import argparse
import os
import sys

import torch
from tokenizers import Tokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data  # noqa: E402
import glm5  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", required=True)
    ap.add_argument("--samples", type=int, default=300)
    args = ap.parse_args()
    torch.set_num_threads(2)
    st = torch.load(os.path.join(args.run, "ckpt.pt"), weights_only=False)
    hf = dict(st["config"])
    hf.setdefault("vocab_size", st["args"]["vocab"])
    model = glm5.Model(glm5.Config.from_hf(hf))
    model.load_state_dict(st["model"])
    model.eval()
    tok = Tokenizer.from_file(os.path.join(args.run, "tokenizer.json"))
    g = data.Gen(4242, "eval")
    agree = [0, 0]
    real = [0, 0]
    n = [0, 0]
    with torch.no_grad():
        for _ in range(args.samples):
            segs = g.sample()
            ids, ws = [], []
            for text, w in segs:
                e = tok.encode(text).ids
                ids += e
                ws += [w] * len(e)
            if len(ids) < 3 or len(ids) > 1600:
                continue
            x = torch.tensor([ids])
            T = len(ids)
            pos = torch.arange(T)[None]
            doc = torch.zeros_like(x)
            h, ctx, _ = model.trunk(x, pos, doc, mode="sparse")
            main = model.logits(h)[0].argmax(-1)            # main[t] guesses token t+1
            mh, _ = model.mtp(h[:, :-1], x[:, 1:], (ctx[0][:, :-1], ctx[1][:, :-1], ctx[2][:, :-1, :-1]),
                              mode="sparse")
            mtp = model.lm_head(mh[0])[0].argmax(-1)        # mtp[t] guesses token t+2
            for t in range(T - 2):
                for k, on in enumerate((True, ws[t + 2] >= 1)):
                    if not on:
                        continue
                    n[k] += 1
                    agree[k] += int(mtp[t] == main[t + 1])
                    real[k] += int(mtp[t] == ids[t + 2])
    for k, what in enumerate(("all positions", "assistant tokens")):
        print(f"{what}: {n[k]} predictions; MTP top-1 = trunk's own top-1 at t+1: {agree[k] / n[k]:.3f}; "
              f"= the real token t+2: {real[k] / n[k]:.3f}")


if __name__ == "__main__":
    main()
