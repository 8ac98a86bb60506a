"""End-to-end parity of nnsc against single-device PyTorch.

parity.py --example nanogpt|mlp --dp 2 [--accum 2] [--steps 20] --bin BUILD/bin --work DIR

export (tiny config, dropout 0) → nnsc-trace → nnsc-plan dp → nnsc-codegen →
nnsc-run on DP CPU processes (Gloo) → nnsc-merge-ckpt; then
nanogpt trains on a character-tokenized text (data.kind tokens), mlp on a
generated classification set written as safetensors (data.kind tensors);
test/parity/reference_train.py trains the same archive in one process on the
same batches. Every step's loss and the merged final weights must agree within
--rtol (relative). Prints a table and `parity: N passed, 0 failed` on success."""
import argparse
import json
import os
import struct
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PY = sys.executable


def run(cmd, **kw):
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)


def text_corpus(work):
    shared = os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare.txt")
    if os.path.exists(shared):
        return shared
    path = os.path.join(work, "corpus.txt")  # fallback: a deterministic pseudo-text
    words = ["to", "be", "or", "not", "that", "is", "the", "question", "whether", "tis",
             "nobler", "in", "mind", "suffer", "slings", "arrows", "outrageous", "fortune"]
    g = torch.Generator().manual_seed(0)
    idx = torch.randint(0, len(words), (60000,), generator=g).tolist()
    with open(path, "w") as f:
        f.write(" ".join(words[i] for i in idx))
    return path


def write_safetensors(path, tensors):
    """Writes {name: tensor} as safetensors (a small writer, no extra package)."""
    codes = {torch.float32: "F32", torch.int64: "I64"}
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        raw = t.contiguous().numpy().tobytes()
        header[name] = {"dtype": codes[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def classification_data(out_dir, samples=512, features=16, classes=8):
    """x ~ N(0, 1) [samples, features], y = argmax of a fixed random projection
    to `classes`; torch.Generator seed 0 (train) and 1 (val)."""
    os.makedirs(out_dir, exist_ok=True)
    for split, seed in (("train", 0), ("val", 1)):
        g = torch.Generator().manual_seed(seed)
        proj = torch.randn(features, classes, generator=torch.Generator().manual_seed(42))
        x = torch.randn(samples, features, generator=g)
        y = (x @ proj).argmax(dim=1).to(torch.int64)
        write_safetensors(f"{out_dir}/{split}.safetensors", {"x": x, "y": y})
    return out_dir


def prepare_data(args, work, b):
    """The data directory and the config's data section for the example."""
    if args.example == "mlp":
        data = classification_data(f"{work}/data")
        return {"kind": "tensors", "train": f"{data}/train.safetensors",
                "val": f"{data}/val.safetensors"}
    run([f"{b}/nnsc-prepare-data", text_corpus(work), "-o", f"{work}/data"])
    return {"kind": "tokens", "train": f"{work}/data/train.bin", "val": f"{work}/data/val.bin"}


def write_config(path, args, program, data, run_dir):
    cfg = {
        "program": program, "run_dir": run_dir, "seed": 1234, "threads": 1,
        "data": data,
        "train": {"steps": args.steps, "grad_accumulation": args.accum, "log_every": 5},
        "optimizer": {"name": args.optimizer, "lr": 3e-3, "betas": [0.9, 0.95],
                      "weight_decay": 0.1, "grad_clip": 1.0},
        "lr_schedule": {"name": "cosine", "warmup_steps": 3, "decay_steps": args.steps,
                        "min_lr": 3e-4},
        "checkpoint": {"every": 10, "keep_last": 2},
    }
    import yaml
    with open(path, "w") as f:
        yaml.safe_dump(cfg, f, sort_keys=False)


def rel_err(a, b):
    return abs(a - b) / max(abs(b), 1e-12)


def compare(args, work):
    ours = [json.loads(l) for l in open(os.path.join(work, "run", "metrics.jsonl"))]
    ours = {r["step"]: r["loss"] for r in ours if "loss" in r}
    ref = [json.loads(l) for l in open(os.path.join(work, "ref", "losses.jsonl"))]
    passed = failed = 0
    print(f"{'step':>4} {'nnsc loss':>14} {'pytorch loss':>14} {'rel err':>10}")
    for r in ref:
        got = ours.get(r["step"])
        err = float("inf") if got is None else rel_err(got, r["loss"])
        ok = err <= args.rtol
        passed, failed = passed + ok, failed + (not ok)
        print(f"{r['step']:>4} {got if got is not None else float('nan'):>14.8f} {r['loss']:>14.8f} {err:>10.2e}{'' if ok else '  FAIL'}")
    merged = torch.load(os.path.join(work, "merged.pt"))
    final = torch.load(os.path.join(work, "ref", "final.pt"))
    worst = 0.0
    for k, v in final.items():
        if k not in merged:
            print(f"merged checkpoint lacks {k}  FAIL")
            failed += 1
            continue
        d = (merged[k].double() - v.double()).abs().max().item()
        scale = v.double().abs().max().item()
        e = d / max(scale, 1e-12)
        worst = max(worst, e)
        ok = e <= args.rtol and merged[k].shape == v.shape
        passed, failed = passed + ok, failed + (not ok)
        if not ok:
            print(f"weight {k}: max rel err {e:.2e}  FAIL")
    print(f"merged weights: {len(final)} tensors, worst max-abs-diff / max-abs {worst:.2e}")
    print(f"parity: {passed} passed, {failed} failed")
    return failed == 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--example", required=True, choices=["nanogpt", "mlp"])
    ap.add_argument("--dp", type=int, default=2)
    ap.add_argument("--accum", type=int, default=1)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--optimizer", default="adamw")
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    work, b = args.work, args.bin
    os.makedirs(work, exist_ok=True)
    run([PY, f"{ROOT}/examples/{args.example}/export.py", "--config", "tiny", "--out", f"{work}/model"])
    data = prepare_data(args, work, b)
    run([f"{b}/nnsc-trace", f"{work}/model/model.pt", "--inputs", f"{work}/model/inputs.yaml",
         "-o", f"{work}/trace"])
    run([f"{b}/nnsc-plan", f"{work}/trace/graph.pb", "--policy", "dp", "--runtime-ngpus",
         str(args.dp), "-o", f"{work}/plan.pb"])
    run([f"{b}/nnsc-codegen", f"{work}/trace/graph.pb", f"{work}/plan.pb", "-o", f"{work}/program"])
    write_config(f"{work}/train.yaml", args, f"{work}/program", data, f"{work}/run")
    run([f"{b}/nnsc-run", f"{work}/train.yaml", "--nproc-per-node", str(args.dp)])
    run([f"{b}/nnsc-merge-ckpt", f"{work}/run", "-o", f"{work}/merged.pt"])
    run([PY, f"{HERE}/reference_train.py", f"{work}/train.yaml", "--model", f"{work}/model/model.pt",
         "--dp", str(args.dp), "--out", f"{work}/ref", "--inputs", f"{work}/model/inputs.yaml"])
    sys.exit(0 if compare(args, work) else 1)


if __name__ == "__main__":
    main()
