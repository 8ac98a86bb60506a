"""PyTorch DDP baseline for bench/dp_vs_ddp.sh.

ddp_reference.py --config NAME --world 2 --steps S --warmup W --mbs B
Trains examples/nanogpt's GPT with DistributedDataParallel over Gloo in WORLD
CPU processes (1 intra-op thread each), AdamW, synthetic tokens, and prints
`ddp tokens/s: X` measured over the steps after the warmup ones."""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "nanogpt"))
from model import CONFIGS, GPT  # noqa: E402


def worker(rank, args, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=args.world)
    cfg = CONFIGS[args.config]
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(GPT(cfg))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
    gen = torch.Generator().manual_seed(rank)
    T = cfg.block_size
    start = None
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            dist.barrier()
            start = time.time()
        x = torch.randint(0, cfg.vocab_size, (args.mbs, T), generator=gen)
        y = torch.randint(0, cfg.vocab_size, (args.mbs, T), generator=gen)
        out = model(x, y)
        loss = out[0] if isinstance(out, tuple) else out
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    dist.barrier()
    elapsed = time.time() - start
    if rank == 0:
        tokens = args.steps * args.mbs * T * args.world
        print(f"ddp tokens/s: {tokens / elapsed:.1f} ({args.steps} steps in {elapsed:.2f} s)")
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="default")
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--mbs", type=int, default=4)
    ap.add_argument("--port", type=int, default=29533)
    args = ap.parse_args()
    mp.spawn(worker, args=(args, args.port), nprocs=args.world, join=True)


if __name__ == "__main__":
    main()
