"""A small U-Net for per-pixel classification: forward(x, y) returns the loss.

Encoder levels of double conv3x3-GroupNorm-ReLU, each followed by 2x2 max pooling; a
bottleneck; decoder levels that upsample (a stride-2 transposed conv on the deepest level,
bilinear interpolation + conv1x1 on the next), concatenate the encoder's feature map of the
same resolution (the skip) and apply a double conv; a 1x1 conv to class logits and a
per-pixel cross-entropy.
"""
from dataclasses import dataclass, field
from typing import List

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class UNetConfig:
    image: int = 16
    in_chans: int = 3
    widths: List[int] = field(default_factory=lambda: [8, 16, 32])
    groups: int = 4
    n_classes: int = 4
    batch: int = 2


CONFIGS = {"tiny": UNetConfig()}


class DoubleConv(nn.Module):
    def __init__(self, cin, cout, groups, device=None):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1, bias=False, device=device)
        self.norm1 = nn.GroupNorm(groups, cout, device=device)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False, device=device)
        self.norm2 = nn.GroupNorm(groups, cout, device=device)

    def forward(self, x):
        x = F.relu(self.norm1(self.conv1(x)))
        return F.relu(self.norm2(self.conv2(x)))


class Up(nn.Module):
    """Upsample 2x to `cout` channels, concatenate the skip, double conv."""

    def __init__(self, cin, cout, groups, transposed, device=None):
        super().__init__()
        self.transposed = transposed
        if transposed:
            self.up = nn.ConvTranspose2d(cin, cout, 2, stride=2, device=device)
        else:
            self.up = nn.Conv2d(cin, cout, 1, device=device)
        self.conv = DoubleConv(2 * cout, cout, groups, device)

    def forward(self, x, skip):
        if self.transposed:
            x = self.up(x)
        else:
            x = self.up(F.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=False))
        return self.conv(torch.cat([skip, x], dim=1))


class UNet(nn.Module):
    def __init__(self, cfg: UNetConfig, device=None):
        super().__init__()
        w, g = cfg.widths, cfg.groups
        self.down = nn.ModuleList()
        cin = cfg.in_chans
        for width in w[:-1]:
            self.down.append(DoubleConv(cin, width, g, device))
            cin = width
        self.bottleneck = DoubleConv(cin, w[-1], g, device)
        self.up = nn.ModuleList()
        for i in reversed(range(len(w) - 1)):
            deepest = i == len(w) - 2
            self.up.append(Up(w[i + 1], w[i], g, transposed=deepest, device=device))
        self.out = nn.Conv2d(w[0], cfg.n_classes, 1, device=device)

    def forward(self, x, y):
        skips = []
        for level in self.down:
            x = level(x)
            skips.append(x)
            x = F.max_pool2d(x, 2)
        x = self.bottleneck(x)
        for level, skip in zip(self.up, reversed(skips)):
            x = level(x, skip)
        return F.cross_entropy(self.out(x), y)


def build(cfg, device=None):
    return UNet(cfg, device)


def input_specs(cfg: UNetConfig, batch=None):
    b = batch or cfg.batch
    return [
        dict(name="x", shape=[b, cfg.in_chans, cfg.image, cfg.image], dtype="float32",
             range=[-1, 1]),
        dict(name="y", shape=[b, cfg.image, cfg.image], dtype="int64", range=[0, cfg.n_classes]),
    ]
