"""How long this CPU takes for the non-matmul ops of a nanoGPT step, against what the cost model
prices them at (issue 11: the one-process plans are 16-24 % under-predicted with no
communication at all, and matmuls are not the cause: bench/matmul_shapes.py).

  /usr/bin/python3 bench/elementwise_shapes.py [--spec out/bench/cost_fidelity/cpu-1.yaml]
                                               [--threads 1] [--repeat 20]

The cost model prices an elementwise op, a norm or a softmax by its bytes over the spec's
measured copy bandwidth (plus the launch floor), as a GPU roofline would. For each op at
nanoGPT default's shapes (batch 8, 256 tokens, 384 wide, 6 heads) this times the forward as
PyTorch runs it (one thread, OpenBLAS's and OpenMP's pools sized to it, as in nnsc-run's
workers) and prints it against that price: above 1, the model under-predicts by that factor.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import ROOT  # noqa: E402

benchlib.size_blas_threads(sys.argv)
import torch  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", default=f"{ROOT}/out/bench/cost_fidelity/cpu-1.yaml",
                    help="a device spec measured with one thread: "
                         "nnsc-profile-device --threads 1 --out FILE")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    if not os.path.exists(args.spec):
        sys.exit(f"elementwise_shapes: no spec at {args.spec}: make one with "
                 "nnsc-profile-device --threads 1 --out FILE")
    torch.set_num_threads(args.threads)
    bandwidth = benchlib.spec_value(args.spec, "memory_bandwidth", "elementwise_shapes")
    floor = benchlib.spec_value(args.spec, "launch_floor", "elementwise_shapes")
    B, T, C, H = 8, 256, 384, 6
    wide = torch.randn(B, T, 4 * C)
    x = torch.randn(B, T, C)
    w, b = torch.ones(C), torch.zeros(C)
    scores = torch.randn(B, H, T, T)
    causal = torch.ones(T, T).tril() == 0
    logits, targets = torch.randn(B * T, 65), torch.randint(0, 65, (B * T,))
    f = 4  # float32 bytes
    cases = [  # name, op, bytes read + written (the roofline's memory term for it)
        ("gelu [8, 256, 1536]", lambda: torch.nn.functional.gelu(wide), 2 * wide.numel() * f),
        ("layer_norm [8, 256, 384]", lambda: torch.nn.functional.layer_norm(x, (C,), w, b),
         2 * x.numel() * f),
        ("softmax [8, 6, 256, 256]", lambda: torch.softmax(scores, -1), 2 * scores.numel() * f),
        ("masked_fill [8, 6, 256, 256]", lambda: scores.masked_fill(causal, float("-inf")),
         2 * scores.numel() * f + causal.numel()),
        ("mul by a scalar [8, 6, 256, 256]", lambda: scores * 0.125, 2 * scores.numel() * f),
        ("add [8, 256, 384]", lambda: x + x, 3 * x.numel() * f),
        ("cross_entropy [2048, 65]", lambda: torch.nn.functional.cross_entropy(logits, targets),
         logits.numel() * f),
    ]
    print(f"== nanoGPT default's non-matmul ops, {args.threads} thread(s); priced at "
          f"{bandwidth:.3g} B/s + {floor:.2g} s (the spec)")
    total_measured = total_priced = 0.0
    for name, op, nbytes in cases:
        measured = benchlib.median_seconds(op, args.repeat)
        priced = nbytes / bandwidth + floor
        total_measured += measured
        total_priced += priced
        print(f"  {name:34s} {measured * 1e3:8.3f} ms   priced {priced * 1e3:8.3f} ms   "
              f"{measured / priced:5.2f}x")
    print(f"  all of the above: {total_measured * 1e3:.3f} ms against {total_priced * 1e3:.3f} ms "
          f"priced ({total_measured / total_priced:.2f}x)")


if __name__ == "__main__":
    main()
