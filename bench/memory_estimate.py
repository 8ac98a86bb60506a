"""Per-rank memory, estimated by the planner and measured by nnsc-run, with and without
ZeRO-1 and activation recompute (issue: fit bigger models).

bench/memory_estimate.py [--models nanogpt:default:Block,llama:tiny:TransformerBlock]
                         [--dps 2,4] [--steps 2] [--bin build/bin] [--work DIR]

For each model, data-parallel size, ZeRO stage (0, 1) and recompute (none, every block of
the named class): export, trace, plan (--policy dp), generate, and train STEPS AdamW steps
on CPU processes (nnsc-run --nproc-per-node dp, synthetic tokens, 1 thread each). nnsc-run
prints at the end
  - the optimizer-state bytes every rank holds (the nbytes of the state tensors), and
  - every rank's peak of live CPU tensor storage (a counting allocator wrapped around
    LibTorch's CPU allocator, installed before the shards load: parameters, gradients,
    optimizer states, gradient buckets, activations and every temporary; not RSS)
    beside the plan's estimate (manifest memory_estimate + the optimizer's states).
The table shows rank 0's figures, the estimate's error against the measured peak, the
ratio of optimizer bytes with ZeRO-1 to without (goal at dp 2: 0.5) and of the peak
activation memory with recompute to without.
"""
import argparse
import re
import sys

import benchlib

ROOT = benchlib.ROOT


def sh(cmd):
    return benchlib.sh(cmd, "memory_estimate")


MIB = 2.0**20


def measure(d, b, dp, zero, classes, steps, vocab, precision):
    tag = f"dp{dp}-zero{zero}-{'rc' if classes else 'plain'}"
    plan = [f"{b}/nnsc-plan", f"{d}/trace/graph.pb", "--policy", "dp", "--runtime-ngpus", str(dp),
            "--zero", str(zero), "-o", f"{d}/{tag}.pb"]
    if classes:
        plan += ["--recompute-modules", classes]
    sh(plan)
    sh([f"{b}/nnsc-codegen", f"{d}/trace/graph.pb", f"{d}/{tag}.pb", "-o", f"{d}/{tag}"])
    benchlib.write_config(f"{d}/{tag}.yaml", f"{d}/{tag}", f"{d}/{tag}-run", vocab,
                          steps, precision)
    log = sh([f"{b}/nnsc-run", f"{d}/{tag}.yaml", "--nproc-per-node", str(dp)])
    opt = re.search(r"optimizer-state bytes per rank: ([0-9,]+)", log)
    mem = re.search(r"peak memory per rank \([^)]*\): measured ([0-9.]+) MiB[^;]*; "
                    r"plan estimate ([0-9.]+) MiB", log)
    parts = re.search(r"estimate of rank 0[^:]*: (.*)", log)
    if not opt or not mem:
        sys.exit(f"memory_estimate: nnsc-run printed no memory lines:\n{log}")
    return (int(opt.group(1).replace(",", "")), float(mem.group(1)) * MIB,
            float(mem.group(2)) * MIB, parts.group(1) if parts else "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="nanogpt:default:Block,llama:tiny:TransformerBlock")
    ap.add_argument("--dps", default="2,4")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--bin", default=f"{ROOT}/build/bin")
    ap.add_argument("--work", default=f"{ROOT}/out/bench/memory_estimate")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"],
                    help="the trainer's precision.mode")
    ap.add_argument("--verbose", action="store_true", help="print the estimate's parts")
    args = ap.parse_args()
    print(f"AdamW, {args.steps} steps, rank 0; peak = live CPU tensor storage (counting allocator)")
    print(f"{'model':<18} {'dp':>2} {'zero':>4} {'recompute':<9} {'optim MiB':>9} "
          f"{'est MiB':>9} {'peak MiB':>9} {'error':>7}")
    errors = []
    for item in args.models.split(","):
        model, config, classes = item.split(":")
        d = f"{args.work}/{model}-{config}"
        vocab = benchlib.prepare(model, config, d, args.bin, "memory_estimate")
        for dp in [int(x) for x in args.dps.split(",")]:
            results = {}
            for zero in (0, 1):
                for rc in ("", classes):
                    opt, peak, est, parts = measure(d, args.bin, dp, zero, rc, args.steps, vocab,
                                                          args.precision)
                    results[(zero, rc)] = (opt, peak, est)
                    err = (est - peak) / peak
                    errors.append(abs(err))
                    print(f"{model + ':' + config:<18} {dp:>2} {zero:>4} {'all' if rc else 'none':<9} "
                          f"{opt / MIB:9.2f} {est / MIB:9.2f} {peak / MIB:9.2f} {err * 100:+6.1f}%")
                    if args.verbose:
                        print(f"    estimate: {parts}")
            z = results[(1, "")][0] / results[(0, "")][0]
            print(f"  {model} dp {dp}: optimizer bytes ZeRO-1 / plain = {z:.3f}")
    print(f"estimate vs measured peak: mean |error| {100 * sum(errors) / len(errors):.1f}%, "
          f"worst {100 * max(errors):.1f}%")


if __name__ == "__main__":
    main()
