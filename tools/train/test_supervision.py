#!/usr/bin/env python3
"""Checks glm5.attention_supervision's targets on hand-made attention.

    python3 tools/train/test_supervision.py

Two documents packed in one row (a repeated sequence, then a short one) and
padding: attention that puts all its mass on the targets (the previous token;
the token after each earlier occurrence of the current one, within the
document) must give losses of 0, uniform attention the mean log of the number
of visible keys, and keys the sparse selection hides must not count.
Exit status 0 when all hold.
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import glm5  # noqa: E402


def main():
    cfg = glm5.Config(vocab_size=64, hidden_size=32, num_hidden_layers=2, q_lora_rank=32, kv_lora_rank=32,
                      qk_nope_head_dim=16, qk_rope_head_dim=16, v_head_dim=16, index_head_dim=32,
                      intermediate_size=32, moe_intermediate_size=16)
    m = glm5.Model(cfg)
    # doc 0: 5 a b c 7 a b c; doc 1: 5 d d; padding.
    ids = torch.tensor([[5, 10, 11, 12, 7, 10, 11, 12, 5, 13, 13, 0, 0]])
    doc = torch.tensor([[0] * 8 + [1] * 3 + [-2, -2]])
    T = ids.shape[1]
    visible = torch.ones(T, T, dtype=torch.bool).tril()[None] & (doc[:, :, None] == doc[:, None, :])
    prev_t = torch.zeros(1, 1, T, T, dtype=torch.bool)
    ind_t = torch.zeros(1, 1, T, T, dtype=torch.bool)
    for t in range(T):
        if doc[0, t] < 0:
            continue
        if t > 0 and doc[0, t - 1] == doc[0, t]:
            prev_t[0, 0, t, t - 1] = True
        for s in range(1, t):
            if doc[0, s - 1] == doc[0, t] and doc[0, s] == doc[0, t] and ids[0, s - 1] == ids[0, t]:
                ind_t[0, 0, t, s] = True
    # The targets, by hand: "a b c" of the repetition look at b, c and 7;
    # nothing else has an earlier occurrence in its own document (doc 1's
    # second d would look at itself, which is not earlier).
    ok = True
    got = {(int(t), int(s)) for t, s in zip(*torch.nonzero(ind_t[0, 0], as_tuple=True))}
    if got != {(5, 2), (6, 3), (7, 4)}:
        print("hand targets:", got)
        ok = False

    def put(layer, logp, allowed):
        a = m.layers[layer].self_attn
        a.sup_logp, a.sup_allowed = logp, allowed

    def peaked(target, allowed):
        lg = torch.where(target, 0.0, -1e9).masked_fill(~allowed[:, None], float("-inf"))
        # rows without a target: uniform over the visible keys
        lg = torch.where(target.any(-1, keepdim=True), lg, torch.zeros_like(lg).masked_fill(~allowed[:, None], float("-inf")))
        return lg.log_softmax(-1)

    uniform = torch.zeros(1, 1, T, T).masked_fill(~visible[:, None], float("-inf")).log_softmax(-1)
    put(0, peaked(prev_t, visible), visible)
    put(1, peaked(ind_t, visible), visible)
    p, i = glm5.attention_supervision(m, ids, doc, doc >= 0)
    if p.item() > 1e-6 or i.item() > 1e-6:
        print(f"peaked attention: prev {p.item()}, induction {i.item()}, want 0")
        ok = False
    put(0, uniform, visible)
    put(1, uniform, visible)
    p, i = glm5.attention_supervision(m, ids, doc, doc >= 0)
    pos = [t for t in range(T) if prev_t[0, 0, t].any()]
    wp = sum(math.log(int(visible[0, t].sum())) for t in pos) / len(pos)
    wi = sum(math.log(int(visible[0, t].sum())) for t in (5, 6, 7)) / 3
    if abs(p.item() - wp) > 1e-5 or abs(i.item() - wi) > 1e-5:
        print(f"uniform attention: prev {p.item()} (want {wp}), induction {i.item()} (want {wi})")
        ok = False
    # A sparse selection that hides the target of query 6 (key 3) drops it.
    sel = visible.clone()
    sel[0, 6, 3] = False
    put(1, peaked(ind_t & sel[:, None], sel), sel)
    put(0, peaked(prev_t, visible), visible)
    p, i = glm5.attention_supervision(m, ids, doc, doc >= 0)
    if not math.isfinite(i.item()) or i.item() > 1e-6:
        print(f"hidden target: induction {i.item()}, want 0 over the other queries")
        ok = False
    print("attention supervision:", "ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
