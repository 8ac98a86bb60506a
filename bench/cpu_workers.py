"""How a CPU worker's threads meet the machine (docs/trainer-config.md, "CPU workers and their
threads"): one plan trained on 2 CPU processes under each setting of nnsc-run's `gloo_workers`
and `cpu_bind`, in one invocation, the settings interleaved over --rounds.

bench/cpu_workers.py [--model llama:default] [--plan megatron.yaml] [--steps 30] [--warmup 5]
                     [--rounds 2] [--bin build/bin] [--work DIR]

Prints per setting the median step, in-step collectives (`comm_s`) and forward + backward over
the measured steps, the best of --rounds runs, and each step's ratio to the defaults' (batch,
cores).
"""
import argparse

import benchlib

ROOT = benchlib.ROOT
SETTINGS = [("normal", "none"), ("normal", "cores"), ("batch", "none"), ("batch", "cores")]


def run(args, d, vocab, program, workers, bind):
    run_dir = f"{d}/run-{workers}-{bind}"
    benchlib.write_config(f"{d}/run.yaml", program, run_dir, vocab, args.steps + args.warmup)
    benchlib.sh([f"{args.bin}/nnsc-run", f"{d}/run.yaml", "--nproc-per-node", "2",
                 f"--gloo_workers={workers}", f"--cpu_bind={bind}"], "cpu_workers")
    return benchlib.metrics_medians(run_dir, args.warmup, ("step_s", "comm_s", "fwd_bwd_s"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="llama:default")
    ap.add_argument("--plan", default="megatron.yaml", help="a plan file of examples/<model>")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--bin", default=f"{ROOT}/build/bin")
    ap.add_argument("--work", default=f"{ROOT}/out/bench/cpu_workers")
    args = ap.parse_args()
    model, config = args.model.split(":")
    d = f"{args.work}/{model}"
    vocab = benchlib.prepare(model, config, d, args.bin, "cpu_workers")
    benchlib.sh([f"{args.bin}/nnsc-plan", f"{d}/trace/graph.pb", "--policy", "file",
                 "--plan-file", f"{ROOT}/examples/{model}/{args.plan}", "--plan-ngpus", "2",
                 "--runtime-ngpus", "2", "-o", f"{d}/plan.pb"], "cpu_workers")
    benchlib.sh([f"{args.bin}/nnsc-codegen", f"{d}/trace/graph.pb", f"{d}/plan.pb", "-o",
                 f"{d}/program"], "cpu_workers")
    best = {}
    for _ in range(args.rounds):  # interleaved, so that a slow moment hits every setting
        for workers, bind in SETTINGS:
            r = run(args, d, vocab, f"{d}/program", workers, bind)
            key = (workers, bind)
            if key not in best or r["step_s"] < best[key]["step_s"]:
                best[key] = r
    base = best[("batch", "cores")]["step_s"]
    print(f"{model}:{config} {args.plan} on 2 CPU workers, 1 thread each; median of "
          f"{args.steps} steps after {args.warmup}, best of {args.rounds} runs (ms)")
    print(f"{'gloo_workers':<13} {'cpu_bind':<9} {'step':>8} {'in-step comm':>13} "
          f"{'fwd+bwd':>8} {'step / default':>15}")
    for workers, bind in SETTINGS:
        r = best[(workers, bind)]
        print(f"{workers:<13} {bind:<9} {r['step_s'] * 1e3:8.1f} {r['comm_s'] * 1e3:13.1f} "
              f"{r['fwd_bwd_s'] * 1e3:8.1f} {r['step_s'] / base:15.2f}")


if __name__ == "__main__":
    main()
