"""compare_metrics.py A.jsonl B.jsonl [--tol T] [--fields loss,grad_norm,lr] [--from-step N]

Compares two metrics files step by step (nnsc-run's metrics.jsonl or
reference_train.py's losses.jsonl). --tol 0 demands identical numbers.
Prints "metrics match: N steps" or the first mismatch (exit 1).
"""
import argparse
import json
import sys


def load(path, first):
    out = {}
    for line in open(path):
        rec = json.loads(line)
        if rec["step"] >= first:
            out[rec["step"]] = rec
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--fields", default="loss,grad_norm,lr")
    ap.add_argument("--from-step", type=int, default=1)
    args = ap.parse_args()
    a, b = load(args.a, args.from_step), load(args.b, args.from_step)
    if sorted(a) != sorted(b):
        print(f"steps differ: {sorted(a)} vs {sorted(b)}")
        return 1
    for step in sorted(a):
        for f in args.fields.split(","):
            x, y = a[step][f], b[step][f]
            if abs(x - y) > args.tol or (args.tol == 0 and x != y):
                print(f"step {step}: {f} {x!r} vs {y!r} (tolerance {args.tol})")
                return 1
    print(f"metrics match: {len(a)} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
