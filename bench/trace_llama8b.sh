#!/usr/bin/env bash
# nnsc-trace of the llama example at Llama-3-8B shapes (32 layers, hidden 4096,
# 32 heads / 8 KV heads, seq 8192) on the meta device.
# Baseline, same invocation: Python's torch.jit.load of the same archive plus
# one forward on meta tensors (the least work any tracer of it must do).
# Prints per-run times and the ratio nnsc-trace / baseline (median of N runs).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-5}
DIR=${DIR:-out/bench/llama8b}
PY=/usr/bin/python3
# ATTENTION=auto (default): F.scaled_dot_product_attention where the torch has it, else
# the explicit matmul/mask/softmax form; ATTENTION=explicit or sdpa to pin one.
ATTENTION=${ATTENTION:-auto}
DIR=$DIR-$ATTENTION
[ -f "$DIR/model.pt" ] || $PY examples/llama/export.py --config 8b --meta --attention "$ATTENTION" \
  --out "$DIR" >/dev/null
echo "archive: $(stat -c %s "$DIR/model.pt") bytes"

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
now() { date +%s.%N; }

nnsc_times=(); base_times=()
for i in $(seq "$N"); do
  t0=$(now); build/bin/nnsc-trace "$DIR/model.pt" --inputs "$DIR/inputs.yaml" -o "$DIR/trace" 2>/dev/null; t1=$(now)
  nnsc_times+=("$(awk "BEGIN{print $t1 - $t0}")")
  t0=$(now)
  $PY - "$DIR" <<'PYEOF'
import sys, torch
d = sys.argv[1]
m = torch.jit.load(f"{d}/model.pt")
m(torch.empty(1, 8192, dtype=torch.long, device="meta"), torch.empty(1, 8192, dtype=torch.long, device="meta"))
PYEOF
  t1=$(now); base_times+=("$(awk "BEGIN{print $t1 - $t0}")")
done
n_med=$(printf '%s\n' "${nnsc_times[@]}" | median)
b_med=$(printf '%s\n' "${base_times[@]}" | median)
echo "nnsc-trace (s):          ${nnsc_times[*]}  median $n_med"
echo "python load+meta fwd (s): ${base_times[*]}  median $b_med"
echo "ratio nnsc-trace / baseline: $(awk "BEGIN{printf \"%.2f\", $n_med / $b_med}")"
echo "target: nnsc-trace < 5 s (nnScaler's tracer: 8.1 s on an A100 host, its published figure)"
