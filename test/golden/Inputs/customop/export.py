"""export.py LIBRARY OUTDIR: a model that calls a user's TORCH_LIBRARY op, traced."""
import os
import sys

import torch

torch.ops.load_library(sys.argv[1])
out = sys.argv[2]
os.makedirs(out, exist_ok=True)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = torch.ops.myops.scaled_gelu(self.fc(x), 0.5)
        return h.sum()


torch.manual_seed(0)
m = torch.jit.trace(Net(), torch.randn(4, 8), check_trace=False)
m.save(f"{out}/model.pt")
with open(f"{out}/inputs.yaml", "w") as f:
    f.write("inputs:\n  - name: x\n    shape: [4, 8]\n    dtype: float32\n")
with open(f"{out}/ops.yaml", "w") as f:
    f.write(f"libraries: [{sys.argv[1]}]\nops:\n  myops::scaled_gelu: ['* d -> * d']\n")
with open(f"{out}/misfit-ops.yaml", "w") as f:
    f.write(f"libraries: [{sys.argv[1]}]\nops:\n  myops::scaled_gelu: ['a b c -> a b c']\n")
with open(f"{out}/bad-ops.yaml", "w") as f:
    f.write(f"libraries: [{sys.argv[1]}]\nops:\n  myops::scaled_gelu: ['* d -> * e']\n")
