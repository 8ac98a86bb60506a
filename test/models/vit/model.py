"""A Vision Transformer classifier, end to end: forward(x, y) returns the loss.

Patch embedding by a strided conv, a learned class token prepended, a learned position
embedding added, pre-norm blocks (multi-head self-attention with a fused qkv projection
without bias: matmul + softmax; GELU MLP), a final LayerNorm and a linear head on the class token,
cross-entropy.

No bias on qkv (timm's qkv_bias=False): a key bias adds q.b_k to every score of a query, which
softmax ignores, so its gradient is zero up to rounding -- and AdamW's g/sqrt(v) turns that
rounding into full-size steps, which no parity tolerance can hold.
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class ViTConfig:
    image: int = 16
    patch: int = 4
    in_chans: int = 3
    dim: int = 32
    depth: int = 2
    heads: int = 2
    mlp_ratio: int = 2
    n_classes: int = 10
    batch: int = 4


CONFIGS = {"tiny": ViTConfig()}


class Attention(nn.Module):
    def __init__(self, dim, heads, device=None):
        super().__init__()
        self.heads = heads
        self.dim = dim
        self.qkv = nn.Linear(dim, 3 * dim, bias=False, device=device)  # see the module doc
        self.proj = nn.Linear(dim, dim, device=device)

    def forward(self, x):
        B, N, C = x.size()
        hd = C // self.heads
        q, k, v = self.qkv(x).split(self.dim, dim=2)
        q = q.view(B, N, self.heads, hd).transpose(1, 2)
        k = k.view(B, N, self.heads, hd).transpose(1, 2)
        v = v.view(B, N, self.heads, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, N, C)
        return self.proj(y)


class Mlp(nn.Module):
    def __init__(self, dim, hidden, device=None):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden, device=device)
        self.fc2 = nn.Linear(hidden, dim, device=device)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, cfg: ViTConfig, device=None):
        super().__init__()
        self.norm1 = nn.LayerNorm(cfg.dim, device=device)
        self.attn = Attention(cfg.dim, cfg.heads, device)
        self.norm2 = nn.LayerNorm(cfg.dim, device=device)
        self.mlp = Mlp(cfg.dim, cfg.mlp_ratio * cfg.dim, device)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class ViT(nn.Module):
    def __init__(self, cfg: ViTConfig, device=None):
        super().__init__()
        n_patches = (cfg.image // cfg.patch) ** 2
        self.patch_embed = nn.Conv2d(cfg.in_chans, cfg.dim, cfg.patch, stride=cfg.patch,
                                     device=device)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, cfg.dim, device=device))
        self.pos_embed = nn.Parameter(torch.zeros(1, n_patches + 1, cfg.dim, device=device))
        if device != "meta":
            nn.init.normal_(self.cls_token, std=0.02)
            nn.init.normal_(self.pos_embed, std=0.02)
        self.blocks = nn.ModuleList([Block(cfg, device) for _ in range(cfg.depth)])
        self.norm = nn.LayerNorm(cfg.dim, device=device)
        self.head = nn.Linear(cfg.dim, cfg.n_classes, device=device)

    def forward(self, x, y):
        h = self.patch_embed(x).flatten(2).transpose(1, 2)  # [B, N, C]
        cls = self.cls_token.expand(h.size(0), -1, -1)
        h = torch.cat([cls, h], dim=1) + self.pos_embed
        for block in self.blocks:
            h = block(h)
        h = self.norm(h)
        logits = self.head(h[:, 0])
        return F.cross_entropy(logits, y)


def build(cfg, device=None):
    return ViT(cfg, device)


def input_specs(cfg: ViTConfig, batch=None):
    b = batch or cfg.batch
    return [
        dict(name="x", shape=[b, cfg.in_chans, cfg.image, cfg.image], dtype="float32",
             range=[-1, 1]),
        dict(name="y", shape=[b], dtype="int64", range=[0, cfg.n_classes]),
    ]
