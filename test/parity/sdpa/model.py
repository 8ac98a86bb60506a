"""Scaled dot-product attention in each argument form, for parity and golden tests (torch 2.5+).

SdpaArgs.forward(x, y) -> loss: q/k/v projections of x [B, L, C] into H query heads and Hkv
key/value heads, then three attentions summed -- a boolean [1, 1, L, L] mask with an explicit
scale, grouped query heads (enable_gqa) with an additive per-head [1, H, L, L] mask, and a causal
one with another scale -- an output projection and an MSE loss against y.
"""
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class SdpaConfig:
    batch: int = 2
    seq: int = 8
    dim: int = 16
    heads: int = 4
    kv_heads: int = 2


CONFIGS = {"tiny": SdpaConfig()}


class SdpaArgs(nn.Module):
    def __init__(self, cfg: SdpaConfig, device=None):
        super().__init__()
        self.cfg = cfg
        hd = cfg.dim // cfg.heads
        self.q = nn.Linear(cfg.dim, cfg.dim, bias=False, device=device)
        self.k = nn.Linear(cfg.dim, cfg.dim, bias=False, device=device)
        self.v = nn.Linear(cfg.dim, cfg.dim, bias=False, device=device)
        self.kg = nn.Linear(cfg.dim, cfg.kv_heads * hd, bias=False, device=device)
        self.vg = nn.Linear(cfg.dim, cfg.kv_heads * hd, bias=False, device=device)
        self.o = nn.Linear(cfg.dim, cfg.dim, bias=False, device=device)
        g = torch.Generator().manual_seed(7)
        keep = torch.rand(1, 1, cfg.seq, cfg.seq, generator=g) < 0.7
        keep |= torch.eye(cfg.seq, dtype=torch.bool)  # every query keeps one key
        self.register_buffer("keep", keep.to(device))
        self.register_buffer("bias", torch.randn(1, cfg.heads, cfg.seq, cfg.seq,
                                                 generator=g).to(device))

    def heads(self, t, n):
        B, L, _ = t.shape
        return t.view(B, L, n, -1).transpose(1, 2)

    def forward(self, x, y):
        cfg = self.cfg
        q = self.heads(self.q(x), cfg.heads)
        k = self.heads(self.k(x), cfg.heads)
        v = self.heads(self.v(x), cfg.heads)
        kg = self.heads(self.kg(x), cfg.kv_heads)
        vg = self.heads(self.vg(x), cfg.kv_heads)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=self.keep, scale=0.3)
        b = F.scaled_dot_product_attention(q, kg, vg, attn_mask=self.bias, enable_gqa=True)
        c = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.5)
        out = (a + b + c).transpose(1, 2).reshape(x.shape)
        return F.mse_loss(self.o(out), y)


def input_specs(cfg: SdpaConfig, batch=None):
    b = batch or cfg.batch
    return [dict(name="x", shape=[b, cfg.seq, cfg.dim], dtype="float32"),
            dict(name="y", shape=[b, cfg.seq, cfg.dim], dtype="float32")]
