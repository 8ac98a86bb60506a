"""PyTorch eager baseline for bench/gpu_vs_eager.sh.

eager_reference.py --config gpt2 --mbs 8 --steps S --warmup W --device cuda|cpu
                   --precision fp32|tf32|bf16 [--threads N] [--fused] [--profile FILE]
Trains examples/nanogpt's GPT in one process as nanoGPT's train.py does (AdamW,
bf16 under torch.autocast, synthetic tokens; tf32: float32 with
torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32 set; --fused:
AdamW's fused kernel, else PyTorch's default) and prints `eager tokens/s: X`
over the steps after the warmup ones (the device synchronised at both ends). The loss is read
on the host after step 1 and every WARMUP steps, as nnsc-run reads its losses in the benchmark
(train.log_every = WARMUP); those reads drain the device queue on both sides. --profile FILE:
torch.profiler over steps 8-9 (nnsc-run's profile.start_step/end_step in gpu_session.sh's
profile stage), its operators by self device time and by self host time written to FILE."""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples",
                                "nanogpt"))
from model import CONFIGS, GPT  # noqa: E402


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="gpt2")
    ap.add_argument("--mbs", type=int, default=8)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--precision", default="fp32", choices=["fp32", "tf32", "bf16"])
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--fused", action="store_true", help="AdamW(fused=True)")
    ap.add_argument("--profile", metavar="FILE", help="profile steps 8-9 into FILE")
    args = ap.parse_args()
    if args.profile and args.warmup + args.steps < 10:
        ap.error(f"--profile records steps 8-9: --warmup + --steps must be at least 10, "
                 f"got {args.warmup + args.steps}")
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.precision == "tf32":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    cfg = CONFIGS[args.config]
    torch.manual_seed(0)
    model = GPT(cfg).to(args.device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1,
                            **({"fused": True} if args.fused else {}))
    gen = torch.Generator().manual_seed(0)
    T = cfg.block_size
    autocast = torch.autocast(args.device, dtype=torch.bfloat16, enabled=args.precision == "bf16")
    start = None
    profiler = None
    for step in range(args.warmup + args.steps):
        if args.profile and step == 7:  # steps 8-9 counted from 1, as nnsc-run counts them
            sync(args.device)
            profiler = torch.profiler.profile()
            profiler.__enter__()
        if args.profile and step == 9:
            sync(args.device)
            profiler.__exit__(None, None, None)
            with open(args.profile, "w") as f:
                for keys in (("self_device_time_total", "self_cuda_time_total"),
                             ("self_cpu_time_total",)):
                    for key in keys:  # the device key's name before PyTorch 2.4: the second
                        try:
                            table = profiler.key_averages().table(sort_by=key, row_limit=15)
                            break
                        except (AttributeError, KeyError):
                            table = f"(no {key} in this PyTorch)"
                    f.write(table + "\n")
        if step == args.warmup:
            sync(args.device)
            start = time.time()
        x = torch.randint(0, cfg.vocab_size, (args.mbs, T), generator=gen).to(args.device)
        y = torch.randint(0, cfg.vocab_size, (args.mbs, T), generator=gen).to(args.device)
        with autocast:
            out = model(x, y)
        loss = out[0] if isinstance(out, tuple) else out
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step == 0 or (step + 1) % max(args.warmup, 1) == 0:
            loss.item()  # read as nnsc-run reads its losses (log_every = warmup): a device drain
    sync(args.device)
    elapsed = time.time() - start
    tokens = args.steps * args.mbs * T
    print(f"eager tokens/s: {tokens / elapsed:.1f} ({args.steps} steps in {elapsed:.2f} s)")


if __name__ == "__main__":
    main()
