"""A GLM-5 (GlmMoeDsaForCausalLM, GGUF glm-dsa) written for training speed.

The maths is the one transformers' modeling_glm_moe_dsa computes (and glmrun,
docs/MATH.md): MLA attention with a query latent, the DSA lightning indexer,
sigmoid-routed MoE with a correction bias and a shared expert, leading dense
layers, plus a multi-token-prediction (NextN) block after the trunk. It differs
from transformers' code in how, not what:

  * experts run batched: tokens are sorted by expert and each expert multiplies
    one contiguous block, instead of a Python loop over tokens' masks;
  * a training batch packs several documents into one row; a block-diagonal
    causal mask and per-document positions make each behave as if alone;
  * both rotary embeddings (MLA and indexer) are the interleaved (GPT-J) pairing
    GLM-5 uses, applied to adjacent element pairs without permuting;
  * attention is one fused scaled_dot_product_attention call with the sparse
    top-k mask, and the indexer's training signal (the KL divergence from the
    indexer's distribution to the heads' summed attention) is computed from the
    same scores without gradient into the trunk.

State-dict names are the Hugging Face checkpoint's (model.layers.N.self_attn...),
with the experts stacked (mlp.experts.gate_up / down) and split into per-expert
tensors only on export (export.py).
"""
import math
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


@dataclass
class Config:
    vocab_size: int = 4096
    hidden_size: int = 256
    num_hidden_layers: int = 4          # trunk layers
    first_k_dense_replace: int = 1
    num_nextn_predict_layers: int = 1
    num_attention_heads: int = 4
    q_lora_rank: int = 128
    kv_lora_rank: int = 64
    qk_nope_head_dim: int = 32
    qk_rope_head_dim: int = 32
    v_head_dim: int = 48
    index_n_heads: int = 4
    index_head_dim: int = 64
    index_topk: int = 128
    indexer_types: list = field(default_factory=list)   # "full"/"shared" per trunk layer; empty = all full
    intermediate_size: int = 512
    moe_intermediate_size: int = 128
    n_routed_experts: int = 8
    num_experts_per_tok: int = 2
    n_shared_experts: int = 1
    routed_scaling_factor: float = 2.5
    norm_topk_prob: bool = True
    rms_norm_eps: float = 1e-5
    lora_norm_eps: float = 1e-6         # q_a/kv_a layernorms: transformers' default
    indexer_norm_eps: float = 1e-6
    rope_theta: float = 1e4
    max_position_embeddings: int = 4096
    tie_word_embeddings: bool = False

    @classmethod
    def from_hf(cls, d):
        """Reads a Hugging Face config.json dict (GlmMoeDsaForCausalLM)."""
        c = cls()
        for k in ("vocab_size", "hidden_size", "num_hidden_layers", "first_k_dense_replace",
                  "num_attention_heads", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
                  "qk_rope_head_dim", "v_head_dim", "index_n_heads", "index_head_dim", "index_topk",
                  "intermediate_size", "moe_intermediate_size", "n_routed_experts",
                  "num_experts_per_tok", "n_shared_experts", "routed_scaling_factor",
                  "norm_topk_prob", "rms_norm_eps", "max_position_embeddings", "tie_word_embeddings"):
            if k in d:
                setattr(c, k, d[k])
        c.num_nextn_predict_layers = d.get("num_nextn_predict_layers", 0)
        c.indexer_types = list(d.get("indexer_types") or [])
        rp = d.get("rope_parameters") or {}
        c.rope_theta = rp.get("rope_theta", d.get("rope_theta", 1e6))
        if rp.get("rope_type", "default") != "default":
            raise ValueError("glm5.py: only rope_type default is implemented")
        if d.get("n_group", 1) != 1 or d.get("topk_group", 1) != 1:
            raise ValueError("glm5.py: group-limited routing is not implemented")
        return c

    def to_hf(self):
        """The config.json of the exported checkpoint."""
        L = self.num_hidden_layers
        types = self.indexer_types or ["full"] * L
        return {
            "architectures": ["GlmMoeDsaForCausalLM"],
            "model_type": "glm_moe_dsa",
            "attention_bias": False,
            "attention_dropout": 0.0,
            "dtype": "bfloat16",
            "first_k_dense_replace": self.first_k_dense_replace,
            "head_dim": self.qk_rope_head_dim,
            "hidden_act": "silu",
            "hidden_size": self.hidden_size,
            "index_head_dim": self.index_head_dim,
            "index_n_heads": self.index_n_heads,
            "index_topk": self.index_topk,
            "indexer_rope_interleave": True,
            "indexer_types": types,
            "initializer_range": 0.02,
            "intermediate_size": self.intermediate_size,
            "kv_lora_rank": self.kv_lora_rank,
            "layer_types": ["deepseek_sparse_attention"] * L,
            "max_position_embeddings": self.max_position_embeddings,
            "mlp_bias": False,
            "mlp_layer_types": ["dense" if i < self.first_k_dense_replace else "sparse" for i in range(L)],
            "moe_intermediate_size": self.moe_intermediate_size,
            "n_group": 1,
            "n_routed_experts": self.n_routed_experts,
            "n_shared_experts": self.n_shared_experts,
            "norm_topk_prob": self.norm_topk_prob,
            "num_attention_heads": self.num_attention_heads,
            "num_experts_per_tok": self.num_experts_per_tok,
            "num_hidden_layers": L,
            "num_key_value_heads": self.num_attention_heads,
            "num_nextn_predict_layers": self.num_nextn_predict_layers,
            "q_lora_rank": self.q_lora_rank,
            "qk_head_dim": self.qk_nope_head_dim + self.qk_rope_head_dim,
            "qk_nope_head_dim": self.qk_nope_head_dim,
            "qk_rope_head_dim": self.qk_rope_head_dim,
            "rms_norm_eps": self.rms_norm_eps,
            "rope_parameters": {"rope_theta": self.rope_theta, "rope_type": "default"},
            "routed_scaling_factor": self.routed_scaling_factor,
            "scoring_func": "sigmoid",
            "tie_word_embeddings": self.tie_word_embeddings,
            "topk_group": 1,
            "topk_method": "noaux_tc",
            "use_cache": True,
            "v_head_dim": self.v_head_dim,
            "vocab_size": self.vocab_size,
        }


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rope_tables(pos, dim, theta):
    """cos, sin of shape [..., dim/2] for integer positions pos."""
    inv = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    ang = pos.to(torch.float32)[..., None] * inv
    return ang.cos(), ang.sin()


def rope_interleaved(x, cos, sin):
    """Rotates adjacent pairs (x0,x1), (x2,x3), ... of the last dimension.
    x: [B, T, ..., d]; cos/sin: [B, T, d/2] broadcast over the middle dims."""
    while cos.dim() < x.dim():
        cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)


class Indexer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.wq_b = nn.Linear(c.q_lora_rank, c.index_n_heads * c.index_head_dim, bias=False)
        self.wk = nn.Linear(c.hidden_size, c.index_head_dim, bias=False)
        self.k_norm = nn.LayerNorm(c.index_head_dim, eps=c.indexer_norm_eps)
        self.weights_proj = nn.Linear(c.hidden_size, c.index_n_heads, bias=False)

    def scores(self, x, q_lat, cos, sin, visible, rows=None):
        """I[b, t, s] = sum_h w[b,t,h] relu(q[b,t,h] . k[b,s]) / sqrt(Ih*Id), -inf
        where not visible. rows, if given, picks the query positions t."""
        c = self.c
        B, T, _ = x.shape
        dr = c.qk_rope_head_dim
        k = self.k_norm(self.wk(x))
        k = torch.cat((rope_interleaved(k[..., :dr], cos, sin), k[..., dr:]), -1)
        if rows is not None:
            x, q_lat, cos, sin, visible = x[:, rows], q_lat[:, rows], cos[:, rows], sin[:, rows], visible[:, rows]
        q = self.wq_b(q_lat).view(B, -1, c.index_n_heads, c.index_head_dim)
        q = torch.cat((rope_interleaved(q[..., :dr], cos, sin), q[..., dr:]), -1)
        w = self.weights_proj(x) * (c.index_n_heads ** -0.5 * c.index_head_dim ** -0.5)
        s = torch.einsum("bthd,bsd->bhts", q, k).relu()
        I = torch.einsum("bth,bhts->bts", w, s)
        return I.masked_fill(~visible, float("-inf"))


class Attention(nn.Module):
    def __init__(self, c, has_indexer):
        super().__init__()
        self.c = c
        H = c.num_attention_heads
        self.q_a_proj = nn.Linear(c.hidden_size, c.q_lora_rank, bias=False)
        self.q_a_layernorm = RMSNorm(c.q_lora_rank, c.lora_norm_eps)
        self.q_b_proj = nn.Linear(c.q_lora_rank, H * (c.qk_nope_head_dim + c.qk_rope_head_dim), bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(c.hidden_size, c.kv_lora_rank + c.qk_rope_head_dim, bias=False)
        self.kv_a_layernorm = RMSNorm(c.kv_lora_rank, c.lora_norm_eps)
        self.kv_b_proj = nn.Linear(c.kv_lora_rank, H * (c.qk_nope_head_dim + c.v_head_dim), bias=False)
        self.o_proj = nn.Linear(H * c.v_head_dim, c.hidden_size, bias=False)
        self.indexer = Indexer(c) if has_indexer else None
        self.scale = (c.qk_nope_head_dim + c.qk_rope_head_dim) ** -0.5
        # Training only: heads whose attention log-probabilities the next
        # forward keeps in sup_logp ([B, len(sup_heads), T, S]), for losses
        # that teach a head where to look (see attention_supervision).
        self.sup_heads = None
        self.sup_logp = None
        self.sup_allowed = None

    def forward(self, x, cos, sin, visible, mode, prev_sel, want_kl):
        """mode: "dense" (causal, indexer trained to imitate attention) or
        "sparse" (each query attends to the indexer's top-k visible keys).
        Returns output, the selection mask to hand to shared layers, and the
        indexer's KL loss (a 0-dim tensor, or None)."""
        c = self.c
        B, T, _ = x.shape
        H, dn, dr, dv = c.num_attention_heads, c.qk_nope_head_dim, c.qk_rope_head_dim, c.v_head_dim
        q_lat = self.q_a_layernorm(self.q_a_proj(x))
        q = self.q_b_proj(q_lat).view(B, T, H, dn + dr)
        kv = self.kv_a_proj_with_mqa(x)
        lat, k_pe = kv[..., :c.kv_lora_rank], kv[..., c.kv_lora_rank:]
        kvb = self.kv_b_proj(self.kv_a_layernorm(lat)).view(B, T, H, dn + dv)
        k_nope, v = kvb[..., :dn], kvb[..., dn:]
        q = torch.cat((q[..., :dn], rope_interleaved(q[..., dn:], cos, sin)), -1)
        k_pe = rope_interleaved(k_pe, cos, sin)[:, :, None, :].expand(B, T, H, dr)
        k = torch.cat((k_nope, k_pe), -1)

        kl = None
        if mode == "sparse":
            if self.indexer is not None:
                with torch.no_grad():
                    I = self.indexer.scores(x, q_lat, cos, sin, visible)
                    sel = topk_mask(I, c.index_topk, visible)
            else:
                sel = prev_sel
            allowed = sel
        else:
            sel = visible
            allowed = visible
        qh, kh, vh = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        # The math kernel: on CPUs, the fused (flash) kernel PyTorch picks
        # when key and value widths agree is several times slower with a mask.
        with sdpa_kernel(SDPBackend.MATH):
            o = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=allowed[:, None], scale=self.scale)
        if self.sup_heads:
            hs = list(self.sup_heads)
            with torch.autocast("cpu", enabled=False):
                lg = torch.einsum("bhtd,bhsd->bhts", qh[:, hs].float(), kh[:, hs].float()) * self.scale
                self.sup_logp = lg.masked_fill(~allowed[:, None], float("-inf")).log_softmax(-1)
            self.sup_allowed = allowed
        if self.indexer is not None and want_kl:
            # The indexer learns from its own inputs only (detached), as in
            # DeepSeek-V3.2's training: its loss must not reshape the trunk.
            # One query in KL_STRIDE carries the loss, which keeps its cost
            # linear in the number of keys per query.
            rows = torch.arange(T)[T % KL_STRIDE::KL_STRIDE] if T > KL_STRIDE else None
            Iq = self.indexer.scores(x.detach(), q_lat.detach(), cos, sin, visible, rows).float()
            al = allowed if rows is None else allowed[:, rows]
            with torch.no_grad(), torch.autocast("cpu", enabled=False):
                qr = qh if rows is None else qh[:, :, rows]
                logits = torch.einsum("bhtd,bhsd->bhts", qr.float(), kh.float()) * self.scale
                p = logits.masked_fill(~al[:, None], float("-inf")).softmax(-1).sum(1)
                p = p / p.sum(-1, keepdim=True)
                plogp = torch.where(al, p * torch.log(p.clamp_min(1e-12)), torch.zeros_like(p)).sum(-1)
            logq = Iq.masked_fill(~al, float("-inf")).log_softmax(-1)
            cross = torch.where(al, p * logq, torch.zeros_like(p)).sum(-1)
            kl = (plogp - cross).mean()
        o = o.transpose(1, 2).reshape(B, T, H * dv)
        return self.o_proj(o), sel, kl


KL_STRIDE = 4


def topk_mask(I, k, visible):
    """Boolean [B, T, S]: the k visible keys with the largest scores per query
    (all visible keys when there are at most k)."""
    S = I.shape[-1]
    if S <= k:
        return visible
    idx = I.topk(k, dim=-1).indices
    m = torch.zeros_like(visible).scatter_(-1, idx, True)
    return m & visible


class MLP(nn.Module):
    def __init__(self, d, f):
        super().__init__()
        self.gate_proj = nn.Linear(d, f, bias=False)
        self.up_proj = nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Router(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(c.n_routed_experts, c.hidden_size))
        self.register_buffer("e_score_correction_bias", torch.zeros(c.n_routed_experts))


class MoE(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        X, d, f = c.n_routed_experts, c.hidden_size, c.moe_intermediate_size
        self.gate = Router(c)
        self.experts_gate_up = nn.Parameter(torch.empty(X, 2 * f, d))
        self.experts_down = nn.Parameter(torch.empty(X, d, f))
        self.shared_experts = MLP(d, f * c.n_shared_experts)
        self.last_load = None   # tokens per expert in the last forward (for the bias update)

    def forward(self, x):
        c = self.c
        shp = x.shape
        x2 = x.reshape(-1, shp[-1])
        N = x2.shape[0]
        p = torch.sigmoid(F.linear(x2.float(), self.gate.weight.float()))
        with torch.no_grad():
            idx = (p + self.gate.e_score_correction_bias).topk(c.num_experts_per_tok, dim=-1).indices
        w = p.gather(1, idx)
        if c.norm_topk_prob:
            w = w / (w.sum(-1, keepdim=True) + 1e-20)
        w = w * c.routed_scaling_factor
        flat = idx.reshape(-1)
        order = flat.argsort(stable=True)
        counts = torch.bincount(flat, minlength=c.n_routed_experts)
        self.last_load = counts.detach()
        tok = order // c.num_experts_per_tok
        xs = x2[tok]
        out = torch.empty(xs.shape[0], shp[-1], dtype=x.dtype)
        start = 0
        f = c.moe_intermediate_size
        for e, n in enumerate(counts.tolist()):
            if n == 0:
                continue
            seg = xs[start:start + n]
            gu = seg @ self.experts_gate_up[e].t()
            h = F.silu(gu[:, :f]) * gu[:, f:]
            out[start:start + n] = h @ self.experts_down[e].t()
            start += n
        out = out * w.reshape(-1)[order, None]
        y = torch.zeros_like(x2).index_add_(0, tok, out)
        return y.view(shp) + self.shared_experts(x)


class Layer(nn.Module):
    def __init__(self, c, i):
        super().__init__()
        types = c.indexer_types or ["full"] * c.num_hidden_layers
        full = True if i >= c.num_hidden_layers else types[i] == "full"
        self.self_attn = Attention(c, full)
        self.mlp = MLP(c.hidden_size, c.intermediate_size) if i < c.first_k_dense_replace else MoE(c)
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)

    def forward(self, h, cos, sin, visible, mode, prev_sel, want_kl):
        a, sel, kl = self.self_attn(self.input_layernorm(h), cos, sin, visible, mode, prev_sel, want_kl)
        h = h + a
        h = h + self.mlp(self.post_attention_layernorm(h))
        return h, sel, kl


class MTPLayer(Layer):
    """The NextN block: a decoder layer fed eh_proj[enorm(emb(t+1)) || hnorm(h_t)]."""

    def __init__(self, c, i):
        super().__init__(c, i)
        self.eh_proj = nn.Linear(2 * c.hidden_size, c.hidden_size, bias=False)
        self.enorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.hnorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.shared_head = nn.Module()
        self.shared_head.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)


class Model(nn.Module):
    def __init__(self, c, init_std=0.02):
        super().__init__()
        self.c = c
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList([Layer(c, i) for i in range(c.num_hidden_layers)] +
                                    [MTPLayer(c, c.num_hidden_layers + j) for j in range(c.num_nextn_predict_layers)])
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        self.init_weights(init_std)

    def init_weights(self, std=0.02):
        for n, p in self.named_parameters():
            if n.endswith("norm.weight"):
                nn.init.ones_(p)
            elif n.endswith("k_norm.bias"):
                nn.init.zeros_(p)
            else:
                nn.init.normal_(p, std=std)
        # Residual-branch outputs start small so that deep sums stay O(1).
        L = self.c.num_hidden_layers + self.c.num_nextn_predict_layers
        for n, p in self.named_parameters():
            if n.endswith("o_proj.weight") or n.endswith("down_proj.weight") or n.endswith("experts_down"):
                nn.init.normal_(p, std=std / math.sqrt(2 * L))

    def trunk(self, ids, pos, doc, mode="dense", want_kl=False):
        """ids, pos, doc: [B, T] token ids, positions within their document and
        document numbers. Returns the final hidden states (before the norm),
        the attention inputs for the MTP block, and the indexer KL losses."""
        c = self.c
        T = ids.shape[1]
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        visible = causal[None] & (doc[:, :, None] == doc[:, None, :])
        cos, sin = rope_tables(pos, c.qk_rope_head_dim, c.rope_theta)
        h = self.embed_tokens(ids)
        sel = None
        kls = []
        for layer in self.layers[:c.num_hidden_layers]:
            h, sel, kl = layer(h, cos, sin, visible, mode, sel, want_kl)
            if kl is not None:
                kls.append(kl)
        return h, (cos, sin, visible), kls

    def logits(self, h):
        return self.lm_head(self.norm(h))

    def mtp(self, h, next_ids, ctx, mode="dense", want_kl=False):
        """The MTP block's normed output at each position t (lm_head gives
        logits for token t+2), from the trunk state h_t and the embedding of
        token t+1 (next_ids[t])."""
        cos, sin, visible = ctx
        out = []
        kls = []
        for layer in self.layers[self.c.num_hidden_layers:]:
            u = layer.eh_proj(torch.cat((layer.enorm(self.embed_tokens(next_ids)), layer.hnorm(h)), -1))
            u, _, kl = layer(u, cos, sin, visible, mode, None, want_kl)
            if kl is not None:
                kls.append(kl)
            out.append(layer.shared_head.norm(u))
            h = u
        return out, kls


SUP_LAYERS = (0, 1)  # the layers of the previous-token head and of the induction head


def supervise_heads(model, on):
    """Makes the next forwards keep (on) or drop the attention of the two
    heads attention_supervision trains: head 0 of each of SUP_LAYERS."""
    for i in SUP_LAYERS:
        model.layers[i].self_attn.sup_heads = [0] if on else None


def supervision_weight(weight, decay_steps, step):
    """The weight of attention_supervision at step: weight, decaying
    linearly to 0 at decay_steps (0: constant)."""
    return weight * (max(0.0, 1 - step / decay_steps) if decay_steps else 1.0)


def attention_supervision(model, ids, doc, valid=None):
    """Training-only losses that teach two heads the look-back of copying
    (an induction circuit), which otherwise forms only after many millions
    of tokens: head 0 of SUP_LAYERS[0] is pulled towards the previous token,
    head 0 of SUP_LAYERS[1] towards the tokens that followed earlier occurrences
    of the current token. Returns (prev, induction) mean negative
    log-probabilities (the second over positions that have such a match),
    read from the sup_logp the last forward kept; nothing of this is in the
    exported model, which keeps only what the heads learned. valid [B, T]
    (optional) marks the query positions that count (not padding)."""
    pa, pb = (model.layers[i].self_attn for i in SUP_LAYERS)
    a, b = pa.sup_logp[:, 0], pb.sup_logp[:, 0]
    B, T = ids.shape
    # In sparse mode a target the indexer did not select cannot be attended
    # to: only the keys each head could see count.
    same = (doc[:, 1:] == doc[:, :-1]) & pa.sup_allowed[:, 1:, :-1].diagonal(dim1=1, dim2=2)
    if valid is not None:
        same = same & valid[:, 1:]
    d = a[:, 1:, :-1].diagonal(dim1=1, dim2=2)
    prev = -torch.where(same, d, torch.zeros_like(d)).sum() / same.sum().clamp_min(1)
    # m[b, t, s]: key s (s >= 1) follows an earlier occurrence of token t's id.
    m = torch.zeros(B, T, T, dtype=torch.bool)
    m[:, :, 1:] = (ids[:, :, None] == ids[:, None, :-1]) & same[:, None, :]
    m &= torch.ones(T, T, dtype=torch.bool).tril(-1)[None] & (doc[:, :, None] == doc[:, None, :]) & pb.sup_allowed
    has = m.any(-1)
    if valid is not None:
        has = has & valid
    lp = b.masked_fill(~m, float("-inf")).logsumexp(-1)
    ind = -(torch.where(has, lp, torch.zeros_like(lp))).sum() / has.sum().clamp_min(1)
    return prev, ind


# Names of the Hugging Face checkpoint for the stacked experts.
def hf_state_dict(model):
    """The model's weights under the Hugging Face GLM-5 names, experts split."""
    c = model.c
    out = {}
    f = c.moe_intermediate_size
    for n, p in model.state_dict().items():
        p = p.detach().float().contiguous()
        if n.endswith("mlp.experts_gate_up"):
            pre = n[:-len("experts_gate_up")]
            for e in range(p.shape[0]):
                out[f"model.{pre}experts.{e}.gate_proj.weight"] = p[e, :f].clone()
                out[f"model.{pre}experts.{e}.up_proj.weight"] = p[e, f:].clone()
        elif n.endswith("mlp.experts_down"):
            pre = n[:-len("experts_down")]
            for e in range(p.shape[0]):
                out[f"model.{pre}experts.{e}.down_proj.weight"] = p[e].clone()
        elif n == "lm_head.weight":
            out[n] = p
        else:
            out["model." + n] = p
    return out


def load_hf_state_dict(model, sd):
    """Loads Hugging Face GLM-5 names (experts one tensor each) into model."""
    c = model.c
    own = {}
    stacks = {}
    for k, v in sd.items():
        v = v.float()
        if k == "lm_head.weight":
            own[k] = v
            continue
        assert k.startswith("model."), k
        k = k[len("model."):]
        if ".mlp.experts." in k:
            pre, rest = k.split(".mlp.experts.")
            e, kind = rest.split(".", 1)
            stacks.setdefault(pre, {})[(int(e), kind)] = v
            continue
        own[k] = v
    for pre, d in stacks.items():
        X = c.n_routed_experts
        own[pre + ".mlp.experts_gate_up"] = torch.stack(
            [torch.cat((d[(e, "gate_proj.weight")], d[(e, "up_proj.weight")]), 0) for e in range(X)])
        own[pre + ".mlp.experts_down"] = torch.stack([d[(e, "down_proj.weight")] for e in range(X)])
    missing, unexpected = model.load_state_dict(own, strict=False)
    if unexpected:
        raise ValueError(f"unexpected tensors: {unexpected[:5]}")
    if missing:
        raise ValueError(f"missing tensors: {missing[:5]}")
