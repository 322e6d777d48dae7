#!/usr/bin/env python3
"""Does the tiny GLM-5 learn to copy? A probe, outside train.py's pipeline.

    python3 tools/train/copy_probe.py --offset variable --ids 512 --steps 800

Each document is a random prefix, a random sequence s of token ids, a
separator, and s again; the loss is on the repetition only, so the model can
lower it only by looking back. With --offset fixed (prefix empty, s always 24
tokens) the repetition sits a constant distance back, and one positional
head does; with --offset variable (s of 8-40 tokens after a prefix of 0-20)
it needs the two-step look-back of an induction head: find the earlier copy
of the current token, emit what followed it. Prints, every --log-every
steps, the repetition's loss and greedy accuracy (chance: ln(ids) and
1/ids). Architecture knobs override glm5.Config; nothing is written unless
--save is given.
"""
import argparse
import json
import os
import random
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import glm5  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--offset", choices=["fixed", "variable"], default="variable")
    ap.add_argument("--ids", type=int, default=512, help="distinct token ids in the sequences")
    ap.add_argument("--periodic", type=float, default=0.0,
                    help="share of documents that repeat a random sequence of ids over and over (loss after the "
                         "first period)")
    ap.add_argument("--periods", default="2-12",
                    help="LO-HI: the period of the --periodic documents (2-2: always the token two back, which a "
                         "head on the previous token gets right: the head an induction head builds on)")
    ap.add_argument("--steps", type=int, default=800)
    ap.add_argument("--tokens", type=int, default=800, help="tokens per step")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=0, help="steps of linear learning-rate warm-up")
    ap.add_argument("--stop-acc", type=float, default=0.0,
                    help="stop once three logged accuracies in a row reach this (0: run all steps)")
    ap.add_argument("--bf16", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--attn-sup", type=float, default=0.0,
                    help="weight of the training-only attention supervision (glm5.attention_supervision)")
    ap.add_argument("--attn-sup-steps", type=int, default=0,
                    help="steps over which --attn-sup decays linearly to 0 (0: constant)")
    ap.add_argument("--short", type=int, default=0,
                    help="the first N steps use sequences of 4-12 and no prefix (a short-context curriculum)")
    ap.add_argument("--reps", default="1-1", help="LO-HI: how many times s is repeated after its first occurrence")
    ap.add_argument("--init-std", type=float, default=0.02, help="standard deviation of the initial weights")
    ap.add_argument("--save", default="", help="write the weights here at the end (train.py --init reads them)")
    for k in ("num_attention_heads", "qk_nope_head_dim", "qk_rope_head_dim", "kv_lora_rank", "v_head_dim",
              "hidden_size", "num_hidden_layers"):
        ap.add_argument("--" + k.replace("_", "-"), type=int, default=getattr(glm5.Config, k))
    ap.add_argument("--rope-theta", type=float, default=1e4)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    cfg = glm5.Config(vocab_size=4096, rope_theta=a.rope_theta, **{k: getattr(a, k) for k in (
        "num_attention_heads", "qk_nope_head_dim", "qk_rope_head_dim", "kv_lora_rank", "v_head_dim",
        "hidden_size", "num_hidden_layers")})
    model = glm5.Model(cfg, init_std=a.init_std)
    glm5.supervise_heads(model, a.attn_sup > 0)
    rlo, rhi = (int(x) for x in a.reps.split("-"))
    state = {"step": 0}
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.0)
    r = random.Random(a.seed)
    lo = 300

    plo, phi = (int(x) for x in a.periods.split("-"))

    def periodic():
        p = r.randint(plo, phi)
        s = [lo + r.randrange(a.ids) for _ in range(p)]
        n = r.randint(40, 100)
        return [5] + (s * (n // p + 1))[:n], 1 + p, True

    def doc():
        if a.periodic and r.random() < a.periodic:
            return periodic()
        if a.offset == "fixed":
            pre, n = [], 24
        elif state["step"] < a.short:
            pre, n = [], r.randint(4, 12)
        else:
            pre, n = [lo + r.randrange(a.ids) for _ in range(r.randint(0, 20))], r.randint(8, 40)
        s = [lo + r.randrange(a.ids) for _ in range(n)]
        return [5] + pre + s + ([7] + s) * r.randint(rlo, rhi), len(pre) + n + 2, False

    def batch():
        docs, total = [], 0
        while total < a.tokens:
            d = doc()
            docs.append(d)
            total += len(d[0])
        T = max(len(x) for x, _, _ in docs)
        ids = torch.zeros(len(docs), T, dtype=torch.long)
        w = torch.zeros(len(docs), T)
        per = torch.zeros(len(docs), dtype=torch.bool)
        doc_no = torch.arange(len(docs))[:, None].expand(len(docs), T).clone()
        for b, (x, start, is_per) in enumerate(docs):
            ids[b, :len(x)] = torch.tensor(x)
            w[b, start:len(x)] = 1.0
            per[b] = is_per
            doc_no[b, len(x):] = -1 - b  # padding: a document of its own
        pos = torch.arange(T)[None].expand(len(docs), T)
        return ids, w, pos, doc_no, per

    t0 = time.time()
    good = 0
    for step in range(a.steps):
        state["step"] = step
        for g in opt.param_groups:
            g["lr"] = a.lr * min(1.0, (step + 1) / a.warmup) if a.warmup else a.lr
        ids, w, pos, doc_no, per = batch()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bool(a.bf16)):
            h, _, _ = model.trunk(ids, pos, doc_no)
            lg = model.logits(h[:, :-1]).float()
        tw = w[:, 1:]
        ce = F.cross_entropy(lg.reshape(-1, lg.shape[-1]), ids[:, 1:].reshape(-1), reduction="none").view_as(tw)
        loss = ce_loss = (ce * tw).sum() / tw.sum()
        sup = None
        if a.attn_sup:
            lam = glm5.supervision_weight(a.attn_sup, a.attn_sup_steps, step)
            sup = glm5.attention_supervision(model, ids, doc_no, doc_no >= 0)
            loss = loss + lam * (sup[0] + sup[1])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % a.log_every == 0 or step == a.steps - 1:
            hit = lg.argmax(-1) == ids[:, 1:]
            at = (tw > 0) & ~per[:, None]  # the copy documents: the accuracy that counts
            acc = hit[at].float().mean().item() if at.any() else float("nan")
            rec = {"step": step, "loss": round(ce_loss.item(), 3), "acc": round(acc, 3)}
            if at.any():
                # how often the guess is the current token instead (a copy of the wrong position)
                rec["acc_cur"] = round((lg.argmax(-1) == ids[:, :-1])[at].float().mean().item(), 3)
            if sup is not None:
                rec["sup_prev"], rec["sup_ind"] = round(sup[0].item(), 3), round(sup[1].item(), 3)
            if per.any():
                pat = (tw > 0) & per[:, None]
                rec["periodic_acc"] = round(hit[pat].float().mean().item(), 3)
            rec["s"] = round(time.time() - t0)
            print(json.dumps(rec), flush=True)
            good = good + 1 if a.stop_acc and acc >= a.stop_acc else 0
            if good >= 3:
                break
            if a.save and step % (a.log_every * 10) == 0:
                torch.save({"model": model.state_dict()}, a.save)
    if a.save:
        torch.save({"model": model.state_dict()}, a.save)


if __name__ == "__main__":
    main()
