"""PyTorch reference for nnsc's optimizer unit test (OptimizerTest.cpp).

optim_reference.py IN.safetensors OUT.safetensors

IN holds p0, p1, ... (initial parameters), g<k>_<i> (gradient of parameter i
at step k), and metadata: optimizer (adamw|adam|sgd), lr (one per step,
comma-separated), betas, eps, weight_decay, momentum, max_norm, foreach and fused
(true|false, default false). Runs torch.optim with that foreach or fused (decay only on dims >= 2 for Adam(W), as
nanoGPT) and clip_grad_norm_, and writes the final parameters, the optimizer
state (<i>/exp_avg, <i>/exp_avg_sq, <i>/momentum_buffer) and the grad norm of
each step (norm_<k>) to OUT.
"""
import json
import struct
import sys

import torch

DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64}


def read_safetensors(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    body = raw[8 + n:]
    out = {}
    for name, e in header.items():
        a, b = e["data_offsets"]
        t = torch.frombuffer(bytearray(body[a:b]), dtype=DTYPES[e["dtype"]])
        out[name] = t.reshape(e["shape"]).clone()
    return out, meta


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        data = t.numpy().tobytes()
        code = {torch.float32: "F32", torch.float64: "F64"}[t.dtype]
        header[name] = {"dtype": code, "shape": list(t.shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def main():
    tensors, meta = read_safetensors(sys.argv[1])
    params = []
    i = 0
    while f"p{i}" in tensors:
        params.append(torch.nn.Parameter(tensors[f"p{i}"]))
        i += 1
    lrs = [float(x) for x in meta["lr"].split(",")]
    foreach = meta.get("foreach", "false") == "true"
    # torch.optim refuses fused and foreach both True
    extra = {"fused": True, "foreach": None} if meta.get("fused", "false") == "true" else \
        {"foreach": foreach}
    name, wd = meta["optimizer"], float(meta["weight_decay"])
    if name == "sgd":
        opt = torch.optim.SGD(params, lr=lrs[0], momentum=float(meta["momentum"]),
                              weight_decay=wd, **extra)
    else:
        groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": wd},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
        betas = tuple(float(x) for x in meta["betas"].split(","))
        cls = torch.optim.AdamW if name == "adamw" else torch.optim.Adam
        opt = cls(groups, lr=lrs[0], betas=betas, eps=float(meta["eps"]), **extra)
    out = {}
    max_norm = float(meta["max_norm"])
    for k, lr in enumerate(lrs):
        for g in opt.param_groups:
            g["lr"] = lr
        for j, p in enumerate(params):
            p.grad = tensors[f"g{k}_{j}"].clone()
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm if max_norm > 0 else float("inf"))
        out[f"norm_{k}"] = norm.reshape(1)
        opt.step()
    for j, p in enumerate(params):
        out[f"p{j}"] = p.detach()
        for field, value in opt.state[p].items():
            if torch.is_tensor(value) and field != "step":
                out[f"{j}/{field}"] = value
    write_safetensors(sys.argv[2], out)


if __name__ == "__main__":
    main()
