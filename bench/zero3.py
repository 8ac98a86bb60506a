"""ZeRO-3 (parameters sharded too, gathered around each recompute group) against ZeRO-2 on the
same model and recompute groups: each rank's measured memory peak, the plan estimate, the step
time and the losses.

bench/zero3.py [--model nanogpt:default] [--dp 2] [--steps 6] [--warmup 2] [--accum 1]
               [--bucket-mb 4] [--recompute Block] [--precisions fp32] [--bin build/bin]
               [--work DIR]

For each precision.mode, nnsc-plan --zero 2 and --zero 3 with --recompute-modules RECOMPUTE
over DP copies, nnsc-codegen with BUCKET_MB buckets, and STEPS AdamW steps on CPU processes
(nnsc-run --nproc-per-node dp, synthetic tokens, ACCUM micro-batches a step, 1 thread each).
Both recompute the same groups and shard the same optimizer states and gradients; ZeRO-3 also
keeps only its range of the parameters a group alone reads, and holds one group's parameters
whole while it runs. The expected saving is those parameters' bytes times (1 - 1/dp), less
the largest group. Prints rank 0's peak of live CPU tensor storage (counting allocator) and
estimate, the median step time after WARMUP steps (ZeRO-3 all-gathers each group twice a
micro-batch), the ratios zero3 / zero2, and how far the losses and grad norms are apart
(rounding: the buckets end at the groups' parameters, so the norm sums other partial norms).
"""
import argparse
import re
import sys

import benchlib

ROOT = benchlib.ROOT
MIB = 2.0**20


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="nanogpt:default")
    ap.add_argument("--dp", type=int, default=2)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--accum", type=int, default=1)
    ap.add_argument("--bucket-mb", type=float, default=4)
    ap.add_argument("--recompute", default="Block")
    ap.add_argument("--precisions", default="fp32")
    ap.add_argument("--bin", default=f"{ROOT}/build/bin")
    ap.add_argument("--work", default=f"{ROOT}/out/bench/zero3")
    ap.add_argument("--cluster", default=f"{ROOT}/configs/clusters/cpu-local.example.yaml",
                    help="the cluster the cost model predicts the step times on")
    ap.add_argument("--verbose", action="store_true", help="print the estimates' parts")
    args = ap.parse_args()
    model, config = args.model.split(":")
    d = f"{args.work}/{model}-{config}"
    vocab = benchlib.prepare(model, config, d, args.bin, "zero3")
    print(f"{model}:{config}, dp {args.dp}, AdamW, {args.accum} micro-batch(es) a step, "
          f"{args.bucket_mb:g} MiB buckets, recompute {args.recompute}, {args.steps} steps "
          f"(median step time after {args.warmup}), rank 0; peak = live CPU tensor storage "
          f"(counting allocator)")
    predicted = {}
    for zero in (2, 3):
        tag = f"dp{args.dp}-zero{zero}"
        printed = benchlib.sh([f"{args.bin}/nnsc-plan", f"{d}/trace/graph.pb", "--policy", "dp",
                               "--runtime-ngpus", str(args.dp), "--zero", str(zero),
                               "--recompute-modules", args.recompute, "--cluster", args.cluster,
                               "-o", f"{d}/{tag}.pb", "--print"], "zero3")
        m = re.search(r"predicted step time: ([0-9.]+) (s|ms|us)", printed)
        if not m:
            sys.exit(f"zero3: nnsc-plan printed no predicted step time:\n{printed}")
        predicted[zero] = float(m.group(1)) * {"s": 1, "ms": 1e-3, "us": 1e-6}[m.group(2)]
        gathers = re.search(r"ZeRO-3 parameter gathers ([0-9.]+ (?:s|ms|us))", printed)
        if gathers:
            print(f"cost model ({args.cluster.split('/')[-1]}): ZeRO-3's gathers "
                  f"{gathers.group(1)} a micro-batch")
        benchlib.sh([f"{args.bin}/nnsc-codegen", f"{d}/trace/graph.pb", f"{d}/{tag}.pb", "-o",
                     f"{d}/{tag}", "--bucket-mb", str(args.bucket_mb)], "zero3")
    manifest = benchlib.sh([f"{args.bin}/nnsc-codegen", "--print-manifest",
                            f"{d}/dp{args.dp}-zero3/rank0.pb"], "zero3")
    shards = [l for l in manifest.splitlines() if l.startswith("shard ")]
    gathered = [l for l in shards if " gathered in " in l]
    print(f"rank 0 holds {len(shards)} shards; {len(gathered)} are gathered in a recompute "
          f"function under ZeRO-3")
    print(f"{'precision':<9} {'run':<16} {'peak MiB':>9} {'est MiB':>9} {'step s':>7}")
    apart = 0.0
    # ZeRO-2; ZeRO-3 with each gather waited for when its group starts; ZeRO-3 with the next
    # group's all-gathers launched as a group starts (data_parallel.zero3_prefetch, default).
    runs = [("zero2", 2, ()), ("zero3", 3, ("--data_parallel.zero3_prefetch=false",)),
            ("zero3 prefetch", 3, ("--data_parallel.zero3_prefetch=true",))]
    for precision in args.precisions.split(","):
        got = {}
        for name, zero, overrides in runs:
            got[name] = benchlib.train_zero_program(
                args.bin, d, f"dp{args.dp}-zero{zero}", precision, vocab, args.steps, args.dp,
                args.accum, args.warmup, "zero3", overrides, "-" + name.replace(" ", "-"))
            peak, est, median, _, parts = got[name]
            print(f"{precision:<9} {name:<16} {peak / MIB:9.2f} {est / MIB:9.2f} {median:7.3f}")
            if args.verbose:
                print(f"    estimate: {parts}")
        two = got["zero2"]
        for name in ("zero3", "zero3 prefetch"):
            three = got[name]
            worst = benchlib.losses_apart(three[3], two[3])
            apart = max(apart, worst)
            print(f"  {precision}: {name} / zero2: peak {three[0] / two[0]:.3f} (saved "
                  f"{(two[0] - three[0]) / MIB:.2f} MiB measured, "
                  f"{(two[1] - three[1]) / MIB:.2f} MiB estimated), step time "
                  f"{three[2] / two[2]:.3f} (predicted {predicted[3] / predicted[2]:.3f}: "
                  f"{predicted[2]:.3f} s, {predicted[3]:.3f} s); losses and grad norms "
                  f"{'the same' if worst == 0 else f'apart by {worst:.1e} (relative)'}")
        pre, plain = got["zero3 prefetch"], got["zero3"]
        print(f"  {precision}: prefetch / no prefetch: step time {pre[2] / plain[2]:.3f}, peak "
              f"{pre[0] / plain[0]:.3f} ({(pre[0] - plain[0]) / MIB:+.2f} MiB); losses and "
              f"grad norms {'the same' if pre[3] == plain[3] else 'differ'}")
        if pre[3] != plain[3]:
            sys.exit("zero3: prefetch changed the training")
    if apart > 1e-4:
        sys.exit("zero3: ZeRO-2 and ZeRO-3 trained differently")


if __name__ == "__main__":
    main()
