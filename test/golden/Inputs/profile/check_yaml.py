"""Checks the structure of a file nnsc-profile-comm or nnsc-profile-device wrote.

  check_yaml.py comm TABLE.yaml [--world N] [--collectives a,b] [--sizes N]
  check_yaml.py device SPEC.yaml

Prints one line per curve (or per key) and 'ok'; exits 1 naming the first
problem.
"""
import argparse
import sys

import yaml

COLLECTIVES = ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast",
               "send_recv"]


def fail(msg):
    print("error: " + msg)
    sys.exit(1)


def positive(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0


def check_comm(doc, args):
    for key in ["version", "backend", "device", "sources", "curves"]:
        if key not in doc:
            fail("missing key '%s'" % key)
    if doc["version"] != 1 or doc["backend"] not in ("gloo", "nccl"):
        fail("bad version or backend")
    if not doc["sources"] or not all(isinstance(s, str) for s in doc["sources"]):
        fail("sources must be a non-empty list of strings")
    seen = set()
    for c in doc["curves"]:
        if set(c) != {"collective", "group", "placement", "points"}:
            fail("curve keys %s" % sorted(c))
        key = (c["collective"], c["group"], c["placement"])
        if key in seen:
            fail("two curves for %s" % (key,))
        seen.add(key)
        if c["collective"] not in COLLECTIVES or c["placement"] not in ("intra", "inter"):
            fail("bad curve %s" % (key,))
        if not isinstance(c["group"], int) or c["group"] < 2:
            fail("group %r" % c["group"])
        pts = c["points"]
        for i, p in enumerate(pts):
            if len(p) != 2 or not isinstance(p[0], int) or not positive(p[0]) or not positive(p[1]):
                fail("%s point %d is %r" % (key, i, p))
            if i and p[0] <= pts[i - 1][0]:
                fail("%s bytes not strictly increasing at point %d" % (key, i))
        if args.sizes and len(pts) != args.sizes:
            fail("%s has %d points, expected %d" % (key, len(pts), args.sizes))
        print("curve %s group %d %s: %d points" % (c["collective"], c["group"], c["placement"],
                                                  len(pts)))
    if args.collectives:
        want = args.collectives.split(",")
        got = sorted({c["collective"] for c in doc["curves"]})
        if got != sorted(want):
            fail("collectives %s, expected %s" % (got, sorted(want)))


def check_device(doc, args):
    for key in ["name", "description", "sources", "flops", "memory_bytes", "memory_bandwidth",
                "launch_floor", "random_rate", "update_bandwidth", "vector_ops", "efficiency"]:
        if key not in doc:
            fail("missing key '%s'" % key)
    if not doc["flops"] or not all(positive(v) for v in doc["flops"].values()):
        fail("flops %r" % doc["flops"])
    for key in ["memory_bytes", "memory_bandwidth", "launch_floor", "random_rate",
                "update_bandwidth"]:
        if not positive(doc[key]):
            fail("%s is %r" % (key, doc[key]))
        print("%s positive" % key)
    eff = dict(doc["efficiency"])
    batched = eff.pop("batched_matmul", None)
    if eff != {"matmul": 1.0, "memory": 1.0}:
        fail("efficiency %r" % doc["efficiency"])
    # float32 measured: batched products at 16..256, each a fraction of the square rate
    if "float32" in doc["flops"]:
        if sorted((batched or {}).keys()) != [16, 32, 64, 128, 256] or \
                not all(0 < v <= 1 for v in batched.values()):
            fail("efficiency.batched_matmul %r" % batched)
        print("batched_matmul 16..256")
    # vector-bound op kinds: 4 figures each, non-negative; every per-element figure positive
    vec = doc.get("vector_ops") or {}
    kinds = ["exp", "gelu", "select", "softmax", "norm", "loss"]
    if sorted(vec) != sorted(kinds):
        fail("vector_ops kinds %r" % sorted(vec))
    for kind, v in vec.items():
        if len(v) != 4 or not all(isinstance(x, (int, float)) and x >= 0 for x in v) or \
                not (positive(v[0]) and positive(v[2])):
            fail("vector_ops.%s %r" % (kind, v))
    print("vector_ops: %s" % ", ".join(kinds))
    print("flops: %s" % ", ".join(sorted(doc["flops"])))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("kind", choices=["comm", "device"])
    p.add_argument("path")
    p.add_argument("--collectives")
    p.add_argument("--sizes", type=int)
    args = p.parse_args()
    with open(args.path) as f:
        doc = yaml.safe_load(f)
    (check_comm if args.kind == "comm" else check_device)(doc, args)
    print("ok")


main()
