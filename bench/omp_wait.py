"""Idle OpenMP threads waiting passively against spinning (nnsc-run's `omp_wait`,
docs/trainer-config.md, "CPU workers and their threads"): one CPU worker with --threads
intra-op threads trains nanoGPT under each setting, the settings interleaved over --rounds.

bench/omp_wait.py [--model nanogpt:small] [--batch 32] [--threads 2] [--steps 40] [--warmup 5]
                  [--rounds 2] [--bin build/bin] [--work DIR]

A worker's ATen runs its element-wise ops on an OpenMP pool and its matmuls on OpenBLAS's own
pthread pool (both sized to --threads, lib/Runtime/Threads.cpp). With libgomp's default
(active) policy an OpenMP thread spins after each parallel region while OpenBLAS's threads
need the same cores. Prints each setting's median step, the best of --rounds runs, and its
ratio to the default's (passive).
"""
import argparse

import benchlib

ROOT = benchlib.ROOT
SETTINGS = ["active", "passive"]


def run(args, d, vocab, setting):
    run_dir = f"{d}/run-{setting}"
    benchlib.write_config(f"{d}/run.yaml", f"{d}/program", run_dir, vocab,
                          args.steps + args.warmup)
    benchlib.sh([f"{args.bin}/nnsc-run", f"{d}/run.yaml", "--nproc-per-node", "1",
                 f"--threads={args.threads}", f"--omp_wait={setting}"], "omp_wait")
    return benchlib.metrics_medians(run_dir, args.warmup)["step_s"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="nanogpt:small")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--bin", default=f"{ROOT}/build/bin")
    ap.add_argument("--work", default=f"{ROOT}/out/bench/omp_wait")
    args = ap.parse_args()
    model, config = args.model.split(":")
    d = f"{args.work}/{model}"
    vocab = benchlib.prepare(model, config, d, args.bin, "omp_wait", batch=args.batch)
    benchlib.sh([f"{args.bin}/nnsc-plan", f"{d}/trace/graph.pb", "--policy", "dp",
                 "--runtime-ngpus", "1", "-o", f"{d}/plan.pb"], "omp_wait")
    benchlib.sh([f"{args.bin}/nnsc-codegen", f"{d}/trace/graph.pb", f"{d}/plan.pb", "-o",
                 f"{d}/program"], "omp_wait")
    best = {}
    for _ in range(args.rounds):  # interleaved, so that a slow moment hits both
        for s in SETTINGS:
            t = run(args, d, vocab, s)
            best[s] = min(best.get(s, t), t)
    print(f"{model}:{config} micro-batch {args.batch} on 1 CPU worker, {args.threads} threads; "
          f"median of {args.steps} steps after {args.warmup}, best of {args.rounds} runs")
    for s in SETTINGS:
        print(f"omp_wait {s:<8} {best[s] * 1e3:8.1f} ms  {best[s] / best['passive']:.2f}")


if __name__ == "__main__":
    main()
