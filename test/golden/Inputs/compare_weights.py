"""compare_weights.py WEIGHTS.safetensors STATE_DICT.pt

Checks that nnsc-trace's weights equal the model's state_dict exactly: every
key present (tied keys through the nnsc.aliases metadata), same shape, dtype
and bytes. Prints 'weights match: N tensors' or the first difference."""
import json
import struct
import sys

import torch

DTYPES = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16,
          "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32,
          "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool}


def read_safetensors(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        buf = bytearray(data[b:end])
        t = torch.frombuffer(buf, dtype=DTYPES[e["dtype"]]) if buf else torch.empty(0, dtype=DTYPES[e["dtype"]])
        out[name] = t.reshape(e["shape"])
    return out, meta


def main():
    tensors, meta = read_safetensors(sys.argv[1])
    aliases = json.loads(meta.get("nnsc.aliases", "{}"))
    sd = torch.load(sys.argv[2], weights_only=True)
    for key, ref in sd.items():
        got = tensors.get(aliases.get(key, key))
        if got is None:
            sys.exit(f"missing key {key}")
        if got.dtype != ref.dtype or tuple(got.shape) != tuple(ref.shape) or not torch.equal(got, ref):
            sys.exit(f"mismatch at {key}: {got.dtype}{tuple(got.shape)} vs {ref.dtype}{tuple(ref.shape)}")
    extra = set(tensors) - set(sd)
    if extra:
        sys.exit(f"extra keys {sorted(extra)}")
    print(f"weights match: {len(sd)} tensors ({len(aliases)} tied)")


if __name__ == "__main__":
    main()
