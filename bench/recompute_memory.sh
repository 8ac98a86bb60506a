#!/usr/bin/env bash
# Activation memory with and without recompute of every block (docs/recompute.md), on one
# rank: nanoGPT (CONFIG, default "default": 6 layers, 384 wide, 256 tokens, dropout 0.2)
# and Llama (config "default": 4 layers, 256 wide, 128 tokens).
# nnsc-bench-activations counts the CPU storage alive at the end of the forward minus the
# weights and inputs alive before it (a counting CPU allocator; not RSS), and the peak over
# forward and backward. Prints both and the ratio without / with recompute.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build/bin}
DIR=${DIR:-out/bench/recompute}
PY=/usr/bin/python3
NANOGPT_CONFIG=${NANOGPT_CONFIG:-default}
LLAMA_CONFIG=${LLAMA_CONFIG:-default}

measure() { # name export-script config classes
  local name=$1 script=$2 config=$3 classes=$4 d=$DIR/$1
  mkdir -p "$d"
  $PY "$script" --config "$config" --attention explicit --out "$d/model" >/dev/null
  $B/nnsc-trace "$d/model/model.pt" --inputs "$d/model/inputs.yaml" -o "$d/trace" 2>/dev/null
  local kind
  for kind in plain recompute; do
    local extra=()
    [ "$kind" = recompute ] && extra=(--recompute-modules "$classes")
    $B/nnsc-plan "$d/trace/graph.pb" --runtime-ngpus 1 "${extra[@]}" -o "$d/$kind.pb" 2>/dev/null
    $B/nnsc-codegen "$d/trace/graph.pb" "$d/$kind.pb" -o "$d/$kind" 2>/dev/null
    $B/nnsc-bench-activations "$d/$kind" >"$d/$kind.txt"
  done
  awk -v name="$name ($config, $classes)" '
    FNR == 1 { f++ }
    { v[f, $1] = $2 }
    END {
      a0 = v[1, "activations_after_forward_bytes"]; a1 = v[2, "activations_after_forward_bytes"]
      p0 = v[1, "peak_over_forward_backward_bytes"]; p1 = v[2, "peak_over_forward_backward_bytes"]
      printf "%s\n  activations at the end of forward: %.2f MiB without, %.2f MiB with recompute: %.2fx less\n", name, a0 / 1048576, a1 / 1048576, a0 / a1
      printf "  peak over forward + backward:      %.2f MiB without, %.2f MiB with recompute: %.2fx less\n", p0 / 1048576, p1 / 1048576, p0 / p1
    }' "$d/plain.txt" "$d/recompute.txt"
}

measure nanogpt examples/nanogpt/export.py "$NANOGPT_CONFIG" Block
measure llama examples/llama/export.py "$LLAMA_CONFIG" TransformerBlock
