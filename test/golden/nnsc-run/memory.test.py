"""memory.test.py OUT: checks that nnsc-run's plan estimate is near its measured peak."""
import re
import sys

text = open(sys.argv[1]).read()
m = re.search(r"measured ([0-9.]+) MiB[^;]*; plan estimate ([0-9.]+) MiB", text)
measured, estimate = float(m.group(1)), float(m.group(2))
err = abs(estimate - measured) / measured
print(f"estimate {estimate} MiB, measured {measured} MiB, error {err:.1%}")
print("estimate within 25% of the measured peak" if err <= 0.25 else "estimate too far off")
