"""Rewrites one entry of a safetensors file's header: corrupt_shard.py FILE KEY VALUE-JSON
(the entry chosen is the first in name order; KEY is dtype, shape or data_offsets)."""
import json
import struct
import sys

path, key, value = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
blob = open(path, "rb").read()
n = struct.unpack("<Q", blob[:8])[0]
header = json.loads(blob[8:8 + n])
name = sorted(k for k in header if k != "__metadata__")[0]
header[name][key] = value
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
open(path, "wb").write(struct.pack("<Q", len(text)) + text + blob[8 + n:])
print(name)
