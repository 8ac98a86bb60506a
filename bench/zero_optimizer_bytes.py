"""Per-rank optimizer-state bytes with and without ZeRO-1 (docs/zero.md).

bench/zero_optimizer_bytes.py [--models nanogpt:small,llama:tiny] [--dps 2,4]
                              [--precisions fp32,bf16] [--bin build/bin]

For each model, data-parallel size and precision.mode: export, trace, plan (--policy dp,
--zero 0 and 1),
generate, train 2 AdamW steps on CPU processes (nnsc-run --nproc-per-node dp, synthetic
tokens) and read what every rank's optimizer holds from nnsc-run's closing line
"optimizer-state bytes per rank: ..." (the nbytes of the tensors themselves). Beside each
measurement the expected bytes: AdamW keeps exp_avg and exp_avg_sq in float32 (8 bytes per
element) and a float32 step per parameter; under bf16 the float32 masters count too (4 bytes
per element: 12 with the moments, Megatron's distributed-optimizer accounting; the model is
then exported in bfloat16); ZeRO-1 keeps
moments and masters for ceil(N / dp) elements (each bucket padded to a multiple of dp, so up
to dp-1 elements more per bucket). Prints a table and the ratio ZeRO-1 / plain (goal at
dp=2: 0.5), and beside it the largest rank's measured peak memory (nnsc-run's "peak memory per
rank" line: live CPU tensor storage, activations and communication buffers included).
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def prepare(model, config, work, b, dtype):
    os.makedirs(work, exist_ok=True)
    sh([PY, f"{ROOT}/examples/{model}/export.py", "--config", config, "--out", f"{work}/model",
        "--dtype", dtype])
    sh([f"{b}/nnsc-trace", f"{work}/model/model.pt", "--inputs", f"{work}/model/inputs.yaml",
        "-o", f"{work}/model"])
    import torch
    m = torch.jit.load(f"{work}/model/model.pt")
    params = {t.data_ptr(): t for _, t in m.named_parameters()}  # tied weights once
    return sum(t.numel() for t in params.values()), len(params)


def measure(work, b, dp, zero, precision):
    tag = f"{work}/dp{dp}-zero{zero}-{precision}"
    sh([f"{b}/nnsc-plan", f"{work}/model/graph.pb", "--policy", "dp", "--runtime-ngpus", str(dp),
        "--zero", str(zero), "-o", f"{tag}.plan.pb"])
    sh([f"{b}/nnsc-codegen", f"{work}/model/graph.pb", f"{tag}.plan.pb", "-o", f"{tag}.prog"])
    with open(f"{tag}.yaml", "w") as f:
        f.write(f"program: {tag}.prog\nrun_dir: {tag}.run\nthreads: 1\n"
                "data: {kind: synthetic, vocab_size: 64}\ntrain: {steps: 2, log_every: 1000}\n"
                "optimizer: {name: adamw, lr: 0.0001}\ncheckpoint: {every: 0, resume: never}\n"
                f"precision: {{mode: {precision}}}\n")
    out = sh([f"{b}/nnsc-run", f"{tag}.yaml", "--nproc-per-node", str(dp)])
    line = re.search(r"optimizer-state bytes per rank: (.*)", out).group(1)
    peak = re.search(r"peak memory per rank \([^)]*\): measured ([^;]*);", out).group(1)
    return ([int(c.replace(",", "")) for c in line.split("|")],
            max(float(c.split()[0]) for c in peak.split("|")))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="nanogpt:small,llama:tiny")
    ap.add_argument("--dps", default="2,4")
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--bin", default=f"{ROOT}/build/bin")
    ap.add_argument("--work", default=f"{ROOT}/out/bench/zero")
    args = ap.parse_args()
    print(f"{'model':<14} {'dp':>2} {'prec':>4} {'zero':>4} {'measured bytes/rank (min-max)':>30} "
          f"{'expected':>12} {'zero1/plain':>11} {'peak MiB':>9}")
    for spec in args.models.split(","):
        model, config = spec.split(":")
        for dp in map(int, args.dps.split(",")):
            for precision in args.precisions.split(","):
                # Traced in the training dtype (docs/trainer-config.md, "Export in the
                # training dtype": Llama's RMSNorm casts).
                work = f"{args.work}/{model}-{config}-{precision}"
                numel, nparams = prepare(model, config, work, args.bin,
                                         "float32" if precision == "fp32" else "bfloat16")
                plain = None
                for zero in (0, 1):
                    got, peak = measure(work, args.bin, dp, zero, precision)
                    shard = numel if zero == 0 else -(-numel // dp)
                    expected = (8 if precision == "fp32" else 12) * shard + 4 * nparams
                    ratio = "" if zero == 0 else f"{max(got) / plain:.3f}"
                    plain = max(got) if zero == 0 else plain
                    print(f"{model + '-' + config:<14} {dp:>2} {precision:>4} {zero:>4} "
                          f"{f'{min(got):,} - {max(got):,}':>30} {expected:>12,} {ratio:>11} "
                          f"{peak:>9.2f}",
                          flush=True)


if __name__ == "__main__":
    sys.exit(main())
