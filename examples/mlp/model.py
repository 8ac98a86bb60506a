"""A plain multi-layer perceptron classifier, end to end: forward(x, y) returns the loss."""
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class MLPConfig:
    in_features: int = 1024
    hidden: int = 4096
    n_classes: int = 1000
    batch: int = 64
    dropout: float = 0.1


CONFIGS = {
    "tiny": MLPConfig(in_features=16, hidden=32, n_classes=8, batch=4, dropout=0.0),
    "default": MLPConfig(),
}


class MLP(nn.Module):
    """Four Linear layers: fc1 -> GELU -> fc2 -> ReLU -> fc3 -> GELU -> head, cross-entropy loss."""

    def __init__(self, cfg: MLPConfig, device=None):
        super().__init__()
        self.fc1 = nn.Linear(cfg.in_features, cfg.hidden, device=device)
        self.fc2 = nn.Linear(cfg.hidden, cfg.hidden, device=device)
        self.fc3 = nn.Linear(cfg.hidden, cfg.hidden, device=device)
        self.head = nn.Linear(cfg.hidden, cfg.n_classes, device=device)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x, y):
        h = F.gelu(self.fc1(x))
        h = F.relu(self.fc2(h))
        h = self.drop(F.gelu(self.fc3(h)))
        logits = self.head(h)
        loss = F.cross_entropy(logits, y)
        return loss


def input_specs(cfg: MLPConfig, batch=None):
    b = batch or cfg.batch
    return [
        dict(name="x", shape=[b, cfg.in_features], dtype="float32", range=[-1, 1]),
        dict(name="y", shape=[b], dtype="int64", range=[0, cfg.n_classes]),
    ]
