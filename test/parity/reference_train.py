"""Single-device PyTorch reference for nnsc's parity tests.

reference_train.py CONFIG.yaml --model MODEL.pt --dp N --out DIR [--float64]

Trains the traced model (torch.jit.load of the same archive nnsc traced, i.e.
the same initial weights) in ONE process with plain torch.optim, feeding
exactly the batches nnsc-run feeds to N data-parallel ranks, and writes
DIR/losses.jsonl (one {"step", "loss", "lr", "grad_norm"} per step) and
DIR/final.pt (the state_dict after the last step). --float64 trains in double
precision (weights and floating-point inputs), an estimate of the exact result
that shows how far float32 rounding alone moves the weights.

Semantics mirrored from docs/trainer-config.md:
- sample g of a step: g = ((step*accum + micro)*dp + rank)*mbs + i.
- data.kind tokens: offset(g) = (g*2654435761 + seed*97) mod (N - T - 1) in
  uint64 arithmetic; x = tokens[o:o+T], y = tokens[o+1:o+T+1].
- data.kind tensors: a safetensors file with one [N, ...] tensor per forward
  input (keyed by the names in inputs.yaml); row(g) = (g*2654435761 + seed*97)
  mod N in uint64 arithmetic, and every input gets its tensor's rows.
- each (micro, rank) loss is a mean over its micro-batch; the step's gradient
  is their average (loss / (accum*dp) per backward), the logged loss their mean.
- buffers the forward writes (BatchNorm's running statistics) follow
  data_parallel.buffers: broadcast (PyTorch DDP) runs every copy's micro-batch
  from copy 0's buffers and carries copy 0's updated buffers on; average
  carries on the mean of the copies' updated floating buffers (integer ones
  from copy 0).
- AdamW decays parameters with dim >= 2 only; clipping is clip_grad_norm_;
  cosine schedule with linear warmup as nanoGPT's get_lr.
"""
import argparse
import json
import math
import os
import struct

import numpy as np
import torch
import yaml


STEPS = [0]  # train.steps, the default decay_steps


def lr_at(step, opt, sched):
    lr = opt["lr"]
    if sched.get("name", "constant") == "constant":
        return lr
    warmup = sched.get("warmup_steps", 0)
    decay = sched.get("decay_steps", 0) or STEPS[0]
    min_lr = sched.get("min_lr", 0.0)
    if step < warmup:
        return lr * (step + 1) / (warmup + 1)
    if step > decay:
        return min_lr
    ratio = (step - warmup) / max(1, decay - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


DTYPES = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16,
          "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32,
          "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool}


def read_safetensors(path):
    """{name: tensor} of a safetensors file (a small reader, no extra package)."""
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    data = raw[8 + n:]
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        dtype = DTYPES[e["dtype"]]
        buf = bytearray(data[b:end])
        t = torch.frombuffer(buf, dtype=dtype) if buf else torch.empty(0, dtype=dtype)
        out[name] = t.reshape(e["shape"])
    return out


def row_of(g, seed, n):
    return ((g * 2654435761 + seed * 97) % (1 << 64)) % n


def tensor_batch(tensors, names, seed, gs):
    """The inputs `names` (forward order) for global samples gs."""
    n = tensors[names[0]].shape[0]
    rows = torch.tensor([row_of(g, seed, n) for g in gs], dtype=torch.int64)
    return tuple(tensors[name][rows] for name in names)


def load_tokens(path, dtype):
    return np.fromfile(path, dtype=np.uint16 if dtype == "uint16" else np.int32).astype(np.int64)


def batch(tokens, block, seed, gs):
    n = len(tokens)
    xs, ys = [], []
    for g in gs:
        o = ((g * 2654435761 + seed * 97) % (1 << 64)) % (n - block - 1)
        xs.append(tokens[o:o + block])
        ys.append(tokens[o + 1:o + 1 + block])
    return torch.from_numpy(np.stack(xs)), torch.from_numpy(np.stack(ys))


def make_optimizer(model, opt):
    name = opt.get("name", "adamw")
    params = [p for p in model.parameters() if p.requires_grad]
    if name == "sgd":
        return torch.optim.SGD(params, lr=opt["lr"], momentum=opt.get("momentum", 0.0),
                               weight_decay=opt.get("weight_decay", 0.0), foreach=False)
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": opt.get("weight_decay", 0.0)},
              {"params": no_decay, "weight_decay": 0.0}]
    cls = torch.optim.AdamW if name == "adamw" else torch.optim.Adam
    return cls(groups, lr=opt["lr"], betas=tuple(opt.get("betas", [0.9, 0.999])),
               eps=opt.get("eps", 1e-8), foreach=False)


class DataParallelBuffers:
    """The model's buffers as nnsc-run keeps them equal across copies: every copy's
    forward of a micro-batch starts from the same buffers; afterwards copy 0's
    (broadcast) or the copies' mean (average) carry on."""

    def __init__(self, model, policy):
        self.buffers = [b for _, b in model.named_buffers()]
        self.policy = policy

    def start(self):
        self.before = [b.detach().clone() for b in self.buffers]
        self.after = []

    def before_copy(self):
        with torch.no_grad():
            for b, v in zip(self.buffers, self.before):
                b.copy_(v)

    def after_copy(self):
        self.after.append([b.detach().clone() for b in self.buffers])

    def finish(self):
        with torch.no_grad():
            for i, b in enumerate(self.buffers):
                copies = [a[i] for a in self.after]
                if self.policy == "average" and b.is_floating_point():
                    b.copy_(torch.stack(copies).mean(dim=0))
                else:
                    b.copy_(copies[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--model", required=True)
    ap.add_argument("--dp", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--inputs", help="inputs.yaml of the export: B and T when the config leaves them 0")
    ap.add_argument("--float64", action="store_true", help="train in double precision")
    args = ap.parse_args()
    cfg = yaml.safe_load(open(args.config))
    data, train, opt = cfg["data"], cfg["train"], cfg["optimizer"]
    sched = cfg.get("lr_schedule", {"name": "constant"})
    seed = cfg.get("seed", 0)
    STEPS[0] = train["steps"]
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    # TorchScript's TensorExpr fuser (on by default in 2.x) can spin forever in
    # backward() of a loaded module; the reference needs plain eager kernels.
    torch._C._jit_set_texpr_fuser_enabled(False)
    model = torch.jit.load(args.model)
    if args.float64:
        model = model.double()
    optimizer = make_optimizer(model, opt)
    specs = yaml.safe_load(open(args.inputs))["inputs"] if args.inputs else []
    shape = specs[0]["shape"] if specs else [0, 0]
    mbs = train.get("micro_batch_size", 0) or shape[0]
    if data.get("kind", "tokens") == "tensors":
        tensors = read_safetensors(data["train"])
        names = [spec["name"] for spec in specs]
        make_batch = lambda gs: tuple(
            t.double() if args.float64 and t.is_floating_point() else t
            for t in tensor_batch(tensors, names, seed, gs))
    else:
        tokens = load_tokens(data["train"], data.get("dtype", "uint16"))
        block = data.get("block_size", 0) or shape[1]
        make_batch = lambda gs: batch(tokens, block, seed, gs)
    accum = train.get("grad_accumulation", 1)
    buffers = DataParallelBuffers(model, cfg.get("data_parallel", {}).get("buffers", "broadcast"))
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "losses.jsonl"), "w")
    for step in range(train["steps"]):
        lr = lr_at(step, opt, sched)
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad(set_to_none=True)
        losses = []
        for micro in range(accum):
            buffers.start()
            for rank in range(args.dp):
                buffers.before_copy()
                first = ((step * accum + micro) * args.dp + rank) * mbs
                out = model(*make_batch(range(first, first + mbs)))
                buffers.after_copy()
                loss = out[0] if isinstance(out, tuple) else out
                (loss / (accum * args.dp)).backward()
                losses.append(loss.item())
            buffers.finish()
        clip = opt.get("grad_clip", 0.0) or 0.0
        params = [p for p in model.parameters() if p.grad is not None]
        norm = torch.nn.utils.clip_grad_norm_(params, clip if clip > 0 else float("inf"))
        optimizer.step()
        log.write(json.dumps({"step": step + 1, "loss": sum(losses) / len(losses), "lr": lr,
                              "grad_norm": float(norm)}) + "\n")
    torch.save(model.state_dict(), os.path.join(args.out, "final.pt"))


if __name__ == "__main__":
    main()
