"""Helpers the Python benches share: running a tool, and a model exported and traced."""
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"


def sh(cmd, who="bench"):
    """Runs `cmd`; its output, or exit with what it printed."""
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{who}: {' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return r.stdout + r.stderr


def prepare(model, config, d, b, who="bench"):
    """examples/<model> exported (config, explicit attention) into d/model and traced into
    d/trace (no self-check); returns the vocabulary size (the first 2-d parameter's rows:
    the token embedding of both examples)."""
    os.makedirs(d, exist_ok=True)
    sh([PY, f"{ROOT}/examples/{model}/export.py", "--config", config, "--attention", "explicit",
        "--out", f"{d}/model"], who)
    sh([f"{b}/nnsc-trace", f"{d}/model/model.pt", "--inputs", f"{d}/model/inputs.yaml",
        "-o", f"{d}/trace", "--no-verify"], who)
    import torch
    m = torch.jit.load(f"{d}/model/model.pt")
    return next(p.shape[0] for _, p in m.named_parameters() if p.dim() == 2)


def write_config(path, program, run_dir, vocab, steps):
    """A trainer config for a timing/memory run: synthetic tokens, 1 thread per worker,
    AdamW, no checkpoint before the end, never resuming; run_dir starts empty."""
    shutil.rmtree(run_dir, ignore_errors=True)
    with open(path, "w") as f:
        f.write(f"program: {program}\nrun_dir: {run_dir}\nthreads: 1\n"
                f"data: {{kind: synthetic, vocab_size: {vocab}}}\n"
                f"train: {{steps: {steps}, log_every: 1000}}\n"
                "optimizer: {name: adamw, lr: 0.0001, weight_decay: 0.1}\n"
                "checkpoint: {every: 0, resume: never}\n")
