#!/usr/bin/env bash
# The README's main command: install and build, prepare a character-level
# dataset (tinyshakespeare, or the text file given as $1), export and trace a
# small nanoGPT, let autodist choose the plan for 2 ranks (against the CPU
# example cluster's measured device and Gloo tables), generate the per-rank
# programs, train them on 2 CPU processes (Gloo) for 300 steps, merge the
# final checkpoint into one file with the model's original parameter names,
# and sample text from it in the original PyTorch model.
# Everything lands in out/main (or $NNSC_WORK).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
TEXT=${1:-../shared/data/tinyshakespeare.txt}
[ -f "$TEXT" ] || { echo "main.sh: error: no such text file: $TEXT (give one as the first argument)" >&2; exit 1; }
export NNSC_WORK=${NNSC_WORK:-out/main}
PY=/usr/bin/python3
B=build/bin
mkdir -p "$NNSC_WORK"

echo "== 1. data: $TEXT -> $NNSC_WORK/data (character-level, 90/10 split)"
$B/nnsc-prepare-data "$TEXT" -o "$NNSC_WORK/data"
echo "== 2. export the small nanoGPT (PyTorch, TorchScript archive)"
$PY examples/nanogpt/export.py --config small --out "$NNSC_WORK/model"
echo "== 3. nnsc-trace"
$B/nnsc-trace "$NNSC_WORK/model/model.pt" --inputs "$NNSC_WORK/model/inputs.yaml" -o "$NNSC_WORK/graph"
echo "== 4. nnsc-plan: autodist chooses the plan for 2 ranks"
# The whole text form goes to a file (a pipe into head could end nnsc-plan with SIGPIPE).
$B/nnsc-plan "$NNSC_WORK/graph/graph.pb" --policy autodist --runtime-ngpus 2 \
  --cluster configs/clusters/cpu-local.example.yaml -o "$NNSC_WORK/plan.pb" \
  --print > "$NNSC_WORK/plan.txt"
sed -n '/^autodist on/,/^chosen/p' "$NNSC_WORK/plan.txt"
echo "   ... (the whole plan and report: $NNSC_WORK/plan.txt)"

echo "== 5. nnsc-codegen: one program per rank"
$B/nnsc-codegen "$NNSC_WORK/graph/graph.pb" "$NNSC_WORK/plan.pb" -o "$NNSC_WORK/program"
echo "== 6. nnsc-run: 2 CPU processes, Gloo"
rm -rf "$NNSC_WORK/run" # an earlier main job's run: this one starts over
$B/nnsc-run configs/gpt-small-dp2.yaml --nproc-per-node 2 --checkpoint.resume=never
echo "== 7. nnsc-merge-ckpt: one checkpoint with the original names"
$B/nnsc-merge-ckpt "$NNSC_WORK/run" -o "$NNSC_WORK/merged.pt"
$PY - "$NNSC_WORK/merged.pt" <<'PY'
import sys, torch
sys.path.insert(0, "examples/nanogpt")
from model import CONFIGS, GPT
model = GPT(CONFIGS["small"])
print("load_state_dict:", model.load_state_dict(torch.load(sys.argv[1])))
PY
echo "== 8. text from the trained model: merged.pt in the original PyTorch GPT"
$PY examples/nanogpt/sample.py "$NNSC_WORK/merged.pt" --data "$NNSC_WORK/data" --config small \
  --chars 200
