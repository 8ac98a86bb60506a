"""exposed_reduce.py REPORT: for each device line of an `nnsc-plan --print` step
report of a pipelined plan with one chunk per stage, checks that the exposed
gradient all-reduce is what the stage's last backward pass (compute + comm of
one micro-batch) does not hide, max(0, all-reduce - backward), and prints one
line per device."""
import re
import sys

UNIT = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


def seconds(v, unit):
    return float(v) * UNIT[unit]


pattern = re.compile(
    r"device (\d+): .*backward ([0-9.]+) (\w+) \+ comm ([0-9.]+) (\w+) \(per micro-batch\); "
    r"grad all-reduce ([0-9.]+) (\w+) in \d+ buckets?, ([0-9.]+) (\w+) exposed")
found = 0
for line in open(sys.argv[1]):
    m = pattern.search(line)
    if not m:
        continue
    found += 1
    d = m.group(1)
    backward = seconds(m.group(2), m.group(3)) + seconds(m.group(4), m.group(5))
    reduce = seconds(m.group(6), m.group(7))
    exposed = seconds(m.group(8), m.group(9))
    want = max(0.0, reduce - backward)
    ok = abs(exposed - want) <= 1e-3 * max(reduce, 1e-9) + 1e-7
    hidden = "part hidden" if exposed < reduce else "none hidden"
    print(f"device {d}: exposed all-reduce = all-reduce - last backward: "
          f"{'ok' if ok else f'no ({exposed:.3g} s, want {want:.3g} s)'}; {hidden}")
if not found:
    sys.exit("exposed_reduce.py: no device step lines in " + sys.argv[1])
