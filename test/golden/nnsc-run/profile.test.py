# profile.test.py DIR FIRST LAST METRICS: for each rank's trace in DIR, the
# profiled steps, how many forward and backward phases it holds, and whether
# the operators are in it; then the first line of rank 1's summary and the
# steps the metrics file marks as profiled.
import json
import os
import re
import sys

d, first, last, metrics = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
for rank in (0, 1):
    path = os.path.join(d, f"rank{rank}.pt.trace.json")
    with open(path) as f:
        events = [e for e in json.load(f)["traceEvents"] if "name" in e]
    names = [e["name"] for e in events]
    steps = sorted(int(m.group(1)) for n in names for m in [re.fullmatch(r"nnsc::step#(\d+)", n)] if m)
    aten = any(n.startswith("aten::") for n in names)
    print(f"rank{rank}: steps {steps}, forward {names.count('nnsc::forward')}, "
          f"backward {names.count('nnsc::backward')}, aten operators {'yes' if aten else 'no'}")
    if steps != list(range(first, last + 1)):
        sys.exit(f"{path}: steps {steps}")
with open(os.path.join(d, "rank1.summary.txt")) as f:
    print("rank1.summary.txt:", f.readline().split(":")[0])
with open(metrics) as f:
    rows = [json.loads(line) for line in f]
print("metrics: steps", [r["step"] for r in rows], "profiled", [r["step"] for r in rows if r.get("profiled")])
