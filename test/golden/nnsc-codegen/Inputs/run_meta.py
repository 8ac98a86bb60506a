"""Compile a rank program and run it on the meta device: run_meta.py RANKS_DIR RANK

For graphs traced without weights: shards and inputs are meta tensors of the manifest's shapes,
and the program's `device` argument is meta, so every tensor it creates lands there too.
Prints the output shapes and devices.
"""
import json
import os
import subprocess
import sys

import torch

DTYPES = {"FLOAT32": torch.float32, "FLOAT16": torch.float16, "BFLOAT16": torch.bfloat16,
          "FLOAT64": torch.float64, "INT64": torch.int64, "INT32": torch.int32, "BOOL": torch.bool}


def main():
    ranks_dir, rank = sys.argv[1], int(sys.argv[2])
    manifest = json.loads(subprocess.check_output(
        ["nnsc-codegen", "--print-manifest", os.path.join(ranks_dir, "rank%d.pb" % rank),
         "--json"]))
    with open(os.path.join(ranks_dir, manifest["program"])) as f:
        src = f.read()
    cu = torch.jit.CompilationUnit()
    cu.define(src, rcb=lambda name: torch.ops.aten if name == "torch" else None)
    args = [torch.empty([int(d) for d in e["shape"]], dtype=DTYPES[e["dtype"]], device="meta")
            for e in manifest["shards"] + manifest["inputs"]]
    out = cu.forward(*args, torch.device("meta"))
    print("rank %d: %d arguments; outputs %s" % (
        rank, len(args) + 1, ", ".join("%s on %s" % (list(o.shape), o.device) for o in out)))


if __name__ == "__main__":
    main()
