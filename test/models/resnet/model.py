"""A ResNet-style image classifier, end to end: forward(x, y) returns the loss.

Stem conv3x3-BN-ReLU, then stages of basic residual blocks (two conv3x3-BN, ReLU after the
sum); the first block of a later stage halves the resolution with a strided conv and its
shortcut downsamples with a strided conv1x1-BN. Adaptive average pooling to 1x1, a linear
head and cross-entropy. BatchNorm in training mode: batch statistics, running_mean/var and
num_batches_tracked updated by every forward.
"""
from dataclasses import dataclass, field
from typing import List

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class ResNetConfig:
    image: int = 16
    in_chans: int = 3
    widths: List[int] = field(default_factory=lambda: [8, 16])
    blocks: List[int] = field(default_factory=lambda: [1, 1])
    n_classes: int = 10
    batch: int = 4


CONFIGS = {"tiny": ResNetConfig()}


def conv_bn(cin, cout, k, stride, device):
    return nn.Sequential(
        nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False, device=device),
        nn.BatchNorm2d(cout, device=device))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride, device=None):
        super().__init__()
        self.conv1 = conv_bn(cin, cout, 3, stride, device)
        self.conv2 = conv_bn(cout, cout, 3, 1, device)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = conv_bn(cin, cout, 1, stride, device)

    def forward(self, x):
        shortcut = x if self.downsample is None else self.downsample(x)
        h = F.relu(self.conv1(x))
        return F.relu(self.conv2(h) + shortcut)


class ResNet(nn.Module):
    def __init__(self, cfg: ResNetConfig, device=None):
        super().__init__()
        self.stem = conv_bn(cfg.in_chans, cfg.widths[0], 3, 1, device)
        stages, cin = [], cfg.widths[0]
        for i, (width, n) in enumerate(zip(cfg.widths, cfg.blocks)):
            blocks = []
            for j in range(n):
                stride = 2 if i > 0 and j == 0 else 1
                blocks.append(BasicBlock(cin, width, stride, device))
                cin = width
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.Sequential(*stages)
        self.head = nn.Linear(cin, cfg.n_classes, device=device)

    def forward(self, x, y):
        h = F.relu(self.stem(x))
        h = self.stages(h)
        h = F.adaptive_avg_pool2d(h, 1).flatten(1)
        logits = self.head(h)
        return F.cross_entropy(logits, y)


def build(cfg, device=None):
    return ResNet(cfg, device)


def input_specs(cfg: ResNetConfig, batch=None):
    b = batch or cfg.batch
    return [
        dict(name="x", shape=[b, cfg.in_chans, cfg.image, cfg.image], dtype="float32",
             range=[-1, 1]),
        dict(name="y", shape=[b], dtype="int64", range=[0, cfg.n_classes]),
    ]
