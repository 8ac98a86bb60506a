#!/usr/bin/env bash
# The README's main command. Today: set up and build, export the three example
# models (mlp, nanogpt, llama) with Debian's PyTorch, trace each with
# nnsc-trace and print its graph. Output lands in out/examples/<name>/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
PY=/usr/bin/python3
OUT=${NNSC_OUT:-out/examples}
for ex in mlp nanogpt llama; do
  echo "=== $ex: export (tiny config) ==="
  $PY examples/$ex/export.py --config tiny --out "$OUT/$ex"
  echo "=== $ex: nnsc-trace ==="
  build/bin/nnsc-trace "$OUT/$ex/model.pt" --inputs "$OUT/$ex/inputs.yaml" -o "$OUT/$ex" --print
done
