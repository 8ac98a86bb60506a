"""How long this CPU takes for the non-matmul ops of a nanoGPT step, against what the cost model
prices them at (issue 11: the one-process plans are 16-24 % under-predicted with no
communication at all, and matmuls are not the cause: bench/matmul_shapes.py).

  /usr/bin/python3 bench/elementwise_shapes.py [--spec out/bench/cost_fidelity/cpu-1.yaml]
                                               [--threads 1] [--repeat 20]

The cost model prices an elementwise op, a norm or a softmax by its bytes over the spec's
measured copy bandwidth (plus the launch floor), as a GPU roofline would, and where the spec has
vector_ops (nnsc-profile-device measures them), at least its kind's time per element and row. For each op at
nanoGPT default's shapes (batch 8, 256 tokens, 384 wide, 6 heads) this times the forward as
PyTorch runs it (one thread, OpenBLAS's and OpenMP's pools sized to it, as in nnsc-run's
workers) and prints it against that price: above 1, the model under-predicts by that factor.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

benchlib.size_blas_threads(sys.argv)
import torch  # noqa: E402


def main():
    args = benchlib.one_thread_args("elementwise_shapes")
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
    cases = [  # name, op, bytes read + written (the roofline's memory term), its vector_ops
        # kind, elements and rows (the spec's per-element and per-row price, where it has one)
        ("gelu [8, 256, 1536]", lambda: torch.nn.functional.gelu(wide), 2 * wide.numel() * f,
         "gelu", wide.numel(), 0),
        ("layer_norm [8, 256, 384]", lambda: torch.nn.functional.layer_norm(x, (C,), w, b),
         2 * x.numel() * f, "norm", x.numel(), B * T),
        ("softmax [8, 6, 256, 256]", lambda: torch.softmax(scores, -1), 2 * scores.numel() * f,
         "softmax", scores.numel(), B * H * T),
        ("masked_fill [8, 6, 256, 256]", lambda: scores.masked_fill(causal, float("-inf")),
         2 * scores.numel() * f + causal.numel(), "select", scores.numel(), 0),
        ("mul by a scalar [8, 6, 256, 256]", lambda: scores * 0.125, 2 * scores.numel() * f,
         None, 0, 0),
        ("add [8, 256, 384]", lambda: x + x, 3 * x.numel() * f, None, 0, 0),
        ("cross_entropy [2048, 65]", lambda: torch.nn.functional.cross_entropy(logits, targets),
         logits.numel() * f, "loss", logits.numel(), B * T),
    ]
    vector = vector_ops(args.spec)
    print(f"== nanoGPT default's non-matmul ops, {args.threads} thread(s); priced at "
          f"{bandwidth:.3g} B/s + {floor:.2g} s (the spec), and with the spec's vector_ops "
          f"({'none' if not vector else ', '.join(sorted(vector))})")
    total_measured = total_priced = total_vector = 0.0
    for name, op, nbytes, kind, elements, rows in cases:
        measured = benchlib.median_seconds(op, args.repeat)
        priced = nbytes / bandwidth + floor
        with_vector = priced
        if kind in vector:
            per_element, per_row = vector[kind][0], vector[kind][1]
            with_vector = max(nbytes / bandwidth, elements * per_element + rows * per_row) + floor
        total_measured += measured
        total_priced += priced
        total_vector += with_vector
        print(f"  {name:34s} {measured * 1e3:8.3f} ms   roofline {priced * 1e3:8.3f} ms "
              f"{measured / priced:5.2f}x   with vector_ops {with_vector * 1e3:8.3f} ms "
              f"{measured / with_vector:5.2f}x")
    print(f"  all of the above: {total_measured * 1e3:.3f} ms against {total_priced * 1e3:.3f} ms "
          f"by the roofline ({total_measured / total_priced:.2f}x), {total_vector * 1e3:.3f} ms "
          f"with vector_ops ({total_measured / total_vector:.2f}x)")


def vector_ops(path):
    """The spec's vector_ops: {kind: [forward s/element, s/row, backward s/element, s/row]}."""
    import yaml
    with open(path) as f:
        return (yaml.safe_load(f) or {}).get("vector_ops") or {}

if __name__ == "__main__":
    main()
