#!/usr/bin/env python3
"""Reference logits of a glm-dsa GGUF's trunk and MTP (NextN) block, for
glmrun's MTP test.

    python3 tools/train/mtp_ref.py --gguf FILE.gguf --tokenizer tokenizer.json \
        --text FILE --out REF.json.gz [--positions 5,60,...]

The GGUF's tensors are dequantized (gguf-py) and loaded into glm5.py's model
(checked against transformers by test_glm5.py), so the reference runs the
same weights glmrun does, in float32. The MTP block follows DeepSeek-V3's
equations: at position i, u = eh_proj [enorm(embed(t_{i+1})); hnorm(h_i)]
with h_i the trunk's last hidden state before the output norm, then the
block (its own MLA attention with DSA and its MoE) and head(shared_head_norm).
Chained drafts feed the block's own output back as h with the drafted token.

The output holds the token ids, and at each chosen position i the trunk's
logits after token i, the MTP logits for token i+2 (from h_i and t_{i+1}),
and the chained drafts after it (greedy, --chain steps): each draft's token
and the logits the next chained step gives, and for each of these rows how
far the block's DSA selection is from a tie (dsa_margin).
"""
import argparse
import gzip
import json
import os
import sys

import numpy as np
import torch
from gguf import GGUFReader, quants

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import glm5  # noqa: E402


def field(r, key, default=None):
    f = r.fields.get(key)
    if f is None:
        return default
    v = f.contents()
    return v


def load(path):
    r = GGUFReader(path)
    A = "glm-dsa"
    if field(r, "general.architecture") != A:
        raise SystemExit(f"{path}: architecture {field(r, 'general.architecture')}, want {A}")
    c = glm5.Config()
    c.vocab_size = field(r, A + ".vocab_size")
    c.hidden_size = field(r, A + ".embedding_length")
    nextn = field(r, A + ".nextn_predict_layers", 0)
    c.num_hidden_layers = field(r, A + ".block_count") - nextn
    c.num_nextn_predict_layers = nextn
    c.first_k_dense_replace = field(r, A + ".leading_dense_block_count")
    c.num_attention_heads = field(r, A + ".attention.head_count")
    c.q_lora_rank = field(r, A + ".attention.q_lora_rank")
    c.kv_lora_rank = field(r, A + ".attention.kv_lora_rank")
    c.qk_rope_head_dim = field(r, A + ".rope.dimension_count")
    c.qk_nope_head_dim = field(r, A + ".attention.key_length_mla") - c.qk_rope_head_dim
    c.v_head_dim = field(r, A + ".attention.value_length_mla")
    c.index_n_heads = field(r, A + ".attention.indexer.head_count")
    c.index_head_dim = field(r, A + ".attention.indexer.key_length")
    c.index_topk = field(r, A + ".attention.indexer.top_k")
    c.intermediate_size = field(r, A + ".feed_forward_length")
    c.moe_intermediate_size = field(r, A + ".expert_feed_forward_length")
    c.n_routed_experts = field(r, A + ".expert_count")
    c.num_experts_per_tok = field(r, A + ".expert_used_count")
    c.n_shared_experts = field(r, A + ".expert_shared_count")
    c.routed_scaling_factor = field(r, A + ".expert_weights_scale")
    c.norm_topk_prob = bool(field(r, A + ".expert_weights_norm"))
    c.rms_norm_eps = field(r, A + ".attention.layer_norm_rms_epsilon")
    c.rope_theta = field(r, A + ".rope.freq_base")
    types = field(r, A + ".attention.indexer.types")
    if types is not None:
        c.indexer_types = ["full" if t else "shared" for t in types]
    if field(r, A + ".expert_gating_func") != 2:
        raise SystemExit("only sigmoid gating (expert_gating_func 2) is written here")

    H, dn, dv, kr = c.num_attention_heads, c.qk_nope_head_dim, c.v_head_dim, c.kv_lora_rank
    sd = {}
    for t in r.tensors:
        a = quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        a = torch.from_numpy(a.reshape(tuple(int(x) for x in reversed(t.shape.tolist()))).copy())
        name = t.name
        if name == "token_embd.weight":
            sd["model.embed_tokens.weight"] = a
            continue
        if name == "output_norm.weight":
            sd["model.norm.weight"] = a
            continue
        if name == "output.weight":
            sd["lm_head.weight"] = a
            continue
        _, n, rest = name.split(".", 2)
        pre = f"model.layers.{n}."
        base = {
            "attn_norm.weight": "input_layernorm.weight",
            "ffn_norm.weight": "post_attention_layernorm.weight",
            "attn_q_a.weight": "self_attn.q_a_proj.weight",
            "attn_q_a_norm.weight": "self_attn.q_a_layernorm.weight",
            "attn_q_b.weight": "self_attn.q_b_proj.weight",
            "attn_kv_a_mqa.weight": "self_attn.kv_a_proj_with_mqa.weight",
            "attn_kv_a_norm.weight": "self_attn.kv_a_layernorm.weight",
            "attn_output.weight": "self_attn.o_proj.weight",
            "indexer.attn_q_b.weight": "self_attn.indexer.wq_b.weight",
            "indexer.attn_k.weight": "self_attn.indexer.wk.weight",
            "indexer.k_norm.weight": "self_attn.indexer.k_norm.weight",
            "indexer.k_norm.bias": "self_attn.indexer.k_norm.bias",
            "indexer.proj.weight": "self_attn.indexer.weights_proj.weight",
            "ffn_gate.weight": "mlp.gate_proj.weight",
            "ffn_up.weight": "mlp.up_proj.weight",
            "ffn_down.weight": "mlp.down_proj.weight",
            "ffn_gate_inp.weight": "mlp.gate.weight",
            "exp_probs_b.bias": "mlp.gate.e_score_correction_bias",
            "ffn_gate_shexp.weight": "mlp.shared_experts.gate_proj.weight",
            "ffn_up_shexp.weight": "mlp.shared_experts.up_proj.weight",
            "ffn_down_shexp.weight": "mlp.shared_experts.down_proj.weight",
            "nextn.eh_proj.weight": "eh_proj.weight",
            "nextn.enorm.weight": "enorm.weight",
            "nextn.hnorm.weight": "hnorm.weight",
            "nextn.shared_head_norm.weight": "shared_head.norm.weight",
        }.get(rest)
        if base is not None:
            sd[pre + base] = a
        elif rest == "attn_k_b.weight":      # [H, kr, dn]: W_UK per head, transposed
            sd.setdefault(pre + "kv_b", {})["k"] = a
        elif rest == "attn_v_b.weight":      # [H, dv, kr]
            sd.setdefault(pre + "kv_b", {})["v"] = a
        elif rest in ("ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"):
            kind = {"ffn_gate_exps.weight": "gate_proj", "ffn_up_exps.weight": "up_proj",
                    "ffn_down_exps.weight": "down_proj"}[rest]
            for e in range(a.shape[0]):
                sd[f"{pre}mlp.experts.{e}.{kind}.weight"] = a[e]
        elif rest in ("nextn.embed_tokens.weight", "nextn.shared_head_head.weight"):
            pass  # shared with the trunk in the models glm5.py writes
        else:
            raise SystemExit(f"{path}: tensor {name} is not handled here")
    for k in [k for k in sd if k.endswith("kv_b")]:
        p = sd.pop(k)
        kb = p["k"].transpose(1, 2)           # [H, dn, kr]
        vb = p["v"]                           # [H, dv, kr]
        sd[k[:-len("kv_b")] + "self_attn.kv_b_proj.weight"] = torch.cat((kb, vb), 1).reshape(H * (dn + dv), kr)
    model = glm5.Model(c)
    glm5.load_hf_state_dict(model, sd)
    model.eval()
    return model


def dsa_margin(layer, hs, cos, sin, vis, k):
    """How far the MTP block's DSA selection for the last row is from a tie:
    the gap between the k-th and (k+1)-th indexer scores relative to the
    largest score's size (None when the row sees at most k keys). Where it
    is at float32 noise, another summation order may choose the other key."""
    m = hs.shape[1]
    if m <= k:
        return None
    a = layer.self_attn
    xn = layer.input_layernorm(hs)
    q_lat = a.q_a_layernorm(a.q_a_proj(xn))
    s = a.indexer.scores(xn, q_lat, cos, sin, vis)[0, -1].sort(descending=True).values
    return float((s[k - 1] - s[k]) / s[:m].abs().max())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--text", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokens", type=int, default=320)
    ap.add_argument("--positions", default="3,40,100,124,128,129,140")
    ap.add_argument("--chain", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(2)
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(args.tokenizer)
    ids = tok.encode(open(args.text).read()).ids[:args.tokens]
    model = load(args.gguf)
    T = len(ids)
    x = torch.tensor([ids])
    pos = torch.arange(T)[None]
    doc = torch.zeros(1, T, dtype=torch.long)
    out = {"gguf": os.path.basename(args.gguf), "ids": ids, "rows": []}
    with torch.no_grad():
        h, ctx, _ = model.trunk(x, pos, doc, mode="sparse")
        logits = model.logits(h)[0]
        for i in [int(p) for p in args.positions.split(",")]:
            if i + 2 >= T:
                raise SystemExit(f"position {i} needs tokens up to {i + 2}; the text has {T}")
            # MTP rows 0..i (row j: h_j and t_{j+1}), then chained drafts at
            # rows i+1, i+2, ... from the block's own output.
            n = i + 1
            c = (ctx[0][:, :n], ctx[1][:, :n], ctx[2][:, :n, :n])
            layer = model.layers[model.c.num_hidden_layers]
            emb = model.embed_tokens(x[:, 1:n + 1])
            u = layer.eh_proj(torch.cat((layer.enorm(emb), layer.hnorm(h[:, :n])), -1))
            # The block over rows 0..i, then one row at a time for the chain.
            rows = u
            mlog = []
            margins = []
            drafts = []
            hs = rows
            for k in range(args.chain + 1):
                m = hs.shape[1]
                cos, sin = glm5.rope_tables(torch.arange(m)[None], model.c.qk_rope_head_dim, model.c.rope_theta)
                vis = torch.ones(m, m, dtype=torch.bool).tril()[None]
                o, _, _ = layer(hs, cos, sin, vis, "sparse", None, False)
                lg = model.lm_head(layer.shared_head.norm(o[:, -1]))[0]
                mlog.append(lg)
                margins.append(dsa_margin(layer, hs, cos, sin, vis, model.c.index_topk))
                d = int(lg.argmax())
                drafts.append(d)
                # Next chained row: the block's own output as h, the draft's
                # embedding as the token.
                nu = layer.eh_proj(torch.cat((layer.enorm(model.embed_tokens(torch.tensor([[d]]))),
                                              layer.hnorm(o[:, -1:])), -1))
                hs = torch.cat((hs, nu), 1)
            del c
            out["rows"].append({
                "pos": i,
                "trunk": [round(float(v), 6) for v in logits[i]],
                "mtp": [[round(float(v), 6) for v in lg] for lg in mlog],
                "drafts": drafts,
                "dsa_margin": margins,
            })
    with gzip.open(args.out, "wt") as f:
        json.dump(out, f)
    print(f"{args.out}: {T} tokens, {len(out['rows'])} positions, chains of {args.chain}")


if __name__ == "__main__":
    main()
