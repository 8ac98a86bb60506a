"""Llama-3 architecture, end to end: forward(idx, targets) -> loss.

RMSNorm, rotary position embeddings (precomputed cos/sin buffers, rotate_half form, no complex
numbers), grouped-query attention (n_kv_heads < n_heads), SwiGLU MLP (gate/up/down projections), no
biases, untied lm_head and a cross-entropy loss. Attention, with an additive causal mask, is
F.scaled_dot_product_attention where the torch has it (2.x: enable_gqa=True where it has that,
2.5+, else K/V heads repeated first), otherwise (torch 1.13) K/V heads repeated with
expand + reshape, then matmul + mask + softmax. LlamaConfig.attention ("auto", "sdpa" or
"explicit") pins a form.
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class LlamaConfig:
    dim: int = 4096
    n_layers: int = 32
    n_heads: int = 32
    n_kv_heads: int = 8
    ffn_hidden: int = 14336
    vocab_size: int = 128256
    max_seq_len: int = 8192
    norm_eps: float = 1e-5
    rope_theta: float = 500000.0
    batch: int = 1
    attention: str = "auto"  # auto (sdpa when the torch has it) | sdpa | explicit
    # How SDPA masks the future: "mask", an additive [T, T] tensor (T^2 floats, whole on every
    # device), or "flag", is_causal=True and no tensor (what long sequences need: at 128K the
    # mask alone is 64 GiB). Explicit attention always adds the mask.
    causal: str = "mask"


HAS_SDPA = hasattr(F, "scaled_dot_product_attention")


def use_sdpa(attention):
    """Whether the attention form `attention` (auto | sdpa | explicit) means SDPA here."""
    if attention not in ("auto", "sdpa", "explicit"):
        raise ValueError("attention must be auto, sdpa or explicit, not %r" % attention)
    if attention == "sdpa" and not HAS_SDPA:
        raise RuntimeError("attention=sdpa: torch %s has no "
                           "F.scaled_dot_product_attention" % torch.__version__)
    return attention == "sdpa" or (attention == "auto" and HAS_SDPA)


def sdpa_has_gqa():
    """Whether F.scaled_dot_product_attention takes enable_gqa (torch 2.5+)."""
    if not HAS_SDPA:
        return False
    q, kv = torch.zeros(1, 2, 1, 1), torch.zeros(1, 1, 1, 1)
    try:
        F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True)
    except TypeError:
        return False
    return True


CONFIGS = {
    "tiny": LlamaConfig(dim=64, n_layers=2, n_heads=4, n_kv_heads=2, ffn_hidden=128,
                        vocab_size=128, max_seq_len=32, rope_theta=10000.0, batch=2),
    # a small but non-trivial model for CPU runs
    "default": LlamaConfig(dim=256, n_layers=4, n_heads=8, n_kv_heads=4, ffn_hidden=768,
                           vocab_size=1024, max_seq_len=128, rope_theta=10000.0, batch=4),
    # Llama-3-8B shapes (export with --meta)
    "8b": LlamaConfig(),
    # Llama-3-8B at 128K tokens (export with --meta --attention sdpa: explicit attention's
    # scores alone would take 32 x 128K x 128K floats per layer; SDPA's is_causal, no mask)
    "8b-128k": LlamaConfig(max_seq_len=131072, causal="flag"),
    # Llama-3-70B shapes at 8K (export with --meta)
    "70b": LlamaConfig(dim=8192, n_layers=80, n_heads=64, n_kv_heads=8, ffn_hidden=28672),
}


class RMSNorm(nn.Module):
    def __init__(self, dim, eps, device=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim, device=device))

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return h.type_as(x) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    x1 = x[..., :half]
    x2 = x[..., half:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x, cos, sin):
    # x: (B, T, H, hd); cos/sin: (T, hd) broadcast over batch and heads
    cos = cos[None, :, None, :]
    sin = sin[None, :, None, :]
    return x * cos + rotate_half(x) * sin


def repeat_kv(x, n_rep: int):
    """(B, T, n_kv, hd) -> (B, T, n_kv * n_rep, hd)"""
    if n_rep == 1:
        return x
    B, T, n_kv, hd = x.shape
    return x[:, :, :, None, :].expand(B, T, n_kv, n_rep, hd).reshape(B, T, n_kv * n_rep, hd)


class Attention(nn.Module):
    def __init__(self, cfg: LlamaConfig, device=None):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.n_kv_heads = cfg.n_kv_heads
        self.n_rep = cfg.n_heads // cfg.n_kv_heads
        self.head_dim = cfg.dim // cfg.n_heads
        hd = self.head_dim
        self.q_proj = nn.Linear(cfg.dim, cfg.n_heads * hd, bias=False, device=device)
        self.k_proj = nn.Linear(cfg.dim, cfg.n_kv_heads * hd, bias=False, device=device)
        self.v_proj = nn.Linear(cfg.dim, cfg.n_kv_heads * hd, bias=False, device=device)
        self.o_proj = nn.Linear(cfg.n_heads * hd, cfg.dim, bias=False, device=device)
        self.sdpa = use_sdpa(cfg.attention)
        self.gqa = self.sdpa and self.n_rep > 1 and sdpa_has_gqa()

    def forward(self, x, cos, sin, mask):
        B, T, _ = x.shape
        hd = self.head_dim
        q = self.q_proj(x).view(B, T, self.n_heads, hd)
        k = self.k_proj(x).view(B, T, self.n_kv_heads, hd)
        v = self.v_proj(x).view(B, T, self.n_kv_heads, hd)
        q = apply_rope(q, cos, sin)
        k = apply_rope(k, cos, sin)
        if not self.gqa:
            k = repeat_kv(k, self.n_rep)
            v = repeat_kv(v, self.n_rep)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, H|n_kv, T, hd)
        if self.sdpa:
            gqa = {"enable_gqa": True} if self.gqa else {}
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None,
                                                 **gqa)
            return self.o_proj(out.transpose(1, 2).contiguous().view(B, T, -1))
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(hd)
        scores = scores + mask  # (T, T) additive causal mask
        probs = F.softmax(scores.float(), dim=-1).type_as(q)
        out = torch.matmul(probs, v)  # (B, H, T, hd)
        out = out.transpose(1, 2).contiguous().view(B, T, -1)
        return self.o_proj(out)


class FeedForward(nn.Module):
    def __init__(self, cfg: LlamaConfig, device=None):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.dim, cfg.ffn_hidden, bias=False, device=device)
        self.up_proj = nn.Linear(cfg.dim, cfg.ffn_hidden, bias=False, device=device)
        self.down_proj = nn.Linear(cfg.ffn_hidden, cfg.dim, bias=False, device=device)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class TransformerBlock(nn.Module):
    def __init__(self, cfg: LlamaConfig, device=None):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.dim, cfg.norm_eps, device=device)
        self.self_attn = Attention(cfg, device=device)
        self.post_attention_layernorm = RMSNorm(cfg.dim, cfg.norm_eps, device=device)
        self.mlp = FeedForward(cfg, device=device)

    def forward(self, x, cos, sin, mask):
        h = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return h + self.mlp(self.post_attention_layernorm(h))


def rope_tables(head_dim, max_seq_len, theta, device=None):
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32,
                                             device=device) / head_dim))
    t = torch.arange(max_seq_len, dtype=torch.float32, device=device)
    freqs = torch.outer(t, inv_freq)  # (S, hd/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (S, hd)
    return emb.cos(), emb.sin()


class Llama(nn.Module):
    def __init__(self, cfg: LlamaConfig, device=None):
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.dim, device=device)
        self.layers = nn.ModuleList([TransformerBlock(cfg, device=device)
                                     for _ in range(cfg.n_layers)])
        self.norm = RMSNorm(cfg.dim, cfg.norm_eps, device=device)
        self.lm_head = nn.Linear(cfg.dim, cfg.vocab_size, bias=False, device=device)
        cos, sin = rope_tables(cfg.dim // cfg.n_heads, cfg.max_seq_len, cfg.rope_theta,
                               device=device)
        self.register_buffer("rope_cos", cos)
        self.register_buffer("rope_sin", sin)
        if device is None or torch.device(device).type != "meta":
            self.apply(self._init_weights)

    @staticmethod
    def _init_weights(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets):
        B, T = idx.shape
        h = self.embed_tokens(idx)
        cos = self.rope_cos[:T]
        sin = self.rope_sin[:T]
        mask = None
        if self.cfg.causal != "flag" or not self.layers[0].self_attn.sdpa:
            mask = torch.full((T, T), float("-inf"), device=idx.device).triu(1)
        for layer in self.layers:
            h = layer(h, cos, sin, mask)
        logits = self.lm_head(self.norm(h)).float()
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return loss


def input_specs(cfg: LlamaConfig, batch=None):
    b = batch or cfg.batch
    return [
        dict(name="idx", shape=[b, cfg.max_seq_len], dtype="int64", range=[0, cfg.vocab_size]),
        dict(name="targets", shape=[b, cfg.max_seq_len], dtype="int64",
             range=[0, cfg.vocab_size]),
    ]
