"""How fast this CPU multiplies at the shapes a model trains with, against the one matmul rate
the device spec holds (issue 11: the cost model's compute error).

  /usr/bin/python3 bench/matmul_shapes.py [--spec out/bench/cost_fidelity/cpu-1.yaml]
                                          [--threads 1] [--repeat 20]

nnsc-profile-device measures one float32 matmul rate: the best of square sizes 256..2048. The
cost model prices every matmul at that rate, but a model's matmuls are not square: nanoGPT's
default config multiplies [2048 x 384] by [384 x 1536], and its attention runs 48 products of
[256 x 64] by [64 x 256]. For each matmul a training step runs (forward, and the two of the
backward: the input's gradient and the weight's), this times it as PyTorch runs it (one
thread, as each nnsc-run worker has), and prints the FLOP/s achieved, its ratio to the spec's
rate (below 1: compute the cost model under-predicts by that factor) and to the best rate of
the same run (the spread one rate cannot express, whatever the VM's speed that day).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import ROOT  # noqa: E402

benchlib.size_blas_threads(sys.argv)
import torch  # noqa: E402


def linear_shapes(name, m, k, n):
    """The three products of a linear layer y[m, n] = x[m, k] @ w[n, k]^T."""
    return [(f"{name} forward", (m, k), (k, n)),
            (f"{name} grad input", (m, n), (n, k)),
            (f"{name} grad weight", (n, m), (m, k))]


def nanogpt_default():
    sys.path.insert(0, f"{ROOT}/examples/nanogpt")
    from model import CONFIGS
    c = CONFIGS["default"]
    b, t, e, h = 8, c.block_size, c.n_embd, c.n_head
    m = b * t
    out = (linear_shapes("c_attn", m, e, 3 * e) + linear_shapes("attn c_proj", m, e, e) +
           linear_shapes("mlp c_fc", m, e, 4 * e) + linear_shapes("mlp c_proj", m, 4 * e, e) +
           linear_shapes("lm_head", m, e, c.vocab_size))
    hd = e // h
    out.append(("q @ k^T (batched)", (b * h, t, hd), (b * h, hd, t)))
    out.append(("probs @ v (batched)", (b * h, t, t), (b * h, t, hd)))
    return "nanoGPT default (batch 8)", out


def llama_default():
    sys.path.insert(0, f"{ROOT}/examples/llama")
    sys.modules.pop("model", None)
    from model import CONFIGS
    c = CONFIGS["default"]
    b, t, d = c.batch, c.max_seq_len, c.dim
    hd = d // c.n_heads
    m = b * t
    out = (linear_shapes("q_proj", m, d, d) + linear_shapes("k_proj", m, d, c.n_kv_heads * hd) +
           linear_shapes("gate_proj", m, d, c.ffn_hidden) +
           linear_shapes("down_proj", m, c.ffn_hidden, d) +
           linear_shapes("lm_head", m, d, c.vocab_size))
    out.append(("q @ k^T (batched)", (b * c.n_heads, t, hd), (b * c.n_heads, hd, t)))
    out.append(("probs @ v (batched)", (b * c.n_heads, t, t), (b * c.n_heads, t, hd)))
    return f"Llama default (batch {b})", out


def main():
    args = benchlib.one_thread_args("matmul_shapes")
    peak = benchlib.spec_value(args.spec, "float32", "matmul_shapes")
    torch.set_num_threads(args.threads)
    print(f"spec {args.spec}: float32 matmul {peak / 1e9:.1f} GFLOP/s; torch {torch.__version__}, "
          f"{args.threads} thread(s)")
    for label, shapes in (nanogpt_default(), llama_default()):
        print(f"\n== {label}")
        total_flops = total_time = 0.0
        rows = []
        for name, a_shape, b_shape in shapes:
            a, b = torch.randn(*a_shape), torch.randn(*b_shape)
            flops = 2.0 * a.numel() * b_shape[-1]
            sec = benchlib.median_seconds(lambda: torch.matmul(a, b), args.repeat)
            total_flops += flops
            total_time += sec
            rows.append((name, a_shape, b_shape, sec, flops / sec))
        best = max(r[4] for r in rows)  # this run's own best: immune to the VM's drift
        for name, a_shape, b_shape, sec, rate in rows:
            print(f"  {name:<22} {str(list(a_shape)):>16} x {str(list(b_shape)):<16} "
                  f"{sec * 1e3:8.3f} ms  {rate / 1e9:7.1f} GFLOP/s  "
                  f"{rate / peak:5.2f} of the spec, {rate / best:5.2f} of the best here")
        print(f"  all of the above: {total_flops / total_time / 1e9:.1f} GFLOP/s, "
              f"{total_flops / total_time / peak:.2f} of the spec (the cost model prices them at "
              f"1.00: their time is {total_time / (total_flops / peak):.2f}x its prediction)")


if __name__ == "__main__":
    main()
