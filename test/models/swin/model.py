"""A Swin-style windowed-attention transformer classifier: forward(x, y) returns the loss.

Patch embedding by a strided conv; stages of blocks that attend within non-overlapping
windows (window partition/reverse by view + permute), every second block on windows shifted
by half a window (torch.roll), with the attention mask of the shifted windows built in the
forward by writing region ids into slices of a zero tensor in place; a relative position bias
per head read from a learned table by a precomputed index buffer; stochastic depth (drop path:
a per-sample bernoulli keep mask); patch merging between stages; mean pooling, linear head,
cross-entropy.

Drop path runs whenever the model trains, whatever its rate, so the graph holds the bernoulli
at rate 0 too: a keep probability of 1 draws all ones, which keeps parity runs exact.
"""
from dataclasses import dataclass, field
from typing import List

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class SwinConfig:
    image: int = 16
    patch: int = 2
    in_chans: int = 3
    dim: int = 16
    depths: List[int] = field(default_factory=lambda: [2, 1])
    heads: List[int] = field(default_factory=lambda: [2, 4])
    window: int = 4
    mlp_ratio: int = 2
    drop_path: float = 0.0
    n_classes: int = 10
    batch: int = 4


CONFIGS = {"tiny": SwinConfig()}


def window_partition(x, ws: int):
    """[B, H, W, C] -> [B * H/ws * W/ws, ws * ws, C]."""
    B, H, W, C = x.shape
    x = x.view(B, H // ws, ws, W // ws, ws, C)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, ws * ws, C)


def window_reverse(windows, ws: int, H: int, W: int):
    """[B * H/ws * W/ws, ws * ws, C] -> [B, H, W, C]."""
    C = windows.shape[-1]
    x = windows.view(-1, H // ws, W // ws, ws, ws, C)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, H, W, C)


def drop_path(x, p: float, training: bool):
    """Zeroes whole samples of the residual branch with probability p (scaled by 1/(1-p))."""
    if not training:
        return x
    keep = 1.0 - p
    mask = x.new_empty((x.shape[0],) + (1,) * (x.dim() - 1)).bernoulli_(keep)
    return x * mask / keep


def relative_position_index(ws: int):
    """[ws*ws, ws*ws] index into the (2ws-1)^2 table of relative offsets."""
    coords = torch.stack(torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij"))
    flat = coords.flatten(1)                                  # [2, N]
    rel = (flat[:, :, None] - flat[:, None, :]).permute(1, 2, 0).contiguous()  # [N, N, 2]
    rel[:, :, 0] += ws - 1
    rel[:, :, 1] += ws - 1
    rel[:, :, 0] *= 2 * ws - 1
    return rel.sum(-1)


class WindowAttention(nn.Module):
    def __init__(self, dim, heads, ws, device=None):
        super().__init__()
        self.heads = heads
        self.ws = ws
        self.scale = (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, 3 * dim, bias=False, device=device)  # no key bias: vit/model.py
        self.proj = nn.Linear(dim, dim, device=device)
        self.bias_table = nn.Parameter(torch.zeros((2 * ws - 1) ** 2, heads, device=device))
        if device != "meta":
            nn.init.normal_(self.bias_table, std=0.02)
        self.register_buffer("bias_index", relative_position_index(ws).to(device))

    def forward(self, x, mask=None):
        Bw, N, C = x.shape
        qkv = self.qkv(x).view(Bw, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = (q * self.scale) @ k.transpose(-2, -1)                      # [Bw, h, N, N]
        bias = self.bias_table[self.bias_index.view(-1)].view(N, N, -1)
        att = att + bias.permute(2, 0, 1).contiguous().unsqueeze(0)
        if mask is not None:
            nw = mask.shape[0]
            att = att.view(Bw // nw, nw, self.heads, N, N) + mask.unsqueeze(1).unsqueeze(0)
            att = att.view(-1, self.heads, N, N)
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(Bw, N, C)
        return self.proj(y)


class SwinBlock(nn.Module):
    def __init__(self, dim, heads, resolution, ws, shift, cfg: SwinConfig, device=None):
        super().__init__()
        self.resolution = resolution
        self.ws = min(ws, resolution)
        self.shift = 0 if resolution <= ws else shift
        self.drop_prob = cfg.drop_path
        self.norm1 = nn.LayerNorm(dim, device=device)
        self.attn = WindowAttention(dim, heads, self.ws, device)
        self.norm2 = nn.LayerNorm(dim, device=device)
        self.fc1 = nn.Linear(dim, cfg.mlp_ratio * dim, device=device)
        self.fc2 = nn.Linear(cfg.mlp_ratio * dim, dim, device=device)

    def shift_mask(self, x):
        """[nW, N, N]: 0 within a region of the shifted image, -100 across regions."""
        H = W = self.resolution
        ws, s = self.ws, self.shift
        img_mask = x.new_zeros((1, H, W, 1))
        cnt = 0
        for h0, h1 in ((0, H - ws), (H - ws, H - s), (H - s, H)):
            for w0, w1 in ((0, W - ws), (W - ws, W - s), (W - s, W)):
                img_mask[:, h0:h1, w0:w1, :] = cnt
                cnt += 1
        windows = window_partition(img_mask, ws).squeeze(-1)            # [nW, N]
        diff = windows.unsqueeze(1) - windows.unsqueeze(2)
        return diff.masked_fill(diff != 0, -100.0).masked_fill(diff == 0, 0.0)

    def forward(self, x):
        B, L, C = x.shape
        H = W = self.resolution
        h = self.norm1(x).view(B, H, W, C)
        mask = None
        if self.shift > 0:
            h = torch.roll(h, shifts=(-self.shift, -self.shift), dims=(1, 2))
            mask = self.shift_mask(x)
        h = self.attn(window_partition(h, self.ws), mask)
        h = window_reverse(h, self.ws, H, W)
        if self.shift > 0:
            h = torch.roll(h, shifts=(self.shift, self.shift), dims=(1, 2))
        x = x + drop_path(h.reshape(B, L, C), self.drop_prob, self.training)
        h = self.fc2(F.gelu(self.fc1(self.norm2(x))))
        return x + drop_path(h, self.drop_prob, self.training)


class PatchMerging(nn.Module):
    """[B, H*W, C] -> [B, H/2*W/2, 2C]: concatenate 2x2 neighbours, LayerNorm, Linear."""

    def __init__(self, dim, resolution, device=None):
        super().__init__()
        self.resolution = resolution
        self.norm = nn.LayerNorm(4 * dim, device=device)
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False, device=device)

    def forward(self, x):
        B, L, C = x.shape
        x = x.view(B, self.resolution, self.resolution, C)
        x = torch.cat([x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]],
                      dim=-1)
        return self.reduction(self.norm(x.view(B, -1, 4 * C)))


class Swin(nn.Module):
    def __init__(self, cfg: SwinConfig, device=None):
        super().__init__()
        res, dim = cfg.image // cfg.patch, cfg.dim
        self.patch_embed = nn.Conv2d(cfg.in_chans, dim, cfg.patch, stride=cfg.patch,
                                     device=device)
        self.embed_norm = nn.LayerNorm(dim, device=device)
        layers = []
        for i, (depth, heads) in enumerate(zip(cfg.depths, cfg.heads)):
            if i > 0:
                layers.append(PatchMerging(dim, res, device))
                res, dim = res // 2, dim * 2
            for j in range(depth):
                shift = cfg.window // 2 if j % 2 == 1 else 0
                layers.append(SwinBlock(dim, heads, res, cfg.window, shift, cfg, device))
        self.layers = nn.Sequential(*layers)
        self.norm = nn.LayerNorm(dim, device=device)
        self.head = nn.Linear(dim, cfg.n_classes, device=device)

    def forward(self, x, y):
        h = self.patch_embed(x).flatten(2).transpose(1, 2)
        h = self.layers(self.embed_norm(h))
        logits = self.head(self.norm(h).mean(1))
        return F.cross_entropy(logits, y)


def build(cfg, device=None):
    return Swin(cfg, device)


def input_specs(cfg: SwinConfig, batch=None):
    b = batch or cfg.batch
    return [
        dict(name="x", shape=[b, cfg.in_chans, cfg.image, cfg.image], dtype="float32",
             range=[-1, 1]),
        dict(name="y", shape=[b], dtype="int64", range=[0, cfg.n_classes]),
    ]
