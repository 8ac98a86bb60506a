"""Run nnsc-codegen's per-rank programs in Python and compare them with the original model.

    run_program.py EXAMPLE CONFIG EXPORT_DIR RANKS_DIR [--seed N] [--shards-only]
                   [--attention auto|sdpa|explicit] [--model-dir DIR]

For every rank{r}.pb in RANKS_DIR: reads the manifest (nnsc-codegen --print-manifest --json),
checks each shard in rank{r}.safetensors against the model's state_dict (sliced by its SliceMap;
tied names through aliases), compiles rank{r}.py with torch.jit.CompilationUnit, binding `torch`
to torch.ops.aten as the C++ runtime's resolver does, runs it on sample inputs with the shards,
and compares its outputs, and the gradients of a backward from its loss, with the eager model
(examples/EXAMPLE/model.py built with CONFIG, the export's --attention form, and
EXPORT_DIR/state_dict.pt) under the same seed.
Prints one line per rank; exits 1 on the first mismatch.
"""
import argparse
import dataclasses
import importlib.util
import json
import os
import struct
import subprocess
import sys

import torch

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..",
                        "examples")
ST_DTYPES = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16,
             "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32, "I16": torch.int16,
             "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool}


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        lo, hi = e["data_offsets"]
        buf = bytearray(data[8 + n + lo:8 + n + hi])
        t = torch.frombuffer(buf, dtype=ST_DTYPES[e["dtype"]]) if buf else \
            torch.empty(0, dtype=ST_DTYPES[e["dtype"]])
        out[name] = t.reshape(e["shape"]).clone()
    return out


def read_manifest(path):
    text = subprocess.check_output(["nnsc-codegen", "--print-manifest", path, "--json"])
    return json.loads(text)


def check_shards(manifest, shards, state_dict):
    checked = []
    for s in manifest["shards"]:
        if s["constant"]:
            continue
        names = [s["original_name"]] + s.get("aliases", [])
        full = next((state_dict[n] for n in names if n in state_dict), None)
        if full is None:
            fail("shard %s: %s not in the state_dict" % (s["local_name"], names))
        piece = shards[s["local_name"]]
        if not torch.equal(piece, slice_of(full, s["slice"]).reshape(piece.shape)):
            fail("shard %s (%s) differs from the state_dict" % (s["local_name"], names[0]))
        checked.append(s["local_name"])
    return checked


def slice_of(full, sl):
    """The SliceMap's part of `full`: an interleaved dim (blocks b > 1) is viewed as [b, n / b]
    and [start, stop) taken from every block."""
    blocks = [int(b) for b in sl.get("blocks", [])]
    shape, box = [], []
    for k, (a, b) in enumerate(zip(sl.get("start", []), sl.get("stop", []))):
        n = full.shape[k]
        nb = blocks[k] if k < len(blocks) else 1
        if nb > 1:
            shape += [nb, n // nb]
            box.append(slice(0, nb))
        else:
            shape.append(n)
        box.append(slice(int(a), int(b)))
    return full.reshape(shape)[tuple(box)]


def compile_program(path):
    with open(path) as f:
        src = f.read()
    torch._C._jit_set_texpr_fuser_enabled(False)  # it can spin in backward() on 2.x
    cu = torch.jit.CompilationUnit()
    cu.define(src, rcb=lambda name: torch.ops.aten if name == "torch" else None)
    return cu


def main():
    p = argparse.ArgumentParser()
    p.add_argument("example")
    p.add_argument("config")
    p.add_argument("export_dir")
    p.add_argument("ranks_dir")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--shards-only", action="store_true",
                   help="only check every rank's shards against the state_dict")
    p.add_argument("--attention", help="the attention form the export was given (nanogpt, llama)")
    p.add_argument("--model-dir", help="the directory of EXAMPLE's model.py (default: "
                                       "examples/EXAMPLE)")
    args = p.parse_args()
    ex_dir = args.model_dir or os.path.join(EXAMPLES, args.example)
    sys.path.insert(0, EXAMPLES)
    common = load_module(os.path.join(EXAMPLES, "export_common.py"), "export_common")
    mod = load_module(os.path.join(ex_dir, "model.py"), "nnsc_example_model")
    state_dict = torch.load(os.path.join(args.export_dir, "state_dict.pt"), weights_only=True)
    ranks = sorted(int(f[4:-3]) for f in os.listdir(args.ranks_dir)
                   if f.startswith("rank") and f.endswith(".pb"))
    for r in ranks:
        if args.shards_only:
            manifest = read_manifest(os.path.join(args.ranks_dir, "rank%d.pb" % r))
            shards = read_safetensors(os.path.join(args.ranks_dir, manifest["weights"]))
            checked = check_shards(manifest, shards, state_dict)
            print("rank %d: %d shards equal the state_dict's slices" % (r, len(checked)))
            continue
        run_rank(r, args, common, mod, state_dict)


def run_rank(r, args, common, mod, state_dict):
    manifest = read_manifest(os.path.join(args.ranks_dir, "rank%d.pb" % r))
    shards = read_safetensors(os.path.join(args.ranks_dir, manifest["weights"]))
    check_shards(manifest, shards, state_dict)
    cfg = mod.CONFIGS[args.config]
    if args.attention:
        cfg = dataclasses.replace(cfg, attention=args.attention)
    model = getattr(mod, manifest["model_name"])(cfg)
    model.load_state_dict(state_dict)
    model.train()
    batch = int(manifest["inputs"][0]["shape"][0])
    torch.manual_seed(args.seed + r)
    inputs = [common.sample_input(s, "cpu") for s in mod.input_specs(cfg, batch)]

    torch.manual_seed(args.seed)
    ref = model(*inputs)
    ref = ref if isinstance(ref, tuple) else (ref,)
    ref[0].backward()

    cu = compile_program(os.path.join(args.ranks_dir, manifest["program"]))
    params = [shards[s["local_name"]].requires_grad_(s["trainable"]) for s in manifest["shards"]]
    torch.manual_seed(args.seed)
    out = cu.forward(*params, *inputs, torch.device("cpu"))
    if len(out) != manifest["num_outputs"] or len(out) != len(ref):
        fail("rank %d: %d outputs, expected %d" % (r, len(out), len(ref)))
    loss = out[manifest["loss_output"]]
    for i, (a, b) in enumerate(zip(out, ref)):
        if not torch.equal(a, b):
            fail("rank %d: output %d differs: max |diff| %g" % (r, i, (a - b).abs().max()))
    loss.backward()
    named = dict(model.named_parameters())
    ngrads = 0
    for s, t in zip(manifest["shards"], params):
        if not s["trainable"]:
            continue
        g = named[s["original_name"]].grad
        if not torch.equal(t.grad, g):
            fail("rank %d: gradient of %s differs: max |diff| %g" %
                 (r, s["original_name"], (t.grad - g).abs().max()))
        ngrads += 1
    print("rank %d: loss %.6f equal to the model's; %d outputs equal; %d shards match the "
          "state_dict; %d gradients match" % (r, loss.item(), len(out), len(manifest["shards"]),
                                                ngrads))


if __name__ == "__main__":
    main()
