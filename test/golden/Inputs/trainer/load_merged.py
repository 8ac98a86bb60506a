"""load_merged.py MERGED.pt [--reference FINAL.pt] [--initial MODEL.pt]

Loads a merged checkpoint with torch.load(weights_only=True) — what PyTorch
2.6 does by default — into the nanoGPT tiny model (explicit attention, as
setup_gpt.sh exports it) with load_state_dict (strict), checks that it is what torch.save(model.state_dict()) writes (an
OrderedDict of plain tensors, tied weights sharing one storage), and optionally compares it with a reference state_dict (within
1e-5) or with a TorchScript archive's initial weights (exactly).
"""
import argparse
import dataclasses
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "..",
                                "examples", "nanogpt"))
from model import CONFIGS, GPT  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("merged")
    ap.add_argument("--reference")
    ap.add_argument("--initial")
    args = ap.parse_args()
    sd = torch.load(args.merged, weights_only=True)
    model = GPT(dataclasses.replace(CONFIGS["tiny"], attention="explicit"))
    print("load_state_dict:", model.load_state_dict(sd))
    plain = all(type(t) is torch.Tensor for t in sd.values())
    print(f"{type(sd).__name__} of {len(sd)} tensors, plain: {plain}")
    tied = sd["transformer.wte.weight"].data_ptr() == sd["lm_head.weight"].data_ptr()
    print("tied weights share storage:", tied)
    if args.reference:
        ref = torch.load(args.reference, weights_only=True)
        diff = max(float((sd[k] - v).abs().max()) for k, v in ref.items())
        print("matches reference" if diff <= 1e-5 else f"differs from reference by {diff}")
    if args.initial:
        init = torch.jit.load(args.initial).state_dict()
        same = all(torch.equal(sd[k], v) for k, v in init.items())
        print("equals the initial weights" if same else "differs from the initial weights")


if __name__ == "__main__":
    main()
