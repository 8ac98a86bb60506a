"""PyTorch eager side of bench/shakespeare_char.sh: nanoGPT's shakespeare_char recipe.

eager_shakespeare.py --data DIR [--config default] [--mbs 64] [--steps 5000] [--lr 1e-3]
    [--min-lr 1e-4] [--warmup 100] [--beta2 0.99] [--weight-decay 0.1] [--grad-clip 1.0]
    [--val-every 250] [--val-batches 200] [--log-every 10] [--device cuda|cpu]
    [--precision bf16|fp32] [--dropout P] [--val-windows nnsc|random] [--seed 1337] [--val-seed 0]
    [--threads N] [--train-windows random|nnsc] [--matched MODEL.pt] [--losses FILE]

Trains examples/nanogpt's GPT on DIR/train.bin (nnsc-prepare-data's uint16 ids) as nanoGPT's
train.py does: random windows of the training split each step, AdamW over two groups (weight
decay on tensors of >= 2 dims; fused on cuda where this torch has it), get_lr's warmup and
cosine, clip_grad_norm_, bf16 under torch.autocast, a host read of the loss every log-every
steps. Validation as nnsc-run's (after every val-every steps and at the end): model.eval(),
val-batches windows of DIR/val.bin, the same windows each time: nnsc-run's own (its data
formula with its `seed` as --val-seed, docs/trainer-config.md) unless --val-windows random.
Prints one line per validation, `eager step N val loss X elapsed Y s (train loss Z)` (Z: the
mean training loss, dropout on, over the steps since the last validation), and at the end
`eager best val loss X at step N (elapsed Y s); total Z s`. Elapsed times start after the
model, optimizer and data are ready (as nnsc-run's elapsed_s starts with its training loop),
the device synchronised.

--matched MODEL.pt takes nnsc-run's side of every draw but the kernels' own: the initial
weights are the exported archive's (export.py's, which nnsc-run starts from), the training
windows are nnsc-run's (its data formula with --val-seed as its `seed`), and the generators
are seeded with --val-seed after the model is built, as nnsc-run seeds them before its first
step, so the dropout masks come from the same streams. A difference between the two runs is
then the two programs' arithmetic, not sampling. --losses FILE writes every step's training
loss, one per line."""
import argparse
import dataclasses
import inspect
import math
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples",
                                "nanogpt"))
from model import CONFIGS, GPT  # noqa: E402


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def lr_at(it, args):
    """nanoGPT's get_lr."""
    if it < args.warmup:
        return args.lr * (it + 1) / (args.warmup + 1)
    if it > args.steps:
        return args.min_lr
    ratio = (it - args.warmup) / (args.steps - args.warmup)
    return args.min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (args.lr - args.min_lr)


def nnsc_offset(g, seed, n, block):
    """nnsc-run's window of global sample g (docs/trainer-config.md)."""
    def mix(x):  # SplitMix64's step
        m = (1 << 64) - 1
        x = (x + 0x9E3779B97F4A7C15) & m
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & m
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & m
        return x ^ (x >> 31)
    return mix(g ^ mix(seed)) % (n - block - 1)


def windows(data, starts, block, device):
    x = torch.stack([torch.from_numpy(data[i:i + block].astype(np.int64)) for i in starts])
    y = torch.stack([torch.from_numpy(data[i + 1:i + 1 + block].astype(np.int64))
                     for i in starts])
    if device == "cuda":
        return (x.pin_memory().to(device, non_blocking=True),
                y.pin_memory().to(device, non_blocking=True))
    return x, y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--config", default="default")
    ap.add_argument("--mbs", type=int, default=64)
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--min-lr", type=float, default=1e-4)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--beta2", type=float, default=0.99)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--grad-clip", type=float, default=1.0)
    ap.add_argument("--val-every", type=int, default=250)
    ap.add_argument("--val-batches", type=int, default=200)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--precision", default="bf16", choices=["fp32", "bf16"])
    ap.add_argument("--val-windows", default="nnsc", choices=["nnsc", "random"],
                    help="nnsc: the windows nnsc-run validates on (data seed --val-seed); random: drawn "
                         "once with seed 1")
    ap.add_argument("--train-windows", default="random", choices=["random", "nnsc"],
                    help="random: torch.randint as nanoGPT (default); nnsc: nnsc-run's training "
                         "windows of data seed --val-seed, the rest of the draws eager's own "
                         "(--matched implies nnsc)")
    ap.add_argument("--dropout", type=float, default=None, help="the config's dropout by default")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--val-seed", type=int, default=0,
                    help="the nnsc-run seed whose validation windows --val-windows nnsc uses")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--matched", metavar="MODEL_PT",
                    help="nnsc-run's initial weights (this archive), training windows and seeding")
    ap.add_argument("--losses", help="write every step's training loss here")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    cfg = CONFIGS[args.config]
    if args.dropout is not None:
        cfg = dataclasses.replace(cfg, dropout=args.dropout)
    T = cfg.block_size
    train = np.memmap(os.path.join(args.data, "train.bin"), dtype=np.uint16, mode="r")
    val = np.memmap(os.path.join(args.data, "val.bin"), dtype=np.uint16, mode="r")
    model = GPT(cfg)
    if args.matched:
        model.load_state_dict(torch.jit.load(args.matched, map_location="cpu").state_dict())
        torch.manual_seed(args.val_seed)  # nnsc-run: at::manual_seed(seed + dp_rank)
    model = model.to(args.device)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    extra = {}
    if args.device == "cuda" and "fused" in inspect.signature(torch.optim.AdamW).parameters:
        extra["fused"] = True
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, args.beta2), **extra)
    autocast = torch.autocast(args.device, dtype=torch.bfloat16, enabled=args.precision == "bf16")
    gen = torch.Generator().manual_seed(args.seed)

    # Every validation reads the same windows: drawn once, before the clock starts (in Python,
    # nnsc-run's offsets take about 33 ms, which each validation would otherwise pay).
    if args.val_windows == "nnsc":  # nnsc-run's sampleOffset with its data seed
        val_starts = torch.tensor([[nnsc_offset(g, args.val_seed, len(val), T)
                                    for g in range(b * args.mbs, (b + 1) * args.mbs)]
                                   for b in range(args.val_batches)])
    else:
        val_starts = torch.randint(len(val) - T - 1, (args.val_batches, args.mbs),
                                   generator=torch.Generator().manual_seed(1))

    def validate():
        model.eval()
        starts = val_starts
        total = torch.zeros((), device=args.device)
        with torch.no_grad():
            for b in range(args.val_batches):
                x, y = windows(val, starts[b].tolist(), T, args.device)
                with autocast:
                    out = model(x, y)
                total += (out[0] if isinstance(out, tuple) else out).float()
        model.train()
        return total.item() / args.val_batches

    best, best_step, best_at = float("inf"), 0, 0.0
    sync(args.device)
    start = time.time()
    train_sum, train_from = torch.zeros((), device=args.device), 0
    step_losses = []
    for it in range(args.steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(it, args)
        if args.matched or args.train_windows == "nnsc":
            # nnsc-run's sample g = step * mbs + i (one rank, no accumulation)
            starts = [nnsc_offset(it * args.mbs + i, args.val_seed, len(train), T)
                      for i in range(args.mbs)]
        else:
            starts = torch.randint(len(train) - T - 1, (args.mbs,), generator=gen).tolist()
        x, y = windows(train, starts, T, args.device)
        with autocast:
            out = model(x, y)
        loss = out[0] if isinstance(out, tuple) else out
        train_sum += loss.detach().float()  # on the device: read at the next validation
        if args.losses:
            step_losses.append(loss.detach().float())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if args.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        opt.step()
        done = it + 1
        if done % args.log_every == 0:
            loss.item()  # the host read nanoGPT's log line makes
        if done % args.val_every == 0 or done == args.steps:
            v = validate()
            elapsed = time.time() - start
            mean = train_sum.item() / (done - train_from)
            train_sum.zero_()
            train_from = done
            print(f"eager step {done} val loss {v:.4f} elapsed {elapsed:.2f} s "
                  f"(train loss {mean:.4f})", flush=True)
            if v < best:
                best, best_step, best_at = v, done, elapsed
    sync(args.device)
    total = time.time() - start
    if args.losses:
        with open(args.losses, "w") as f:
            f.writelines(f"{v:.9g}\n" for v in torch.stack(step_losses).tolist())
    print(f"eager best val loss {best:.4f} at step {best_step} (elapsed {best_at:.2f} s); "
          f"total {total:.2f} s")


if __name__ == "__main__":
    main()
