"""A small decoder-only transformer whose MLPs are mixtures of experts: forward(x, y) -> loss.

Token + position embeddings, pre-norm blocks of causal self-attention (matmul + mask +
softmax) and a mixture-of-experts layer: a linear gate, softmax over experts, top-k routing
with the chosen probabilities renormalized, every expert (a GELU MLP, the experts' weights
stacked [E, ...]) run densely on every token, and their outputs combined with a dense
one-hot routing matrix -- fixed shapes, so torch.jit.trace captures it. The loss is the
language-model cross-entropy plus a Switch-style load-balancing term.
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class MoEConfig:
    vocab: int = 32
    seq: int = 8
    dim: int = 16
    depth: int = 2
    heads: int = 2
    experts: int = 4
    top_k: int = 2
    hidden: int = 32
    aux_weight: float = 0.01
    batch: int = 4


CONFIGS = {"tiny": MoEConfig()}


class CausalAttention(nn.Module):
    def __init__(self, cfg: MoEConfig, device=None):
        super().__init__()
        self.heads = cfg.heads
        self.q_proj = nn.Linear(cfg.dim, cfg.dim, bias=False, device=device)
        self.k_proj = nn.Linear(cfg.dim, cfg.dim, bias=False, device=device)
        self.v_proj = nn.Linear(cfg.dim, cfg.dim, bias=False, device=device)
        self.o_proj = nn.Linear(cfg.dim, cfg.dim, bias=False, device=device)
        causal = torch.tril(torch.ones(cfg.seq, cfg.seq, device=device))
        self.register_buffer("causal", causal.view(1, 1, cfg.seq, cfg.seq))

    def forward(self, x):
        B, T, C = x.size()
        hd = C // self.heads
        q = self.q_proj(x).view(B, T, self.heads, hd).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.heads, hd).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.heads, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(self.causal[:, :, :T, :T] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.o_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MoE(nn.Module):
    """Top-k routed experts; forward returns (output, load-balancing loss)."""

    def __init__(self, cfg: MoEConfig, device=None):
        super().__init__()
        self.experts = cfg.experts
        self.top_k = cfg.top_k
        self.gate = nn.Linear(cfg.dim, cfg.experts, bias=False, device=device)
        self.w1 = nn.Parameter(torch.empty(cfg.experts, cfg.dim, cfg.hidden, device=device))
        self.w2 = nn.Parameter(torch.empty(cfg.experts, cfg.hidden, cfg.dim, device=device))
        if device != "meta":
            nn.init.normal_(self.w1, std=1.0 / math.sqrt(cfg.dim))
            nn.init.normal_(self.w2, std=1.0 / math.sqrt(cfg.hidden))

    def forward(self, x):
        B, T, C = x.size()
        tokens = x.reshape(B * T, C)
        probs = F.softmax(self.gate(tokens), dim=-1)                       # [N, E]
        top_p, top_i = torch.topk(probs, self.top_k, dim=-1)                # [N, k]
        top_p = top_p / top_p.sum(dim=-1, keepdim=True)
        chosen = F.one_hot(top_i, self.experts).to(x.dtype)                 # [N, k, E]
        combine = (chosen * top_p.unsqueeze(-1)).sum(dim=1)                 # [N, E]
        h = F.gelu(torch.einsum("nc,ech->enh", tokens, self.w1))           # [E, N, H]
        out = torch.einsum("enh,ehc->enc", h, self.w2)                     # [E, N, C]
        y = torch.einsum("ne,enc->nc", combine, out)
        # Switch Transformer's balance loss: E * sum_e (fraction routed to e) * (mean prob of e)
        routed = chosen.sum(dim=1).mean(dim=0) / self.top_k
        aux = self.experts * (routed * probs.mean(dim=0)).sum()
        return y.view(B, T, C), aux


class Block(nn.Module):
    def __init__(self, cfg: MoEConfig, device=None):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.dim, device=device)
        self.attn = CausalAttention(cfg, device)
        self.ln_2 = nn.LayerNorm(cfg.dim, device=device)
        self.moe = MoE(cfg, device)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        h, aux = self.moe(self.ln_2(x))
        return x + h, aux


class MoETransformer(nn.Module):
    def __init__(self, cfg: MoEConfig, device=None):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab, cfg.dim, device=device)
        self.wpe = nn.Embedding(cfg.seq, cfg.dim, device=device)
        self.blocks = nn.ModuleList([Block(cfg, device) for _ in range(cfg.depth)])
        self.ln_f = nn.LayerNorm(cfg.dim, device=device)
        self.lm_head = nn.Linear(cfg.dim, cfg.vocab, bias=False, device=device)

    def forward(self, x, y):
        T = x.size(1)
        pos = torch.arange(T, dtype=torch.long, device=x.device)
        h = self.wte(x) + self.wpe(pos)
        aux_total = torch.zeros((), device=x.device)
        for block in self.blocks:
            h, aux = block(h)
            aux_total = aux_total + aux
        logits = self.lm_head(self.ln_f(h))
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
        return loss + self.cfg.aux_weight * aux_total


def build(cfg, device=None):
    return MoETransformer(cfg, device)


def input_specs(cfg: MoEConfig, batch=None):
    b = batch or cfg.batch
    return [
        dict(name="x", shape=[b, cfg.seq], dtype="int64", range=[0, cfg.vocab]),
        dict(name="y", shape=[b, cfg.seq], dtype="int64", range=[0, cfg.vocab]),
    ]
