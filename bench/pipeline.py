"""Pipeline step time against the bubble formula.

bench/pipeline.py [--bin build/bin] [--work DIR] [--config small] [--steps 12]

For p = 2 and 4 pipeline stages (1F1B, one process a stage, 1 thread each) and
m = 1, 4, 8 micro-batches, trains nanoGPT with synthetic tokens and compares
the median step time with the ideal of a pipeline whose only loss is the
bubble: t1(m) / p * (m + p - 1) / m, where t1(m) is one process running the
whole model over the same m micro-batches, measured in the same invocation.
The overhead beyond the bubble (sends, receives, the stage imbalance, the
reducers after the schedule) is measured / ideal - 1. With fewer cores than
stages the stages share cores and the figure mostly measures that."""
import argparse
import os

from benchlib import ROOT, metrics_medians, prepare, sh, write_config


def median_step(run_dir, skip=2):
    return metrics_medians(run_dir, skip)["step_s"]


def train(b, d, name, policy, stages, micro, vocab, steps):
    plan = [f"{b}/nnsc-plan", f"{d}/trace/graph.pb", "--policy", policy, "--runtime-ngpus",
            str(stages), "--micro-batches", str(micro), "-o", f"{d}/{name}.pb"]
    if stages > 1:
        plan += ["--pipeline-stages", str(stages)]
    sh(plan, "pipeline")
    sh([f"{b}/nnsc-codegen", f"{d}/trace/graph.pb", f"{d}/{name}.pb", "-o", f"{d}/{name}"],
       "pipeline")
    cfg = f"{d}/{name}.yaml"
    write_config(cfg, f"{d}/{name}", f"{d}/{name}-run", vocab, steps)
    text = open(cfg).read().replace("log_every: 1000}",
                                    f"log_every: 1000, grad_accumulation: {micro}}}")
    with open(cfg, "w") as f:
        f.write(text)
    sh([f"{b}/nnsc-run", cfg, "--nproc-per-node", str(stages)], "pipeline")
    return median_step(f"{d}/{name}-run")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=f"{ROOT}/build/bin")
    ap.add_argument("--work", default=f"{ROOT}/out/bench-pipeline")
    ap.add_argument("--config", default="small")
    ap.add_argument("--steps", type=int, default=12)
    args = ap.parse_args()
    d = args.work
    vocab = prepare("nanogpt", args.config, d, args.bin, "pipeline")
    print(f"nanoGPT {args.config}, 1F1B, {os.cpu_count()} cores, median step of {args.steps - 2}")
    print(f"{'p':>2} {'m':>2} {'t1(m) s':>9} {'pipeline s':>11} {'ideal s':>9} {'bubble':>7} "
          f"{'overhead':>9}")
    for m in (1, 4, 8):
        t1 = train(args.bin, d, f"whole-m{m}", "dp", 1, m, vocab, args.steps)
        for p in (2, 4):
            tp = train(args.bin, d, f"pp{p}-m{m}", "pp", p, m, vocab, args.steps)
            ideal = t1 / p * (m + p - 1) / m
            bubble = (p - 1) / (m + p - 1)
            print(f"{p:>2} {m:>2} {t1:>9.4f} {tp:>11.4f} {ideal:>9.4f} {bubble:>7.2f} "
                  f"{tp / ideal - 1:>+9.2f}")


if __name__ == "__main__":
    main()
