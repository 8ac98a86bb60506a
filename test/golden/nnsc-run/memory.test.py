"""memory.test.py OUT: checks that nnsc-run's plan estimate is near its measured peak.
memory.test.py COPIES VIEWS GRADS_MIB: checks that two runs of the same job (gradients in bucket
copies, then as bucket views) print the same losses, and that the views' measured peak and
estimate are lower by GRADS_MIB (one set of gradients) within 10% or the printed
rounding (0.015 MiB: two values rounded to 0.01 MiB)."""
import re
import sys


def peak(path):
    text = open(path).read()
    m = re.search(r"measured ([0-9.]+) MiB[^;]*; plan estimate ([0-9.]+) MiB", text)
    return float(m.group(1)), float(m.group(2)), re.findall(r"\| loss ([0-9.]+)", text)


if len(sys.argv) == 2:
    measured, estimate, _ = peak(sys.argv[1])
    err = abs(estimate - measured) / measured
    print(f"estimate {estimate} MiB, measured {measured} MiB, error {err:.1%}")
    print("estimate within 25% of the measured peak" if err <= 0.25 else "estimate too far off")
    sys.exit(0)
(cm, ce, closs), (vm, ve, vloss) = peak(sys.argv[1]), peak(sys.argv[2])
grads = float(sys.argv[3])
print(f"copies: measured {cm} MiB, estimate {ce} MiB, losses {closs}")
print(f"views: measured {vm} MiB, estimate {ve} MiB, losses {vloss}")
ok = closs and closs == vloss
tol = max(0.1 * grads, 0.015)
ok = ok and abs((cm - vm) - grads) <= tol and abs((ce - ve) - grads) <= tol
print(f"same losses; views save {cm - vm:.2f} MiB measured (estimate {ce - ve:.2f} MiB)" if ok
      else "views differ from copies beyond one set of gradients")
