"""GPT in the style of Karpathy's nanoGPT, end to end: forward(idx, targets) -> (loss, logits).

Token + learned position embeddings, n_layer pre-LayerNorm blocks (causal self-attention, GELU
MLP), a final LayerNorm and an lm_head whose weight is tied to the token embedding.
Attention is F.scaled_dot_product_attention(is_causal=True) where the torch has it (2.x), as
nanoGPT does; otherwise (torch 1.13) matmul + masked_fill + softmax over a registered
lower-triangular `bias` buffer. GPTConfig.attention ("auto", "sdpa" or "explicit") pins a form.
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class GPTConfig:
    block_size: int = 256
    vocab_size: int = 65
    n_layer: int = 6
    n_head: int = 6
    n_embd: int = 384
    dropout: float = 0.2
    bias: bool = False
    batch: int = 8
    attention: str = "auto"  # auto (sdpa when the torch has it) | sdpa | explicit


HAS_SDPA = hasattr(F, "scaled_dot_product_attention")


def use_sdpa(attention):
    """Whether the attention form `attention` (auto | sdpa | explicit) means SDPA here."""
    if attention not in ("auto", "sdpa", "explicit"):
        raise ValueError("attention must be auto, sdpa or explicit, not %r" % attention)
    if attention == "sdpa" and not HAS_SDPA:
        raise RuntimeError("attention=sdpa: torch %s has no "
                           "F.scaled_dot_product_attention" % torch.__version__)
    return attention == "sdpa" or (attention == "auto" and HAS_SDPA)


CONFIGS = {
    # the char-level shakespeare setting (train_shakespeare_char)
    "default": GPTConfig(),
    # the README's main job: trains a few hundred steps on 2 CPU processes in about a minute
    "small": GPTConfig(block_size=64, vocab_size=65, n_layer=4, n_head=4, n_embd=128,
                       dropout=0.0, bias=False, batch=8),
    # small enough for unit tests
    "tiny": GPTConfig(block_size=32, vocab_size=65, n_layer=2, n_head=2, n_embd=32,
                      dropout=0.0, bias=False, batch=2),
    # GPT-2 small shapes
    "gpt2": GPTConfig(block_size=1024, vocab_size=50304, n_layer=12, n_head=12, n_embd=768,
                      dropout=0.0, bias=True, batch=4),
}


class LayerNorm(nn.Module):
    """LayerNorm whose bias can be switched off."""

    def __init__(self, ndim, bias, device=None):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim, device=device))
        self.bias = nn.Parameter(torch.zeros(ndim, device=device)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig, device=None):
        super().__init__()
        assert cfg.n_embd % cfg.n_head == 0
        self.n_head = cfg.n_head
        self.n_embd = cfg.n_embd
        self.head_dim = cfg.n_embd // cfg.n_head
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=cfg.bias, device=device)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=cfg.bias, device=device)
        self.attn_dropout = nn.Dropout(cfg.dropout)
        self.resid_dropout = nn.Dropout(cfg.dropout)
        self.dropout = cfg.dropout
        self.flash = use_sdpa(cfg.attention)
        if not self.flash:
            mask = torch.tril(torch.ones(cfg.block_size, cfg.block_size, device=device))
            self.register_buffer("bias", mask.view(1, 1, cfg.block_size, cfg.block_size))

    def forward(self, x):
        B, T, C = x.size()
        hs = self.head_dim
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        # (B, T, C) -> (B, nh, T, hs)
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        if self.flash:
            y = F.scaled_dot_product_attention(
                q, k, v, attn_mask=None, dropout_p=self.dropout if self.training else 0.0,
                is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig, device=None):
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=cfg.bias, device=device)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=cfg.bias, device=device)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig, device=None):
        super().__init__()
        self.ln_1 = LayerNorm(cfg.n_embd, cfg.bias, device=device)
        self.attn = CausalSelfAttention(cfg, device=device)
        self.ln_2 = LayerNorm(cfg.n_embd, cfg.bias, device=device)
        self.mlp = MLP(cfg, device=device)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig, device=None):
        super().__init__()
        self.cfg = cfg
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(cfg.vocab_size, cfg.n_embd, device=device),
            wpe=nn.Embedding(cfg.block_size, cfg.n_embd, device=device),
            drop=nn.Dropout(cfg.dropout),
            h=nn.ModuleList([Block(cfg, device=device) for _ in range(cfg.n_layer)]),
            ln_f=LayerNorm(cfg.n_embd, cfg.bias, device=device),
        ))
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False, device=device)
        # weight tying: one Parameter shared by the embedding and the output projection
        self.transformer.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)
        # GPT-2 style scaled init of the residual projections
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init_weights(m):
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets):
        B, T = idx.size()
        pos = torch.arange(0, T, dtype=torch.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        logits = self.lm_head(x)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return loss, logits


def input_specs(cfg: GPTConfig, batch=None):
    b = batch or cfg.batch
    return [
        dict(name="idx", shape=[b, cfg.block_size], dtype="int64", range=[0, cfg.vocab_size]),
        dict(name="targets", shape=[b, cfg.block_size], dtype="int64",
             range=[0, cfg.vocab_size]),
    ]


# GPT-3 shapes of Alpa's benchmark suite (the GPT-3 paper's table 2.1): sequence 1024, vocabulary
# 51200; planned on the meta device (bench/autodist.py), never trained here. Kept at the end so
# that the line numbers above, which messages and tests quote, stay put.
CONFIGS.update({
    "gpt3-1.3b": GPTConfig(block_size=1024, vocab_size=51200, n_layer=24, n_head=32,
                           n_embd=2048, dropout=0.0, bias=True, batch=8),
    "gpt3-2.6b": GPTConfig(block_size=1024, vocab_size=51200, n_layer=32, n_head=32,
                           n_embd=2560, dropout=0.0, bias=True, batch=8),
    "gpt3-6.7b": GPTConfig(block_size=1024, vocab_size=51200, n_layer=32, n_head=32,
                           n_embd=4096, dropout=0.0, bias=True, batch=8),
})
