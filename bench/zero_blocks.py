"""ZeRO in blocks of ranks (nnsc-plan --zero-ngroups, docs/zero.md) against ZeRO over all the
copies: what each rank holds, the step time and the losses, measured on CPU processes; and what
the cost model predicts for the gradient reduction on a multi-node GPU cluster.

bench/zero_blocks.py [--model nanogpt:small] [--dp 4] [--ngroups 1,2,4] [--zero 1]
                     [--steps 6] [--warmup 2] [--bucket-mb 1] [--bin build/bin] [--work DIR]
                     [--predict nanogpt:gpt3-1.3b] [--predict-ranks 32]

Measured: for each NGROUPS, nnsc-plan --policy dp --zero ZERO --zero-ngroups N over DP copies,
nnsc-codegen with BUCKET_MB buckets, STEPS AdamW steps on DP CPU processes (Gloo over loopback,
synthetic tokens, 1 thread each). Printed per row: rank 0's optimizer-state bytes (nnsc-run's
"optimizer-state bytes per rank", the nbytes of its tensors) beside the expected 8 bytes per
element over DP / N copies (plus the float32 step counts), rank 0's peak of live CPU tensor
storage, the median step time after WARMUP steps and its ratio to N = 1, and the largest
difference of the losses from N = 1's (the sums are taken in another order: rounding apart).
Loopback has no slow link between blocks, so the step time here shows the cost of the second
collective, not the saving a cluster's inter-node links would see.

Predicted (no measurement: this machine has no cluster): the cost model's gradient-reduction
time of the PREDICT model (traced on the meta device) under --policy dp --zero ZERO over
PREDICT_RANKS H100s, 8 per node (configs/devices/h100-sxm.yaml, configs/comm/
h100-nvlink-ib400.yaml), for each N of 1 and PREDICT_RANKS / 8 (blocks of one node), with the
optimizer bytes the estimate gives each device.
"""
import argparse
import re
import statistics

import benchlib

ROOT = benchlib.ROOT
MIB = 2.0**20


def sh(cmd):
    return benchlib.sh(cmd, "zero_blocks")


def plan(b, graph, out, ranks, zero, ngroups, extra=()):
    return sh([f"{b}/nnsc-plan", graph, "--policy", "dp", "--runtime-ngpus", str(ranks), "--zero",
               str(zero), "--zero-ngroups", str(ngroups), "-o", out] + list(extra))


def measure(args, d, vocab, n):
    tag = f"{d}/dp{args.dp}-zero{args.zero}-ngroups{n}"
    plan(args.bin, f"{d}/trace/graph.pb", f"{tag}.pb", args.dp, args.zero, n)
    sh([f"{args.bin}/nnsc-codegen", f"{d}/trace/graph.pb", f"{tag}.pb", "-o", tag,
        "--bucket-mb", str(args.bucket_mb)])
    cfg, run_dir = f"{tag}.yaml", f"{tag}-run"
    benchlib.write_config(cfg, tag, run_dir, vocab, args.steps)
    log = sh([f"{args.bin}/nnsc-run", cfg, "--nproc-per-node", str(args.dp)])
    optim = re.search(r"optimizer-state bytes per rank: ([0-9,]+)", log).group(1)
    peak = re.search(r"peak memory per rank \([^)]*\): measured ([0-9.]+) MiB", log).group(1)
    rows = benchlib.metrics_rows(run_dir)
    step = statistics.median(r["step_s"] for r in rows[args.warmup:])
    return int(optim.replace(",", "")), float(peak) * MIB, step, [r["loss"] for r in rows]


def predict(args):
    model, config = args.predict.split(":")
    d = f"{args.work}/predict-{model}-{config}"
    sh([benchlib.PY, f"{ROOT}/examples/{model}/export.py", "--config", config, "--meta",
        "--batch", "8", "--attention", "explicit", "--out", f"{d}/model"])
    sh([f"{args.bin}/nnsc-trace", f"{d}/model/model.pt", "--inputs", f"{d}/model/inputs.yaml",
        "-o", f"{d}/trace", "--no-verify"])
    cost = ["--device", f"{ROOT}/configs/devices/h100-sxm.yaml", "--comm",
            f"{ROOT}/configs/comm/h100-nvlink-ib400.yaml", "--devices-per-node", "8", "--print"]
    print(f"\npredicted by the cost model (not measured): {args.predict} (micro-batch 8), "
          f"dp {args.predict_ranks} on H100s, 8 per node, ZeRO-{args.zero}")
    print(f"{'ngroups':>8} {'block':>6} {'grad reduction':>15} {'exposed':>10} "
          f"{'optimizer/device':>17}")
    base = None
    for n in sorted({1, args.predict_ranks // 8}):
        text = plan(args.bin, f"{d}/trace/graph.pb", f"{d}/n{n}.pb", args.predict_ranks,
                    args.zero, n, cost)
        red = re.search(r"grad all-reduce ([0-9.]+ [mu]?s) in \d+ buckets?, ([0-9.]+ [mu]?s) "
                        r"exposed", text)
        opt = re.search(r"device 0: params .*?, optimizer ([0-9.]+ [KMG]iB)", text)
        seconds = seconds_of(red.group(1))
        base = base or seconds
        print(f"{n:>8} {args.predict_ranks // n:>6} {red.group(1):>15} {red.group(2):>10} "
              f"{opt.group(1):>17}   {seconds / base:.2f}x")


def seconds_of(text):
    value, unit = text.split()
    return float(value) * {"s": 1.0, "ms": 1e-3, "us": 1e-6}[unit]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="nanogpt:small")
    ap.add_argument("--dp", type=int, default=4)
    ap.add_argument("--ngroups", default="1,2,4")
    ap.add_argument("--zero", type=int, default=1)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--bucket-mb", type=float, default=1)
    ap.add_argument("--bin", default=f"{ROOT}/build/bin")
    ap.add_argument("--work", default=f"{ROOT}/out/bench/zero_blocks")
    ap.add_argument("--predict", default="nanogpt:gpt3-1.3b",
                    help="model:config for the cost model's prediction ('' to skip)")
    ap.add_argument("--predict-ranks", type=int, default=32)
    args = ap.parse_args()
    model, config = args.model.split(":")
    d = f"{args.work}/{model}-{config}"
    vocab = benchlib.prepare(model, config, d, args.bin, "zero_blocks")
    import torch
    m = torch.jit.load(f"{d}/model/model.pt")
    params = {t.data_ptr(): t for _, t in m.named_parameters()}  # tied weights once
    elements = sum(t.numel() for t in params.values())
    print(f"{args.model}, {elements:,} parameters, dp {args.dp}, ZeRO-{args.zero}, AdamW, "
          f"{args.bucket_mb:g} MiB buckets, {args.steps} steps (median step time after "
          f"{args.warmup}), rank 0, CPU processes over Gloo")
    print(f"{'ngroups':>8} {'block':>6} {'optimizer bytes':>16} {'expected':>12} "
          f"{'peak':>11} {'step':>9} {'vs 1':>6} {'losses vs 1':>12}")
    base = None
    for n in [int(v) for v in args.ngroups.split(",")]:
        optim, peak, step, losses = measure(args, d, vocab, n)
        copies = args.dp // n  # the copies a block shards over
        expected = 8 * elements / copies + 4 * len(params)
        base = base or (step, losses)
        diff = max(abs(a - b) for a, b in zip(losses, base[1]))
        print(f"{n:>8} {args.dp // n:>6} {optim:>16,} {expected:>12,.0f} "
              f"{peak / MIB:>7.2f} MiB {step * 1e3:>6.1f} ms {step / base[0]:>5.2f}x "
              f"{diff:>12.1e}")
    if args.predict:
        predict(args)


if __name__ == "__main__":
    main()
