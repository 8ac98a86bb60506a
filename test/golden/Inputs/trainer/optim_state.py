"""optim_state.py MERGED.optim.pt [--like OTHER.optim.pt] [--drop NAME] [--reshape NAME]
                  [--weights MERGED.pt --out BAD.pt]

Reads the optimizer and training state nnsc-merge-ckpt writes beside a merged
checkpoint (torch.load, weights_only=True) and prints its training position and
how many parameters have exp_avg / exp_avg_sq, each of its parameter's shape
in MERGED.pt. --like compares every tensor with another such file (max relative
difference; "equal" when bit-equal). --weights with --drop or --reshape writes a
broken copy of the merged weights to --out (a missing tensor, a tensor one
element longer) for nnsc-run's error tests.
"""
import argparse
import os

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("optim")
    ap.add_argument("--like")
    ap.add_argument("--weights")
    ap.add_argument("--drop")
    ap.add_argument("--reshape")
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.weights and args.out:
        sd = torch.load(args.weights, weights_only=True)
        if args.drop:
            del sd[args.drop]
        if args.reshape:
            sd[args.reshape] = torch.cat([sd[args.reshape].reshape(-1), torch.zeros(1)])
        torch.save(sd, args.out)
        return
    st = torch.load(args.optim, weights_only=True)
    weights = torch.load(args.optim.replace(".optim.pt", ".pt"), weights_only=True)
    print(f"step {int(st['nnsc/step'])}, data position {int(st['nnsc/data_position'])}, "
          f"written by {int(st['nnsc/world_size'])} ranks, zero {int(st['nnsc/zero'])}")
    names = sorted(k[: -len("/exp_avg")] for k in st if k.endswith("/exp_avg"))
    same = all(st[n + "/exp_avg"].shape == weights[n].shape ==
               st[n + "/exp_avg_sq"].shape for n in names)
    print(f"{len(names)} parameters with exp_avg and exp_avg_sq of their shapes: {same}")
    if args.like:
        other = torch.load(args.like, weights_only=True)
        keys = sorted(k for k in st if not k.startswith("nnsc/"))
        assert keys == sorted(k for k in other if not k.startswith("nnsc/")), "keys differ"
        worst = 0.0
        for k in keys:
            a, b = st[k].double(), other[k].double()
            worst = max(worst, ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item())
        print(f"{len(keys)} tensors like {os.path.basename(args.like)}: max rel diff {worst:.1e}")


if __name__ == "__main__":
    main()
