#!/usr/bin/env python3
"""Trains the tiny GLM-5 on data.py's tasks, resumably.

    python3 tools/train/train.py --out DIR [--steps N] [--threads 2]

DIR gets tokenizer.json (made once, from the generator), ckpt.pt (model,
optimizer and step, rewritten every --save-every steps and on SIGINT/SIGTERM)
and log.jsonl (one line per --log-every steps: losses per task, the MTP loss,
the indexer KL, throughput). Running the same command again resumes from
ckpt.pt; the batch of step s is a function of (--seed, s) only, so a resumed
run sees the same data as an uninterrupted one.

Schedule: linear warm-up, cosine decay. The first --dense-frac of the steps
attend densely and train the indexer towards the attention distribution (the
heads' probabilities summed and normalised, a KL loss into the indexer only);
the rest attend sparsely to the indexer's top-k keys, with the KL restricted to
the selected keys, as DeepSeek-V3.2 trains its lightning indexer. The MTP block
learns the token after next from the trunk's state and the next token.
Routed experts are balanced without an auxiliary loss: after each step every
expert's selection bias moves by --bias-rate towards equal load.
"""
import argparse
import json
import math
import os
import signal
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data  # noqa: E402
import glm5  # noqa: E402

TASKS = [name for name, _ in data.Gen.MIX]
PROMPT_KEEP = 0.25


def model_config(vocab_size, rope_dim, rope_theta):
    return glm5.Config(vocab_size=vocab_size, qk_rope_head_dim=rope_dim, rope_theta=rope_theta)


class Batcher:
    """Makes the micro-batches of one step. Documents are drawn until the step
    holds --tokens tokens, each goes to the shortest bucket (row length) it
    fits, and each bucket's documents are packed first-fit into rows. Within a
    row a block-diagonal causal mask and per-document positions keep the
    documents apart, and short documents never pay for long rows' attention.
    A micro-batch is (ids, loss weights, positions, document numbers, tasks)."""

    def __init__(self, tok, buckets, tokens, seed, mix):
        self.tok, self.buckets, self.tokens, self.seed, self.mix = tok, buckets, tokens, seed, mix

    def encode(self, segs, r):
        """Token ids and loss weights. A prompt token (weight below 1) keeps
        its weight with probability PROMPT_KEEP and gets 0 otherwise: the same
        expected loss for a quarter of the output-head work."""
        ids, ws = [], []
        for text, w in segs:
            e = self.tok.encode(text).ids
            ids += e
            ws += [w] * len(e) if w >= 1 else [w if r.random() < PROMPT_KEEP else 0.0 for _ in e]
        return ids, ws

    def batch(self, step):
        g = data.Gen(self.seed * 1_000_003 + step)
        rows = {T: [] for T in self.buckets}   # T -> list of [used, docs]
        total = 0
        while total < self.tokens:
            u = g.r.random()
            name = TASKS[-1]
            for n, p in self.mix:
                u -= p
                if u < 0:
                    name = n
                    break
            x, xw = self.encode(getattr(g, name)(), g.r)
            T = next((T for T in self.buckets if len(x) <= T), None)
            if T is None:
                continue
            total += len(x)
            for r in rows[T]:
                if r[0] + len(x) <= T:
                    r[0] += len(x)
                    r[1].append((x, xw, name))
                    break
            else:
                rows[T].append([len(x), [(x, xw, name)]])
        out = []
        for T, rs in rows.items():
            if not rs:
                continue
            B = len(rs)
            ids = torch.zeros(B, T, dtype=torch.long)
            w = torch.zeros(B, T)
            pos = torch.zeros(B, T, dtype=torch.long)
            doc = torch.full((B, T), -1, dtype=torch.long)
            task = torch.zeros(B, T, dtype=torch.long)
            d = 0
            for b, (_, docs) in enumerate(rs):
                col = 0
                for x, xw, name in docs:
                    n = len(x)
                    ids[b, col:col + n] = torch.tensor(x)
                    w[b, col:col + n] = torch.tensor(xw)
                    pos[b, col:col + n] = torch.arange(n)
                    doc[b, col:col + n] = d
                    task[b, col:col + n] = TASKS.index(name)
                    col += n
                    d += 1
            # Padding: its own document per row, weight 0.
            pad = doc < 0
            doc[pad] = -2 - torch.arange(B)[:, None].expand(B, T)[pad]
            out.append((ids, w, pos, doc, task))
        return out


def losses(model, ids, w, pos, doc, task, mode):
    """Weighted sums of the main and MTP cross-entropies, the indexer KL per
    layer (means over queries), the weight sums and per-task sums."""
    h, ctx, kls = model.trunk(ids, pos, doc, mode=mode, want_kl=True)
    tgt = ids[:, 1:]
    same = doc[:, 1:] == doc[:, :-1]
    tw = w[:, 1:] * same
    # The output head runs only where a loss is taken.
    at = tw > 0
    ce = F.cross_entropy(model.logits(h[:, :-1][at]), tgt[at], reduction="none")
    main = (ce * tw[at]).sum()
    per_task = {}
    tk = task[:, 1:][at]
    for i, name in enumerate(TASKS):
        m = tk == i
        if m.any():
            per_task[name] = ((ce[m] * tw[at][m]).sum().item(), tw[at][m].sum().item())
    # MTP: at position t, from h_t and token t+1, predict token t+2.
    mtp_hidden, mkls = model.mtp(h[:, :-1], ids[:, 1:], (ctx[0][:, :-1], ctx[1][:, :-1], ctx[2][:, :-1, :-1]),
                                 mode=mode, want_kl=True)
    t2 = ids[:, 2:]
    same2 = same[:, 1:] & same[:, :-1]
    tw2 = w[:, 2:] * same2
    at2 = tw2 > 0
    ce2 = F.cross_entropy(model.lm_head(mtp_hidden[0][:, :-1][at2]), t2[at2], reduction="none")
    mtp = (ce2 * tw2[at2]).sum()
    kl = torch.stack(kls + mkls)
    return main, mtp, kl, tw.sum().item(), tw2.sum().item(), per_task


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=6000)
    ap.add_argument("--tokens", type=int, default=8192, help="tokens per step")
    ap.add_argument("--buckets", default="160,704,1600", help="row lengths")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--dense-frac", type=float, default=0.25)
    ap.add_argument("--mtp-weight", type=float, default=0.3)
    ap.add_argument("--bias-rate", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--save-every", type=int, default=100)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--bf16", type=int, default=1, help="bfloat16 autocast for matrix products (weights stay float32)")
    ap.add_argument("--rope-dim", type=int, default=glm5.Config.qk_rope_head_dim, help="MLA rope dims per head (qk_rope_head_dim)")
    ap.add_argument("--rope-theta", type=float, default=glm5.Config.rope_theta)
    ap.add_argument("--mix", default="", help="task shares, e.g. copy=0.5,arith=0.2 (the rest keep data.Gen.MIX's ratios)")
    ap.add_argument("--init", default="", help="a ckpt.pt whose model weights a new run starts from")
    ap.add_argument("--attn-sup", type=float, default=0.0,
                    help="weight of the training-only attention supervision of two heads (a previous-token head in "
                         "layer 0, an induction head in layer 1: glm5.attention_supervision)")
    ap.add_argument("--attn-sup-steps", type=int, default=0,
                    help="the step at which --attn-sup has decayed linearly to 0 (0: constant)")
    ap.add_argument("--init-std", type=float, default=0.02,
                    help="standard deviation of the initial weights (residual outputs get it / sqrt(2 layers))")
    ap.add_argument("--bench", type=int, default=0, help="time this many steps and exit, writing nothing")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)

    from tokenizers import Tokenizer
    tok_path = os.path.join(args.out, "tokenizer.json")
    if not os.path.exists(tok_path):
        import tokenizer as tokmod
        tokmod.train(args.vocab).save(tok_path)
    tok = Tokenizer.from_file(tok_path)

    torch.manual_seed(args.seed)
    cfg = model_config(args.vocab, args.rope_dim, args.rope_theta)
    model = glm5.Model(cfg, init_std=args.init_std)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "embed" not in n]
    other = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "embed" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    step = 0
    ckpt = os.path.join(args.out, "ckpt.pt")
    if os.path.exists(ckpt) and not args.bench:
        st = torch.load(ckpt, weights_only=False)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        step = st["step"]
        print(f"resumed at step {step}", flush=True)
    elif args.init:
        # A later phase of training: the weights of an earlier run, a fresh
        # optimizer, schedule and data stream (choose another --seed).
        model.load_state_dict(torch.load(args.init, weights_only=False)["model"])
        print(f"weights from {args.init}", flush=True)
    params = sum(p.numel() for p in model.parameters())
    X, k = cfg.n_routed_experts, cfg.num_experts_per_tok
    per_expert = 3 * cfg.hidden_size * cfg.moe_intermediate_size
    moe_layers = cfg.num_hidden_layers - cfg.first_k_dense_replace
    mtp_params = sum(p.numel() for p in model.layers[cfg.num_hidden_layers:].parameters())
    active = params - mtp_params - moe_layers * (X - k) * per_expert - cfg.vocab_size * cfg.hidden_size
    print(f"parameters {params} (MTP block {mtp_params}); active per token in the trunk, without the "
          f"embedding table: {active}", flush=True)

    mix = dict(data.Gen.MIX)
    for kv in filter(None, args.mix.split(",")):
        k, v = kv.split("=")
        if k not in mix:
            raise SystemExit(f"--mix: unknown task {k!r}")
        mix[k] = float(v)
    total = sum(mix.values())
    mix = [(k, v / total) for k, v in mix.items()]
    batcher = Batcher(tok, [int(x) for x in args.buckets.split(",")], args.tokens, args.seed, mix)
    stop = {"now": False}

    def on_signal(*_):
        stop["now"] = True
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    def save():
        tmp = ckpt + ".tmp"
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                    "config": cfg.to_hf(), "args": vars(args)}, tmp)
        os.replace(tmp, ckpt)

    log = None if args.bench else open(os.path.join(args.out, "log.jsonl"), "a")
    dense_steps = int(args.dense_frac * args.steps)
    t0, tokens = time.time(), 0
    end = step + args.bench if args.bench else args.steps
    while step < end and not stop["now"]:
        lr = args.lr * min(1.0, (step + 1) / args.warmup) * (
            0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, step / args.steps))))
        for gr in opt.param_groups:
            gr["lr"] = lr
        mbs = batcher.batch(step)
        mode = "dense" if step < dense_steps else "sparse"
        opt.zero_grad(set_to_none=True)
        # Every micro-batch's share of the step's mean losses.
        W = sum(float((mb[1][:, 1:] * (mb[3][:, 1:] == mb[3][:, :-1])).sum()) for mb in mbs)
        W2 = sum(float((mb[1][:, 2:] * (mb[3][:, 2:] == mb[3][:, 1:-1]) * (mb[3][:, 1:-1] == mb[3][:, :-2])).sum())
                 for mb in mbs)
        ntok = sum(int((mb[3] >= 0).sum()) for mb in mbs)
        info = {"main": 0.0, "mtp": 0.0, "kl": None, "task": {}}
        lam = glm5.supervision_weight(args.attn_sup, args.attn_sup_steps, step)
        glm5.supervise_heads(model, lam > 0)
        if lam > 0:
            info["sup"] = [0.0, 0.0]
        for mb in mbs:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bool(args.bf16)):
                main, mtp, kl, _, _, per_task = losses(model, *mb, mode)
            share = int((mb[3] >= 0).sum()) / ntok
            loss = main / W + args.mtp_weight * mtp / W2 + kl.sum() * share
            if lam > 0:
                sp, si = glm5.attention_supervision(model, mb[0], mb[3], mb[3] >= 0)
                loss = loss + lam * share * (sp + si)
                info["sup"] = [info["sup"][0] + share * sp.item(), info["sup"][1] + share * si.item()]
            loss.backward()
            info["main"] += main.item() / W
            info["mtp"] += mtp.item() / W2
            k = (kl.detach() * share).tolist()
            info["kl"] = k if info["kl"] is None else [a + b for a, b in zip(info["kl"], k)]
            for n, (s, c) in per_task.items():
                a = info["task"].get(n, (0.0, 0.0))
                info["task"][n] = (a[0] + s, a[1] + c)
        info["task"] = {n: s / c for n, (s, c) in info["task"].items()}
        info["rows"] = {mb[0].shape[1]: mb[0].shape[0] for mb in mbs}
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0).item()
        opt.step()
        with torch.no_grad():
            for layer in model.layers:
                if isinstance(layer.mlp, glm5.MoE) and layer.mlp.last_load is not None:
                    load = layer.mlp.last_load.float()
                    layer.mlp.gate.e_score_correction_bias += args.bias_rate * torch.sign(load.mean() - load)
        step += 1
        tokens += ntok
        if step % args.log_every == 0 or args.bench:
            dt = time.time() - t0
            rec = {"step": step, "mode": mode, "lr": lr, "gnorm": gn, "tok_s": tokens / dt, "time": time.time(), **info}
            print(json.dumps(rec), flush=True)
            if log:
                log.write(json.dumps(rec) + "\n")
                log.flush()
            t0, tokens = time.time(), 0
        if not args.bench and step % args.save_every == 0:
            save()
    if not args.bench:
        save()
        print(f"saved at step {step}", flush=True)


if __name__ == "__main__":
    main()
