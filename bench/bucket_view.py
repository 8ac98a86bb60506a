"""Gradients as views of the reducers' buckets (data_parallel.bucket_view) against bucket
copies: each rank's measured memory peak, the plan estimate, the step time and the losses.

bench/bucket_view.py [--model nanogpt:default] [--dp 2] [--steps 6] [--warmup 2]
                     [--precisions fp32,bf16] [--bin build/bin] [--work DIR]

For ZeRO stage 0 and 1 and each precision.mode, the same program trains STEPS AdamW steps
on CPU processes (nnsc-run --nproc-per-node dp, synthetic tokens, 1 thread each) twice:
bucket_view true, then false. Prints rank 0's peak of live CPU tensor storage (counting
allocator) and estimate, the median step time after WARMUP steps, the ratios views / copies,
and whether every step's loss and grad norm are the same (they must be: the same sums in the
same order). The expected saving is one set of gradients (float32; bf16: the float32 main
grads, since views only hold those).
"""
import argparse
import sys

import benchlib

ROOT = benchlib.ROOT
MIB = 2.0**20


def sh(cmd):
    return benchlib.sh(cmd, "bucket_view")


def run(d, b, tag, dp, view, steps, vocab, precision):
    cfg, run_dir = f"{d}/{tag}-{view}.yaml", f"{d}/{tag}-{view}-run"
    benchlib.write_config(cfg, f"{d}/{tag}", run_dir, vocab, steps, precision)
    return benchlib.train_measured(b, cfg, run_dir, dp, [f"--data_parallel.bucket_view={view}"],
                                   "bucket_view")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="nanogpt:default")
    ap.add_argument("--dp", type=int, default=2)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--bin", default=f"{ROOT}/build/bin")
    ap.add_argument("--work", default=f"{ROOT}/out/bench/bucket_view")
    ap.add_argument("--verbose", action="store_true", help="print the estimates' parts")
    args = ap.parse_args()
    model, config = args.model.split(":")
    d = f"{args.work}/{model}-{config}"
    vocab = benchlib.prepare(model, config, d, args.bin, "bucket_view")
    print(f"{model}:{config}, dp {args.dp}, AdamW, {args.steps} steps (median step time after "
          f"{args.warmup}), rank 0; peak = live CPU tensor storage (counting allocator)")
    print(f"{'precision':<9} {'zero':>4} {'views':>5} {'peak MiB':>9} {'est MiB':>9} "
          f"{'step s':>7}")
    same = True
    for precision in args.precisions.split(","):
        for zero in (0, 1):
            tag = f"dp{args.dp}-zero{zero}"
            sh([f"{args.bin}/nnsc-plan", f"{d}/trace/graph.pb", "--policy", "dp",
                "--runtime-ngpus", str(args.dp), "--zero", str(zero), "-o", f"{d}/{tag}.pb"])
            sh([f"{args.bin}/nnsc-codegen", f"{d}/trace/graph.pb", f"{d}/{tag}.pb", "-o",
                f"{d}/{tag}"])
            got = {}
            for view in ("true", "false"):
                peak, est, rows, parts = run(d, args.bin, tag, args.dp, view, args.steps, vocab,
                                             precision)
                step_s = sorted(r["step_s"] for r in rows[args.warmup:])
                median = step_s[len(step_s) // 2]
                got[view] = (peak, est, median, [(r["loss"], r.get("grad_norm")) for r in rows])
                print(f"{precision:<9} {zero:>4} {view:>5} {peak / MIB:9.2f} {est / MIB:9.2f} "
                      f"{median:7.3f}")
                if args.verbose:
                    print(f"    estimate: {parts}")
            v, c = got["true"], got["false"]
            equal = v[3] == c[3]
            same = same and equal
            print(f"  {precision} zero {zero}: views / copies: peak {v[0] / c[0]:.3f} "
                  f"(saved {(c[0] - v[0]) / MIB:.2f} MiB measured, {(c[1] - v[1]) / MIB:.2f} MiB "
                  f"estimated), step time {v[2] / c[2]:.3f}; losses and grad norms "
                  f"{'the same' if equal else 'DIFFER'}")
    if not same:
        sys.exit("bucket_view: views and copies trained differently")


if __name__ == "__main__":
    main()
