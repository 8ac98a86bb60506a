"""A tiny classifier with BatchNorm1d, for the buffer parity tests: x [B, 16] ->
Linear(16, 32, no bias) -> BatchNorm1d(32) -> ReLU -> Linear(32, 8) -> cross entropy with
y [B]. In training BatchNorm updates running_mean and running_var inside its kernel
and num_batches_tracked with an in-place add."""
from dataclasses import dataclass

import torch.nn as nn
import torch.nn.functional as F


@dataclass
class BnConfig:
    features: int = 16
    hidden: int = 32
    classes: int = 8
    batch: int = 8


CONFIGS = {"tiny": BnConfig()}


class BnMlp(nn.Module):
    def __init__(self, cfg: BnConfig):
        super().__init__()
        self.fc1 = nn.Linear(cfg.features, cfg.hidden, bias=False)  # BatchNorm adds its own
        self.bn = nn.BatchNorm1d(cfg.hidden)
        self.fc2 = nn.Linear(cfg.hidden, cfg.classes)

    def forward(self, x, y):
        logits = self.fc2(F.relu(self.bn(self.fc1(x))))
        return F.cross_entropy(logits, y)


def input_specs(cfg: BnConfig, batch=None):
    b = batch or cfg.batch
    return [{"name": "x", "shape": [b, cfg.features], "dtype": "float32"},
            {"name": "y", "shape": [b], "dtype": "int64", "range": [0, cfg.classes]}]
