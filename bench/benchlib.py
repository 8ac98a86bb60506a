"""Helpers the Python benches share: running a tool, and a model exported and traced."""
import argparse
import json
import os
import shutil
import subprocess
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"


def sh(cmd, who="bench"):
    """Runs `cmd`; its output, or exit with what it printed."""
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{who}: {' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return r.stdout + r.stderr


def prepare(model, config, d, b, who="bench", batch=None):
    """examples/<model> exported (config, explicit attention, the config's micro-batch or
    `batch`) into d/model and traced into d/trace (no self-check); returns the vocabulary size
    (the first 2-d parameter's rows: the token embedding of both examples)."""
    os.makedirs(d, exist_ok=True)
    sh([PY, f"{ROOT}/examples/{model}/export.py", "--config", config, "--attention", "explicit",
        "--out", f"{d}/model"] + (["--batch", str(batch)] if batch else []), who)
    sh([f"{b}/nnsc-trace", f"{d}/model/model.pt", "--inputs", f"{d}/model/inputs.yaml",
        "-o", f"{d}/trace", "--no-verify"], who)
    import torch
    m = torch.jit.load(f"{d}/model/model.pt")
    return next(p.shape[0] for _, p in m.named_parameters() if p.dim() == 2)


def write_config(path, program, run_dir, vocab, steps, precision="fp32"):
    """A trainer config for a timing/memory run: synthetic tokens, 1 thread per worker,
    AdamW, no checkpoint before the end, never resuming; run_dir starts empty; `precision`
    the trainer's precision.mode."""
    shutil.rmtree(run_dir, ignore_errors=True)
    with open(path, "w") as f:
        f.write(f"program: {program}\nrun_dir: {run_dir}\nthreads: 1\n"
                f"data: {{kind: synthetic, vocab_size: {vocab}}}\n"
                f"train: {{steps: {steps}, log_every: 1000}}\n"
                "optimizer: {name: adamw, lr: 0.0001, weight_decay: 0.1}\n"
                "checkpoint: {every: 0, resume: never}\n"
                f"precision: {{mode: {precision}}}\n")


def train_measured(b, cfg, run_dir, dp, extra, who="bench"):
    """nnsc-run `cfg` on dp CPU processes with `extra` arguments; returns rank 0's measured
    peak and plan estimate (bytes), the rows of its metrics.jsonl and the estimate's parts as
    nnsc-run printed them."""
    import re
    MIB = 2.0**20
    log = sh([f"{b}/nnsc-run", cfg, "--nproc-per-node", str(dp)] + extra, who)
    mem = re.search(r"peak memory per rank \([^)]*\): measured ([0-9.]+) MiB[^;]*; "
                    r"plan estimate ([0-9.]+) MiB", log)
    parts = re.search(r"estimate of rank 0[^:]*: (.*)", log)
    if not mem:
        sys.exit(f"{who}: nnsc-run printed no memory line:\n{log}")
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    return (float(mem.group(1)) * MIB, float(mem.group(2)) * MIB, rows,
            parts.group(1) if parts else "")


def train_zero_program(b, d, tag, precision, vocab, steps, dp, accum, warmup, who="bench",
                       overrides=(), run_tag=""):
    """Trains the program d/tag under `precision` for `steps` steps of `accum` micro-batches on
    dp processes (nnsc-run `overrides` such as --data_parallel.zero3_prefetch=false; `run_tag`
    names the run apart); returns rank 0's measured peak and plan estimate (bytes), the median
    step time after `warmup` steps, each step's (loss, grad norm) and the estimate's parts."""
    name = f"{tag}{run_tag}-{precision}"
    cfg, run_dir = f"{d}/{name}.yaml", f"{d}/{name}-run"
    write_config(cfg, f"{d}/{tag}", run_dir, vocab, steps, precision)
    peak, est, rows, parts = train_measured(b, cfg, run_dir, dp,
                                            [f"--train.grad_accumulation={accum}", *overrides],
                                            who)
    step_s = sorted(r["step_s"] for r in rows[warmup:])
    return (peak, est, step_s[len(step_s) // 2],
            [(r["loss"], r.get("grad_norm")) for r in rows], parts)


def losses_apart(a, b):
    """The largest relative difference between two runs' (loss, grad norm) pairs, step by step."""
    diffs = [abs(x - y) / max(abs(y), 1e-30)
             for (la, ga), (lb, gb) in zip(a, b)
             for x, y in ((la, lb), (ga or 0.0, gb or 0.0))]
    return max(diffs) if diffs else 0.0


def metrics_rows(run_dir):
    """The rows of nnsc-run's metrics.jsonl in run_dir, as dicts."""
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def metrics_medians(run_dir, warmup, keys=("step_s",)):
    """The median of each of `keys` over nnsc-run's metrics.jsonl in run_dir, the first `warmup`
    steps left out."""
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        steps = [json.loads(line) for line in f][warmup:]
    return {k: statistics.median(s[k] for s in steps) for k in keys}


def size_blas_threads(argv):
    """Sizes OpenBLAS's and OpenMP's own pools to --threads (default 1) before torch loads:
    torch.set_num_threads does not size OpenBLAS's, which otherwise takes every core (nnsc's
    workers size it: lib/Runtime/Threads.cpp). Call before `import torch`."""
    threads = argv[argv.index("--threads") + 1] if "--threads" in argv[:-1] else "1"
    os.environ["OPENBLAS_NUM_THREADS"] = threads
    os.environ["OMP_NUM_THREADS"] = threads


def one_thread_args(who):
    """--spec (a device spec measured with one thread), --threads and --repeat, parsed; exits
    naming the spec when it is missing."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", default=f"{ROOT}/out/bench/cost_fidelity/cpu-1.yaml",
                    help="a device spec measured with one thread (bench/cost_fidelity.sh makes "
                         "it, or nnsc-profile-device --threads 1 --out FILE)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    if not os.path.exists(args.spec):
        sys.exit(f"{who}: {args.spec}: no such spec; run bench/cost_fidelity.sh first or "
                 "nnsc-profile-device --threads 1 --out FILE")
    return args


def spec_value(path, key, who="bench"):
    """A number of a device spec's YAML by its key (`float32` under flops, `memory_bandwidth`)."""
    for line in open(path):
        s = line.split("#")[0].strip()
        if s.startswith(key + ":"):
            return float(s.split(":", 1)[1])
    sys.exit(f"{who}: {path} has no {key}")


def median_seconds(fn, repeat):
    """The median of `repeat` timed calls of fn, after one untimed (first-touch pages, buffers)."""
    fn()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    samples.sort()
    return samples[len(samples) // 2]

