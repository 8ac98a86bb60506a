"""An encoder-decoder transformer (sequence to sequence): forward(src, tgt, labels) -> loss.

Source and target token embeddings plus learned positions; pre-norm encoder layers
(bidirectional self-attention, GELU MLP) and pre-norm decoder layers (causal self-attention,
cross-attention whose keys and values come from the encoder's output, GELU MLP); final
LayerNorms, a linear head over the target vocabulary and cross-entropy against `labels`
(the target shifted by one). Attention is explicit: matmul + (mask) + softmax.

The key projections have no bias (as Whisper's): a key bias adds q.b_k to every score of a
query, which softmax ignores, so its gradient is zero up to rounding, and AdamW's g/sqrt(v)
turns that rounding into full-size steps that no parity tolerance can hold.
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class EncDecConfig:
    src_vocab: int = 32
    tgt_vocab: int = 32
    src_len: int = 8
    tgt_len: int = 8
    dim: int = 32
    heads: int = 2
    enc_layers: int = 1
    dec_layers: int = 1
    mlp_ratio: int = 2
    batch: int = 4


CONFIGS = {"tiny": EncDecConfig()}


class MultiHeadAttention(nn.Module):
    """Queries from x, keys and values from `memory` (x itself for self-attention)."""

    def __init__(self, dim, heads, causal_len=0, device=None):
        super().__init__()
        self.heads = heads
        self.q_proj = nn.Linear(dim, dim, device=device)
        self.k_proj = nn.Linear(dim, dim, bias=False, device=device)  # as Whisper: see below
        self.v_proj = nn.Linear(dim, dim, device=device)
        self.o_proj = nn.Linear(dim, dim, device=device)
        self.causal = causal_len > 0
        if self.causal:
            mask = torch.tril(torch.ones(causal_len, causal_len, device=device))
            self.register_buffer("mask", mask.view(1, 1, causal_len, causal_len))

    def forward(self, x, memory):
        B, T, C = x.size()
        S = memory.size(1)
        hd = C // self.heads
        q = self.q_proj(x).view(B, T, self.heads, hd).transpose(1, 2)
        k = self.k_proj(memory).view(B, S, self.heads, hd).transpose(1, 2)
        v = self.v_proj(memory).view(B, S, self.heads, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        if self.causal:
            att = att.masked_fill(self.mask[:, :, :T, :S] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.o_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Mlp(nn.Module):
    def __init__(self, dim, hidden, device=None):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden, device=device)
        self.fc2 = nn.Linear(hidden, dim, device=device)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class EncoderLayer(nn.Module):
    def __init__(self, cfg: EncDecConfig, device=None):
        super().__init__()
        self.norm1 = nn.LayerNorm(cfg.dim, device=device)
        self.self_attn = MultiHeadAttention(cfg.dim, cfg.heads, device=device)
        self.norm2 = nn.LayerNorm(cfg.dim, device=device)
        self.mlp = Mlp(cfg.dim, cfg.mlp_ratio * cfg.dim, device)

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.self_attn(h, h)
        return x + self.mlp(self.norm2(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: EncDecConfig, device=None):
        super().__init__()
        self.norm1 = nn.LayerNorm(cfg.dim, device=device)
        self.self_attn = MultiHeadAttention(cfg.dim, cfg.heads, cfg.tgt_len, device)
        self.norm2 = nn.LayerNorm(cfg.dim, device=device)
        self.cross_attn = MultiHeadAttention(cfg.dim, cfg.heads, device=device)
        self.norm3 = nn.LayerNorm(cfg.dim, device=device)
        self.mlp = Mlp(cfg.dim, cfg.mlp_ratio * cfg.dim, device)

    def forward(self, x, memory):
        h = self.norm1(x)
        x = x + self.self_attn(h, h)
        x = x + self.cross_attn(self.norm2(x), memory)
        return x + self.mlp(self.norm3(x))


class EncoderDecoder(nn.Module):
    def __init__(self, cfg: EncDecConfig, device=None):
        super().__init__()
        self.src_embed = nn.Embedding(cfg.src_vocab, cfg.dim, device=device)
        self.tgt_embed = nn.Embedding(cfg.tgt_vocab, cfg.dim, device=device)
        self.src_pos = nn.Embedding(cfg.src_len, cfg.dim, device=device)
        self.tgt_pos = nn.Embedding(cfg.tgt_len, cfg.dim, device=device)
        self.encoder = nn.ModuleList([EncoderLayer(cfg, device) for _ in range(cfg.enc_layers)])
        self.enc_norm = nn.LayerNorm(cfg.dim, device=device)
        self.decoder = nn.ModuleList([DecoderLayer(cfg, device) for _ in range(cfg.dec_layers)])
        self.dec_norm = nn.LayerNorm(cfg.dim, device=device)
        self.head = nn.Linear(cfg.dim, cfg.tgt_vocab, bias=False, device=device)

    def forward(self, src, tgt, labels):
        src_pos = torch.arange(src.size(1), dtype=torch.long, device=src.device)
        tgt_pos = torch.arange(tgt.size(1), dtype=torch.long, device=tgt.device)
        memory = self.src_embed(src) + self.src_pos(src_pos)
        for layer in self.encoder:
            memory = layer(memory)
        memory = self.enc_norm(memory)
        x = self.tgt_embed(tgt) + self.tgt_pos(tgt_pos)
        for layer in self.decoder:
            x = layer(x, memory)
        logits = self.head(self.dec_norm(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1))


def build(cfg, device=None):
    return EncoderDecoder(cfg, device)


def input_specs(cfg: EncDecConfig, batch=None):
    b = batch or cfg.batch
    return [
        dict(name="src", shape=[b, cfg.src_len], dtype="int64", range=[0, cfg.src_vocab]),
        dict(name="tgt", shape=[b, cfg.tgt_len], dtype="int64", range=[0, cfg.tgt_vocab]),
        dict(name="labels", shape=[b, cfg.tgt_len], dtype="int64", range=[0, cfg.tgt_vocab]),
    ]
