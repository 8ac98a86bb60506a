"""Text from a trained nanoGPT: nnsc-merge-ckpt's merged checkpoint in model.py's GPT.

    sample.py MERGED.pt --data DATA_DIR [--config small] [--start TEXT] [--chars N]
              [--samples K] [--temperature T] [--top-k K] [--seed S]

The merged file is what torch.save(model.state_dict()) writes, so it loads with
torch.load(weights_only=True) into the GPT of the config the run trained (strict:
every name and shape must match). DATA_DIR is nnsc-prepare-data's output; its
meta.json maps characters to token ids. Each sample starts from --start and draws
--chars characters one at a time from the model's next-character distribution:
logits of the data's characters divided by the temperature, all but the top k
set to -inf, softmax, one draw (nanoGPT's sample.py; its defaults are temperature 0.8 and top-k 200, which
over 65 characters is all of them). The context is the last block_size
characters. The model runs in eval mode (no dropout), on the CPU unless --device
says otherwise; the same seed draws the same text on the same torch.
"""
import argparse
import dataclasses
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import CONFIGS, GPT  # noqa: E402


def fail(message):
    print(f"sample.py: error: {message}", file=sys.stderr)
    sys.exit(1)


def load_vocabulary(data_dir):
    """(stoi, itos) from DATA_DIR/meta.json."""
    path = os.path.join(data_dir, "meta.json")
    try:
        with open(path, encoding="utf-8") as f:
            meta = json.load(f)
        return meta["stoi"], meta["itos"]
    except OSError as e:
        fail(f"{path}: {e.strerror} (nnsc-prepare-data writes it beside the token files)")
    except (ValueError, KeyError, TypeError) as e:
        fail(f"{path}: not nnsc-prepare-data's meta.json ({e})")


def mismatch(state, expected):
    """What keeps `state` from loading into a model whose state_dict is
    `expected`, in a line; empty when nothing does."""
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    shapes = [(k, list(state[k].shape), list(v.shape)) for k, v in expected.items()
              if k in state and isinstance(state[k], torch.Tensor) and state[k].shape != v.shape]
    parts = []
    if missing:
        parts.append(f"{len(missing)} names missing (first {missing[0]})")
    if unexpected:
        parts.append(f"{len(unexpected)} names the model lacks (first {unexpected[0]})")
    if shapes:
        k, got, want = shapes[0]
        parts.append(f"{len(shapes)} shapes differ (first {k}: {got} in the file, {want} in "
                     "the model)")
    return "; ".join(parts)


def load_model(path, cfg, config_name):
    """model.py's GPT of `cfg` holding the checkpoint at `path`, in eval mode."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # OSError, pickle's and torch's errors: all mean "not readable"
        why = str(e).strip().split(". ")[0] or type(e).__name__
        fail(f"{path}: cannot be read as a torch.save checkpoint: {why}")
    if not isinstance(state, dict):
        fail(f"{path}: holds a {type(state).__name__}, not a state_dict")
    try:
        model = GPT(cfg)
    except (RuntimeError, ValueError) as e:
        fail(str(e))
    problem = mismatch(state, model.state_dict())
    if problem:
        fail(f"{path} does not fit config '{config_name}' (--config, --attention?): {problem}")
    model.load_state_dict(state)
    return model.eval()


@torch.no_grad()
def generate(model, idx, chars, temperature, top_k, vocabulary, generator):
    """`idx` [1, T] continued by `chars` tokens sampled among the first
    `vocabulary` ids (the data's characters; a config's vocab_size may be
    larger, its other rows never trained)."""
    block = model.cfg.block_size
    for _ in range(chars):
        context = idx[:, -block:]
        _, logits = model(context, torch.zeros_like(context))
        logits = logits[:, -1, :vocabulary] / temperature
        if top_k < logits.size(-1):
            kth = torch.topk(logits, top_k).values[:, -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        probs = torch.softmax(logits, dim=-1)
        nxt = torch.multinomial(probs.cpu(), 1, generator=generator).to(idx.device)
        idx = torch.cat([idx, nxt], dim=1)
    return idx


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint", help="merged.pt from nnsc-merge-ckpt")
    ap.add_argument("--data", required=True, help="nnsc-prepare-data's output directory")
    ap.add_argument("--config", default="small", choices=sorted(CONFIGS))
    ap.add_argument("--attention", choices=["auto", "sdpa", "explicit"],
                    help="the attention form the model was exported with (default: the config's)")
    ap.add_argument("--start", default="\n", help="the text each sample continues")
    ap.add_argument("--chars", type=int, default=300)
    ap.add_argument("--samples", type=int, default=1)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--top-k", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    if args.chars < 1 or args.samples < 1 or args.top_k < 1:
        fail("--chars, --samples and --top-k must be at least 1")
    if not args.temperature > 0:
        fail(f"--temperature must be above 0, not {args.temperature}")
    if not args.start:
        fail("--start must hold at least one character")

    stoi, itos = load_vocabulary(args.data)
    unknown = sorted({c for c in args.start if c not in stoi})
    if unknown:
        fail(f"--start has characters the data never had: {''.join(unknown)!r}")
    cfg = CONFIGS[args.config]
    if args.attention:
        cfg = dataclasses.replace(cfg, attention=args.attention)
    if len(itos) > cfg.vocab_size:
        fail(f"{args.data}/meta.json has {len(itos)} characters, more than config "
             f"'{args.config}''s vocab_size {cfg.vocab_size}")
    model = load_model(args.checkpoint, cfg, args.config).to(args.device)

    generator = torch.Generator().manual_seed(args.seed)
    start = torch.tensor([[stoi[c] for c in args.start]], dtype=torch.long, device=args.device)
    for k in range(args.samples):
        out = generate(model, start, args.chars, args.temperature, args.top_k, len(itos),
                       generator)
        tokens = out[0, start.size(1):].tolist()
        print(f"--- sample {k + 1} of {args.samples}: {args.chars} characters after "
              f"{args.start!r} (temperature {args.temperature}, top-k {args.top_k}, "
              f"seed {args.seed})")
        print(args.start + "".join(itos[t] for t in tokens))


if __name__ == "__main__":
    main()
