"""export.py OUTDIR: a model whose loss shows whether the pieces of a split dropout draw their
own masks (docs/randomness.md, rule 3; test/golden/nnsc-run/random-pieces.test).

The dropout's input is [h, h]: two equal halves along the last dim. Its loss is the mean square
of the difference of the two halves after dropout, 4 h^2 (m0 - m1)^2 per element for masks m0
and m1 (kept: 1, at p = 0.5 scaled by 2). With independent masks (one device; or two pieces
with streams of their own) (m0 - m1)^2 is 1 for half of the elements: the loss is about
2 mean(h^2), about 2 at the embedding's N(0, 1) start. With the same mask for both halves it is
exactly 0. Written to OUTDIR/{model.pt, inputs.yaml, state_dict.pt}.
"""
import argparse
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "..", "examples"))
from export_common import export, seed_everything  # noqa: E402

WIDTH = 16


class Pieces(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(65, WIDTH)
        self.drop = nn.Dropout(0.5)

    def forward(self, idx, targets):
        h = self.emb(idx)                                  # [B, T, W]
        d = self.drop(torch.cat([h, h], dim=-1))           # [B, T, 2W]: split in two pieces
        diff = d[..., :WIDTH] - d[..., WIDTH:]
        # targets: the token data's second input, read so that it stays an input
        return (diff * diff).mean() + 0.0 * targets.sum()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    args = p.parse_args()
    seed_everything(0)
    specs = [dict(name="idx", shape=[2, 32], dtype="int64", range=[0, 65]),
             dict(name="targets", shape=[2, 32], dtype="int64", range=[0, 65])]
    export(Pieces(), specs, argparse.Namespace(out=args.out, meta=False, eval=False,
                                               config="pieces"))


if __name__ == "__main__":
    main()
