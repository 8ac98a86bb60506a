"""ZeRO-2 (gradients sharded too) against ZeRO-1 on the same model: each rank's measured memory
peak, the plan estimate, the step time and the losses.

bench/zero2.py [--model nanogpt:default] [--dp 2] [--steps 6] [--warmup 2] [--accum 1]
               [--bucket-mb 4] [--precisions fp32,bf16] [--bin build/bin] [--work DIR]

For each precision.mode, nnsc-plan --zero 1 and --zero 2 over DP copies, nnsc-codegen with
BUCKET_MB buckets, and STEPS AdamW steps on CPU processes (nnsc-run --nproc-per-node dp,
synthetic tokens, ACCUM micro-batches a step, 1 thread each). ZeRO-1 keeps every gradient
(as views of its buckets, the default); ZeRO-2 drops them as their bucket goes on the wire and
keeps its range of the sum, so the expected saving is the gradients less this rank's shard and
the buckets in flight. Prints rank 0's peak of live CPU tensor storage (counting allocator) and
estimate, the median step time after WARMUP steps, the ratios zero2 / zero1, and how far the
losses and grad norms are apart: with one micro-batch the same sums in the same order (equal),
with several ZeRO-2 reduces each and sums the reduced ones (rounding apart).
"""
import argparse
import sys

import benchlib

ROOT = benchlib.ROOT
MIB = 2.0**20


def sh(cmd):
    return benchlib.sh(cmd, "zero2")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="nanogpt:default")
    ap.add_argument("--dp", type=int, default=2)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--accum", type=int, default=1)
    ap.add_argument("--bucket-mb", type=float, default=4)
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--bin", default=f"{ROOT}/build/bin")
    ap.add_argument("--work", default=f"{ROOT}/out/bench/zero2")
    ap.add_argument("--verbose", action="store_true", help="print the estimates' parts")
    args = ap.parse_args()
    model, config = args.model.split(":")
    d = f"{args.work}/{model}-{config}"
    vocab = benchlib.prepare(model, config, d, args.bin, "zero2")
    print(f"{model}:{config}, dp {args.dp}, AdamW, {args.accum} micro-batch(es) a step, "
          f"{args.bucket_mb:g} MiB buckets, {args.steps} steps (median step time after "
          f"{args.warmup}), rank 0; peak = live CPU tensor storage (counting allocator)")
    for zero in (1, 2):
        tag = f"dp{args.dp}-zero{zero}"
        sh([f"{args.bin}/nnsc-plan", f"{d}/trace/graph.pb", "--policy", "dp",
            "--runtime-ngpus", str(args.dp), "--zero", str(zero), "-o", f"{d}/{tag}.pb"])
        sh([f"{args.bin}/nnsc-codegen", f"{d}/trace/graph.pb", f"{d}/{tag}.pb", "-o",
            f"{d}/{tag}", "--bucket-mb", str(args.bucket_mb)])
    print(f"{'precision':<9} {'zero':>4} {'peak MiB':>9} {'est MiB':>9} {'step s':>7}")
    apart = 0.0
    for precision in args.precisions.split(","):
        got = {}
        for zero in (1, 2):
            got[zero] = benchlib.train_zero_program(
                args.bin, d, f"dp{args.dp}-zero{zero}", precision, vocab, args.steps, args.dp,
                args.accum, args.warmup, "zero2")
            peak, est, median, _, parts = got[zero]
            print(f"{precision:<9} {zero:>4} {peak / MIB:9.2f} {est / MIB:9.2f} {median:7.3f}")
            if args.verbose:
                print(f"    estimate: {parts}")
        one, two = got[1], got[2]
        worst = benchlib.losses_apart(two[3], one[3])
        apart = max(apart, worst)
        print(f"  {precision}: zero2 / zero1: peak {two[0] / one[0]:.3f} (saved "
              f"{(one[0] - two[0]) / MIB:.2f} MiB measured, {(one[1] - two[1]) / MIB:.2f} MiB "
              f"estimated), step time {two[2] / one[2]:.3f}; losses and grad norms "
              f"{'the same' if worst == 0 else f'apart by {worst:.1e} (relative)'}")
    # One micro-batch: the same sums in the same order. Several: rounding only.
    if (args.accum == 1 and apart != 0) or apart > 1e-4:
        sys.exit("zero2: ZeRO-1 and ZeRO-2 trained differently")


if __name__ == "__main__":
    main()
