#!/usr/bin/env bash
# Tokens/s and MFU of nnsc-run on one device against PyTorch eager on the same
# nanoGPT config and micro-batch (issue 9's benchmark; run on a GPU machine,
# never part of CI). Both train with AdamW on synthetic tokens and exclude the
# first WARMUP steps (nnsc-run reads its losses every WARMUP steps, so on cuda
# the measured steps' times come from reads after the warmup); fp32, fp32 with
# TF32 matmuls (nnsc-run precision.tf32, eager torch.backends.*.allow_tf32), then bf16
# twice: nnsc-run with precision.mode bf16 in recipe megatron (bf16 weights and
# activations, float32 masters) and in recipe autocast (float32 weights, the
# casts torch.autocast makes), against one eager run with torch.autocast(bf16)
# as nanoGPT's train.py. Prints each side's tokens/s, the ratio nnsc / eager
# (goal >= 1.0) and the MFU of each:
#   MFU = tokens/s x (6 N + 12 L H Q T) / PEAK
# (nanoGPT's estimate_mfu: N parameters without the position embedding, L
# layers, H heads, Q head size, T block size; PEAK defaults to the H100 SXM's
# dense bf16 989 TF/s, used for every precision).
#   DEVICE=cuda CONFIG=gpt2 MBS=8 STEPS=20 WARMUP=5 PY=python3 bench/gpu_vs_eager.sh
# A CPU smoke run: DEVICE=cpu CONFIG=small MBS=2 STEPS=3 WARMUP=1 bench/gpu_vs_eager.sh
# (PRECISIONS="fp32 bf16" runs a subset; tf32 is fp32 on cpu). FUSED=1: both sides update
# with PyTorch's fused AdamW kernel (nnsc-run optimizer.fused, eager fused=True, as nanoGPT's
# train.py on cuda); by default both take the multi-tensor (foreach) one, PyTorch's default.
set -euo pipefail
shopt -s inherit_errexit # a failure inside $(...) fails it too
cd "$(dirname "$0")/.."
DEVICE=${DEVICE:-cuda} CONFIG=${CONFIG:-gpt2} MBS=${MBS:-8} STEPS=${STEPS:-20} WARMUP=${WARMUP:-5}
PEAK=${PEAK:-989e12}
PY=${PY:-$(command -v python3)}
[ "$DEVICE" = cpu ] && PY=${PY_CPU:-/usr/bin/python3}
W=${W:-out/bench/gpu_vs_eager}
B=${B:-build/bin}
rm -rf "$W" && mkdir -p "$W"
fused=false eager_fused=()
[ "${FUSED:-0}" = 1 ] && fused=true eager_fused=(--fused)
flops=$("$PY" - "$CONFIG" <<'PY'
import os, sys
sys.path.insert(0, "examples/nanogpt")
from model import CONFIGS, GPT
c = CONFIGS[sys.argv[1]]
n = sum(p.numel() for p in GPT(c, device="meta").parameters()) - c.block_size * c.n_embd
print(6 * n + 12 * c.n_layer * c.n_head * (c.n_embd // c.n_head) * c.block_size)
PY
)
"$PY" examples/nanogpt/export.py --config "$CONFIG" --batch "$MBS" --out "$W/real" > /dev/null
$B/nnsc-trace "$W/real/model.pt" --inputs "$W/real/inputs.yaml" -o "$W/real" --no-verify > /dev/null
$B/nnsc-plan "$W/real/graph.pb" --policy dp --runtime-ngpus 1 -o "$W/plan.pb" > /dev/null
$B/nnsc-codegen "$W/real/graph.pb" "$W/plan.pb" -o "$W/prog" > /dev/null
vocab=$("$PY" -c "import sys; sys.path.insert(0, 'examples/nanogpt'); from model import CONFIGS; print(CONFIGS['$CONFIG'].vocab_size)")
nnsc_tps() { # precision recipe tf32 -> tokens/s over the steps after the warmup
  cat > "$W/cfg-$1-$2-$3.yaml" <<YAML
program: $W/prog
run_dir: $W/run-$1-$2-$3
device: $DEVICE
report_memory: "false"
data: {kind: synthetic, vocab_size: $vocab}
train: {steps: $((STEPS + WARMUP)), log_every: $((WARMUP > 0 ? WARMUP : 1))}
optimizer: {name: adamw, lr: 0.0001, weight_decay: 0.1, fused: $fused}
checkpoint: {every: 0, save_last: false}
precision: {mode: $1, recipe: $2, tf32: $3}
YAML
  $B/nnsc-run "$W/cfg-$1-$2-$3.yaml" --nproc-per-node 1 > "$W/nnsc-$1-$2-$3.log"
  "$PY" - "$W/run-$1-$2-$3/metrics.jsonl" "$WARMUP" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rows = [r for r in rows if r["step"] > int(sys.argv[2])]
print(f"{sum(r['tokens_per_s'] * r['step_s'] for r in rows) / sum(r['step_s'] for r in rows):.1f}")
PY
}
echo "config $CONFIG, micro-batch $MBS, 1 $DEVICE device, $STEPS measured steps after $WARMUP; flops/token $flops, peak $PEAK; AdamW $([ $fused = true ] && echo fused || echo foreach)"
for precision in ${PRECISIONS:-fp32 tf32 bf16}; do
  eager=$("$PY" bench/eager_reference.py --config "$CONFIG" --mbs "$MBS" --steps "$STEPS" \
            --warmup "$WARMUP" --device "$DEVICE" --precision "$precision" "${eager_fused[@]}" |
          sed -n 's/eager tokens\/s: \([0-9.]*\).*/\1/p')
  recipes=megatron
  [ "$precision" = bf16 ] && recipes="megatron autocast"
  for recipe in $recipes; do
    label=$precision
    case $precision in
      fp32) nnsc=$(nnsc_tps fp32 megatron false) ;;
      tf32) nnsc=$(nnsc_tps fp32 megatron true) ;;
      bf16) nnsc=$(nnsc_tps bf16 "$recipe" false) label="bf16 ($recipe)" ;;
    esac
    awk -v p="$label" -v n="$nnsc" -v e="$eager" -v f="$flops" -v peak="$PEAK" 'BEGIN {
      printf "%s: nnsc-run %.1f tokens/s (MFU %.1f%%), PyTorch eager %.1f tokens/s (MFU %.1f%%), ratio nnsc / eager %.2f\n",
        p, n, 100 * n * f / peak, e, 100 * e * f / peak, n / e }'
  done
done
