#!/usr/bin/env bash
# The cost model against measurements on this machine (bench/cost_fidelity.py says what
# it runs and prints). Arguments go to the script, e.g. --models nanogpt:default --steps 4.
set -euo pipefail
cd "$(dirname "$0")/.."
exec /usr/bin/python3 bench/cost_fidelity.py "$@"
