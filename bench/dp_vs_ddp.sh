#!/usr/bin/env bash
# Tokens/s of nnsc-run (DP=2, Gloo, 2 CPU processes, 1 intra-op thread each)
# against PyTorch DistributedDataParallel (gloo, 2 processes, 1 thread each) on
# the same nanoGPT config (examples/nanogpt "default": shakespeare_char, 6
# layers, 384 wide, block 256, dropout 0.2), same micro-batch, AdamW,
# synthetic tokens. Both exclude the first WARMUP steps. Prints the ratio
# nnsc / DDP (goal >= 1.0).
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG=${CONFIG:-default} MBS=${MBS:-4} STEPS=${STEPS:-12} WARMUP=${WARMUP:-2}
W=${W:-out/bench/dp_vs_ddp}
PY=/usr/bin/python3
B=build/bin
rm -rf "$W" && mkdir -p "$W"
$PY examples/nanogpt/export.py --config "$CONFIG" --batch "$MBS" --out "$W/gpt" > /dev/null
$B/nnsc-trace "$W/gpt/model.pt" --inputs "$W/gpt/inputs.yaml" -o "$W/gpt" 2> /dev/null
$B/nnsc-plan "$W/gpt/graph.pb" --policy dp --runtime-ngpus 2 -o "$W/plan.pb" > /dev/null
$B/nnsc-codegen "$W/gpt/graph.pb" "$W/plan.pb" -o "$W/prog" > /dev/null
cat > "$W/cfg.yaml" <<YAML
program: $W/prog
run_dir: $W/run
threads: 1
data: {kind: synthetic, vocab_size: 65}
train: {steps: $((STEPS + WARMUP)), log_every: 1000}
optimizer: {name: adamw, lr: 0.0001, weight_decay: 0.1}
checkpoint: {every: 0}
YAML
$B/nnsc-run "$W/cfg.yaml" --nproc-per-node 2 > "$W/nnsc.log"
nnsc=$($PY - "$W/run/metrics.jsonl" "$WARMUP" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rows = [r for r in rows if r["step"] > int(sys.argv[2])]
times = [1.0 / r["tokens_per_s"] for r in rows]  # seconds per token of each step
print(f"{len(times) / sum(times):.1f}")
PY
)
ddp=$($PY bench/ddp_reference.py --config "$CONFIG" --world 2 --steps "$STEPS" --warmup "$WARMUP" --mbs "$MBS" | sed -n 's/ddp tokens\/s: \([0-9.]*\).*/\1/p')
echo "config $CONFIG, micro-batch $MBS per rank, 2 ranks, $STEPS measured steps after $WARMUP warmup"
echo "nnsc-run DP=2 tokens/s: $nnsc"
echo "PyTorch DDP  tokens/s: $ddp"
echo "ratio nnsc / DDP: $(awk "BEGIN{printf \"%.2f\", $nnsc / $ddp}")"
