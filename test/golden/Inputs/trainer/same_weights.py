"""same_weights.py A.pt B.pt: whether two merged checkpoints hold the same
names and bit-identical tensors ("same weights: True"), else the largest
absolute difference and where."""
import sys

import torch


def main():
    a, b = (torch.load(path, weights_only=True) for path in sys.argv[1:3])
    if a.keys() != b.keys():
        print(f"same weights: False (names differ: {sorted(set(a) ^ set(b))})")
        return
    diffs = {k: float((a[k].double() - b[k].double()).abs().max()) for k in a if a[k].numel()}
    worst = max(diffs, key=diffs.get)
    same = all(torch.equal(a[k], b[k]) for k in a)
    print("same weights: True" if same else
          f"same weights: False (largest difference {diffs[worst]:.3g} in {worst})")


if __name__ == "__main__":
    main()
