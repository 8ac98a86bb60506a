"""export.py OUTDIR [NAME...]: models that write in place, for the trace's functionalization
and its self-check (test/golden/nnsc-trace/inplace.test).

Each is exported to OUTDIR/NAME/{model.pt, inputs.yaml, state_dict.pt} with torch.jit.trace in
training mode (examples/export_common.py); forward returns a 0-dim loss first.

views:   writes into slices, selects, index assignment, masked_fill_ and copy_ through chains of
         views, a view taken before the write, a write through a transposed view, a Swin-style
         attention mask filled region by region.
buffers: buffers updated in place (a counter, an exponential moving average, BatchNorm's
         num_batches_tracked and running statistics).
badparam: a write nnsc must refuse (a parameter in forward).
"""
import argparse
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "..", "examples"))
from export_common import export, seed_everything  # noqa: E402


def shifted_window_mask(h, w, window, shift):
    """The Swin attention mask: regions of a shifted window numbered, then compared."""
    img = torch.zeros(1, h, w, 1)
    cnt = 0
    for hs in (slice(0, -window), slice(-window, -shift), slice(-shift, None)):
        for ws in (slice(0, -window), slice(-window, -shift), slice(-shift, None)):
            img[:, hs, ws, :] = cnt
            cnt += 1
    win = img.view(1, h // window, window, w // window, window, 1)
    win = win.permute(0, 1, 3, 2, 4, 5).reshape(-1, window * window)
    mask = win.unsqueeze(1) - win.unsqueeze(2)
    return mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0)


class Views(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x, idx):
        h = self.proj(x)                      # [4, 8]
        flat = h.new_zeros(4, 8)
        before = flat.view(32)                # a view taken before the writes
        flat[1:3, 2:5] = 1.0                  # slice of a slice
        flat[3, 7] = 5.0                      # select of a select
        flat[idx] = 2.0                       # index_put_ (rows)
        flat[:, 6:][h[:, 6:] > 0] = -1.0      # index_put_ with a mask, through a slice
        flat.t()[1].mul_(3.0)                 # a write through a transposed view
        flat.narrow(1, 0, 2).masked_fill_(h[:, :2] < -0.5, 7.0)
        parts = flat.split(4, dim=1)
        parts[1].add_(0.5)                    # a write into a split piece
        flat[0] = h[0]                        # select, copy_ of a value with gradient
        m = shifted_window_mask(8, 8, 4, 2)   # [4, 16, 16]
        att = (h.view(4, 2, 4).sum(-1, keepdim=True) + m[:, :2, :4].sum(0)).softmax(-1)
        h2 = h.clone()
        h2.relu_()                            # in place on an activation
        return (h2 * before.view(4, 8)).sum() + att.sum() + flat.sum(), flat


class Buffers(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)
        self.bn = nn.BatchNorm1d(6)
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))
        self.register_buffer("ema", torch.zeros(6))

    def forward(self, x):
        h = self.bn(self.lin(x))
        self.steps += 1
        self.ema.mul_(0.9).add_(h.detach().mean(0), alpha=0.1)
        self.ema[0] = self.steps.float()      # a write into a slice of a buffer
        return (h * h).mean() + self.ema.sum() * 0.0


class BadParam(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(4))

    def forward(self, x):
        with torch.no_grad():
            self.w.clamp_(max=2.0)
        return (x * self.w).sum()


MODELS = {
    "views": (Views, [("x", [4, 8], "float32", [-1, 1]), ("idx", [2], "int64", [0, 4])]),
    "buffers": (Buffers, [("x", [5, 6], "float32", [-1, 1])]),
    "badparam": (BadParam, [("x", [4], "float32", [-1, 1])]),
}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("names", nargs="*", help="models to export (default: every model)")
    cli = p.parse_args()
    for name in cli.names or MODELS:
        cls, inputs = MODELS[name]
        seed_everything(0)
        specs = [dict(name=n, shape=s, dtype=d, range=r) for n, s, d, r in inputs]
        args = argparse.Namespace(out=os.path.join(cli.out, name), meta=False, eval=False,
                                  config=name)
        export(cls(), specs, args)


if __name__ == "__main__":
    main()
