"""Shared helpers for the example export scripts (examples/*/export.py).

Each export script builds an end-to-end model (forward(...) returns the loss first), traces it
with torch.jit.trace on sample inputs and writes:

    OUT/model.pt         TorchScript archive (torch.jit.save)
    OUT/inputs.yaml      description of the forward's inputs, read by nnsc-trace
    OUT/state_dict.pt    torch.save(model.state_dict()), only when not --meta

With --meta, parameters, buffers and sample inputs live on the meta device: the archive holds
no weight data (a Llama-3-8B-shaped graph in a few hundred KB).
"""
import argparse
import os
import random
import time

import torch
import torch.nn.functional as F


def parse_args(description, configs, default_config="default", attention=False, dropout=False):
    """The export options; `attention` adds --attention auto|sdpa|explicit (models with
    attention: auto is F.scaled_dot_product_attention when the torch has it); `dropout` adds
    --dropout P (default: the config's)."""
    p = argparse.ArgumentParser(description=description)
    if attention:
        p.add_argument("--attention", default="auto", choices=["auto", "sdpa", "explicit"],
                       help="attention form: sdpa (F.scaled_dot_product_attention, torch 2.x), "
                            "explicit (matmul + mask + softmax) or auto (sdpa when available)")
    if dropout:
        p.add_argument("--dropout", type=float, default=None,
                       help="dropout probability (default: the config's)")
    p.add_argument("--config", default=default_config, choices=sorted(configs))
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--meta", action="store_true",
                   help="build parameters, buffers and sample inputs on the meta device")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch", type=int, default=None,
                   help="batch size of the sample inputs (default: per config)")
    p.add_argument("--eval", action="store_true",
                   help="trace in eval mode (default: train mode, dropout active)")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"],
                   help="parameters, buffers and floating inputs in this dtype (bfloat16: the "
                        "graph a mixed-precision run computes, for planning)")
    args = p.parse_args()
    if attention and args.attention == "sdpa" and not hasattr(F, "scaled_dot_product_attention"):
        p.error("--attention sdpa: torch %s has no F.scaled_dot_product_attention" %
                torch.__version__)
    return args


def seed_everything(seed):
    random.seed(seed)
    torch.manual_seed(seed)


def sample_input(spec, device):
    """spec: dict(name, shape, dtype, range=[lo, hi] optional). Returns a tensor on device."""
    shape = spec["shape"]
    dtype = getattr(torch, spec["dtype"])
    lo, hi = spec.get("range", (-1, 1))
    if device == "meta":
        return torch.empty(shape, dtype=dtype, device="meta")
    if dtype.is_floating_point:
        return torch.empty(shape, dtype=dtype).uniform_(lo, hi)
    return torch.randint(lo, hi, shape, dtype=dtype)


def write_inputs_yaml(path, specs):
    lines = ["# sample inputs for nnsc-trace", "inputs:"]
    for s in specs:
        lines.append("  - name: %s" % s["name"])
        lines.append("    shape: [%s]" % ", ".join(str(d) for d in s["shape"]))
        lines.append("    dtype: %s" % s["dtype"])
        if "range" in s:
            lines.append("    range: [%s]" % ", ".join(str(v) for v in s["range"]))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def export(model, specs, args):
    """Trace model on sample inputs built from specs and write the artifacts to args.out."""
    os.makedirs(args.out, exist_ok=True)
    device = "meta" if args.meta else "cpu"
    model.train(not args.eval)
    dtype = getattr(args, "dtype", "float32")
    if dtype != "float32":
        model.to(getattr(torch, dtype))
        specs = [dict(s, dtype=dtype) if getattr(torch, s["dtype"]).is_floating_point else s
                 for s in specs]
    inputs = tuple(sample_input(s, device) for s in specs)
    t0 = time.time()
    # check_trace=False: dropout makes train-mode re-runs differ; meta tensors can't be compared.
    traced = torch.jit.trace(model, inputs, check_trace=False)
    t1 = time.time()
    model_path = os.path.join(args.out, "model.pt")
    torch.jit.save(traced, model_path)
    t2 = time.time()
    write_inputs_yaml(os.path.join(args.out, "inputs.yaml"), specs)
    if not args.meta:
        torch.save(model.state_dict(), os.path.join(args.out, "state_dict.pt"))
    nparams = sum(p.numel() for p in model.parameters())
    print("config=%s meta=%s params=%d trace=%.2fs save=%.2fs %s (%d bytes)" % (
        args.config, args.meta, nparams, t1 - t0, t2 - t1, model_path,
        os.path.getsize(model_path)))
    return traced
