# throughput-line.test.py OUT METRICS: the step-15 progress line's interval
# (its steps' tokens over its tok/s) against the five steps' own times in the
# metrics and the time of the validation and checkpoint after step 10, and
# whether those took long enough that counting them would show.
import json
import re
import sys

out, metrics = sys.argv[1], sys.argv[2]
with open(metrics) as f:
    rows = {r["step"]: r for r in map(json.loads, f)}
with open(out) as f:
    shown = {int(m.group(1)): float(m.group(2).replace(",", ""))
             for m in re.finditer(r"^step (\d+)/\d+ \|.*\| ([\d,.]+) tok/s", f.read(), re.M)}
tokens = rows[11]["tokens_per_s"] * rows[11]["step_s"]  # a step's tokens
steps = sum(rows[s]["step_s"] for s in range(11, 16))
# From the end of step 9 to the start of step 11, less step 10: the validation and
# the checkpoint (and the little between steps).
between = rows[11]["elapsed_s"] - rows[11]["step_s"] - rows[9]["elapsed_s"] - rows[10]["step_s"]
interval = 5 * tokens / shown[15]
# Counted, they would put the interval past steps + between; left out, it is the
# steps and what little runs between them, far below steps + between / 2.
print(f"validation and checkpoint after step 10: longer than steps 11-15: "
      f"{'yes' if between > steps else f'no ({between:.3f} s, steps {steps:.3f} s)'}")
print(f"step 15's line: its interval without them: "
      f"{'yes' if interval < steps + between / 2 else 'no'} "
      f"(interval {interval:.3f} s, steps {steps:.3f} s, validation and checkpoint {between:.3f} s)")
