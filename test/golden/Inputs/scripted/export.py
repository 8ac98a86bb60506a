"""export.py OUTDIR: a torch.jit.script model with a static branch, a loop over
a ModuleList and in-place updates (for the SSA and control-flow golden test)."""
import os
import sys

import torch
import torch.nn as nn


class Layer(nn.Module):
    def __init__(self, use_bias: bool):
        super().__init__()
        self.fc = nn.Linear(8, 8, bias=use_bias)
        self.use_bias = use_bias

    def forward(self, x):
        y = self.fc(x)
        if self.use_bias:
            y = torch.relu(y)
        else:
            y = torch.tanh(y)
        y.add_(1.0)
        return y


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([Layer(True), Layer(False)])

    def forward(self, x, y):
        for layer in self.layers:
            x = layer(x)
        loss = ((x - y) ** 2).mean()
        return loss, x


out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)
m = torch.jit.script(Net())
m.save(f"{out}/model.pt")
torch.save(m.state_dict(), f"{out}/state_dict.pt")
with open(f"{out}/inputs.yaml", "w") as f:
    f.write("inputs:\n  - name: x\n    shape: [4, 8]\n    dtype: float32\n"
            "  - name: y\n    shape: [4, 8]\n    dtype: float32\n")
