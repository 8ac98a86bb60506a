"""step_parts.py METRICS: checks the parts of each step in nnsc-run's metrics.jsonl on CPU.

fwd_bwd_s (forward and backward, the in-step collectives included), grad_sync_s (the wait for
the gradient reducers) and optimizer_s (the rest) must add up to step_s, and comm_s (the
collectives inside the forward and backward) must lie within fwd_bwd_s; elapsed_s (since the
loop began) grows by at least each step's step_s. Prints whether the
steps had in-step collectives: "comm in every step" or "no in-step comm".
"""
import json
import sys

rows = [json.loads(line) for line in open(sys.argv[1])]
assert rows, "no metrics records"
for r in rows:
    for key in ("fwd_bwd_s", "comm_s", "grad_sync_s", "optimizer_s"):
        assert key in r and r[key] >= 0, f"step {r['step']}: {key} missing or negative: {r}"
    total = r["fwd_bwd_s"] + r["grad_sync_s"] + r["optimizer_s"]
    assert abs(total - r["step_s"]) <= 1e-3 + 1e-3 * r["step_s"], \
        f"step {r['step']}: parts {total} != step_s {r['step_s']}"
    assert r["comm_s"] <= r["fwd_bwd_s"], f"step {r['step']}: comm_s past fwd_bwd_s: {r}"
for before, r in zip([{"elapsed_s": 0.0}] + rows, rows):
    assert r["elapsed_s"] >= before["elapsed_s"] + r["step_s"] - 1e-6, \
        f"step {r['step']}: elapsed_s {r['elapsed_s']} short of the last plus step_s: {r}"
print(f"{len(rows)} steps: parts add up to step_s")
if all(r["comm_s"] > 0 for r in rows):
    print("comm in every step")
elif all(r["comm_s"] == 0 for r in rows):
    print("no in-step comm")
else:
    print("comm in some steps only")
