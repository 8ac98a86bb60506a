#!/usr/bin/env bash
# Issue 9's checks on a GPU machine, prepared to run in few device calls (the device tool
# runs commands on a copy of the checkout; no network, no apt there). Each stage prints its
# time and its log's tail; a failed build stops the script, a failed later stage does not
# stop the next (the exit status says which failed).
#   build        scripts/setup.sh against the CUDA torch of the python3 on PATH, into build/
#                (CUDA, NCCL; no Gloo: a wheel has no Gloo headers), NNSC_OFFLINE=1, the tools
#                only (NNSC_BUILD_TARGETS); 71 s on the H200 machine (2026-11-29)
#   smoke        the tiny nanoGPT on cuda over NCCL (1 rank) with the fused AdamW (FUSED=false:
#                foreach, for a LibTorch before 2.4), bf16,
#                validation and a checkpoint at step 10; resumed from it to step 20 the losses
#                equal the uninterrupted run's; the merged checkpoint loads into the model;
#                then with dropout 0.1 in fp32, recompute of every Block against the plain
#                program: the losses equal (the replayed dropout masks); 31 s on the H200
#   throughput   bench/gpu_vs_eager.sh (nanoGPT gpt2, micro-batch 8): tokens/s, ratio, MFU
#                in fp32, fp32 with TF32 matmuls and bf16 in both recipes, then bf16 again with
#                both sides' AdamW fused (FUSED=1); 130 s on the H200
#   profile      after throughput: nnsc-run's gpt2 configs of it (fp32, bf16 megatron; bf16
#                autocast with the fused AdamW, the row below eager) again for 10 steps,
#                LibTorch's profiler over steps 8-9 (docs/trainer-config.md, "Profiling");
#                prints each summary: the phases, host operators, the kernels and how busy the
#                GPU was; traces in $W/profile-*/profile; then eager's fused autocast run under
#                torch.profiler over the same steps (9 s for the first two on the H200)
#   cost         after throughput: nnsc-profile-device measures the GPU into a device spec
#                (matmuls in float32, tf32, bf16 and fp16, memory, launches, the update); then
#                nnsc-plan's predicted gpt2 step in fp32, tf32 and bf16 on the shipped
#                h200-sxm.yaml and on that spec, each beside the step throughput measured
#                (foreach AdamW). On the H200 (2026-11-29) the shipped spec predicted 142.7,
#                33.2 and 24.4 ms against 160.8, 57.2 and 26.2 ms measured (about 30 s, estimated)
#   goal         bench/shakespeare_char.sh: the 5000-step recipe, time to val loss 1.47
#                against eager, nnsc-run in both bf16 recipes, seed 1337 as nanoGPT runs it,
#                both sides with the fused AdamW (out/bench/shakespeare_char); 213 s on the
#                H200 (eager 82 s, nnsc-run autocast 58 s and megatron 51 s)
#   matched      the same for seed 1338 with MATCHED=1, eager taking nnsc-run's windows and
#                dropout streams, so that a drift between the two is the GPU programs'
#                arithmetic (out/bench/shakespeare_char_matched); 209 s on the H200
#   shakespeare  goal, then matched
#   collect      the small outputs of every stage (logs, summaries, configs, metrics) in one
#                archive under $OUT, which the device tool brings back
#   bench/gpu_session.sh [STAGE...]        (default: build smoke goal)
# A 15-minute device session (the H200 machine's start took 29 s of it): call 1
# `DEBS=.gpu/debs TEXT=.gpu/tinyshakespeare.txt bench/gpu_session.sh build smoke goal collect`
# (316 s on the H200, 2026-11-29), then at once (a machine stays warm 30 s; a fresh one starts
# bare and rebuilds) call 2 `TEXT=.gpu/tinyshakespeare.txt bench/gpu_session.sh throughput
# profile cost collect matched collect` (348 s there, before the profile stage grew and the
# cost stage came, about 60 s together;
# build/ stays on the warm machine; the first collect keeps what came before matched should the
# session's time cut the call short), each with `carry` naming the git-ignored folder that
# holds the text and DEBS (.gpu/).
# DEBS=DIR (build): a folder of Debian 12 packages (.deb) to unpack into / for each library the
# machine lacks (it has no apt): protobuf, yaml-cpp, fmt, spdlog, nlohmann-json, CLI11. Fetch
# them where apt works:  apt-get download libprotobuf-dev libprotobuf32 libprotobuf-lite32
#   libprotoc32 protobuf-compiler libyaml-cpp-dev libyaml-cpp0.7 libfmt-dev libfmt9
#   libspdlog-dev libspdlog1.10 nlohmann-json3-dev libcli11-dev
# TEXT: ../shared does not travel to the device machine: copy the corpus into a git-ignored
# folder of the checkout and name it in the device call's carry.
set -euo pipefail
cd "$(dirname "$0")/.."
W=${W:-out/gpu_session}
PY=${PY:-$(command -v python3)}
DEVICE=${DEVICE:-cuda} # cpu: a smoke test of this script off a GPU
mkdir -p "$W"
stage() { # name command...: runs it, its output in $W/<name>.log, and prints its time
  local name=$1 start=$SECONDS
  shift
  echo "== $name"
  set +e
  (set -e; "$@") > "$W/$name.log" 2>&1
  local rc=$?
  set -e
  if ((rc)); then
    tail -30 "$W/$name.log"
    echo "== $name failed after $((SECONDS - start)) s (whole log: $W/$name.log)"
    return 1
  fi
  echo "== $name done in $((SECONDS - start)) s"
}

unpack_missing() { # unpacks $DEBS's packages of each library whose header is missing
  local header pkgs p f
  while read -r header pkgs; do
    [ -e "$header" ] && continue
    for p in $pkgs; do
      f=$(compgen -G "$DEBS/${p}_*.deb" | head -1) || { echo "gpu_session.sh: no $p in $DEBS"; exit 1; }
      echo "unpacking $f ($header is missing)"
      dpkg -x "$f" /
    done
  done <<'LIBS'
/usr/include/google/protobuf/message.h libprotobuf-dev libprotobuf32 libprotobuf-lite32 libprotoc32 protobuf-compiler
/usr/include/yaml-cpp/yaml.h libyaml-cpp-dev libyaml-cpp0.7
/usr/include/fmt/format.h libfmt-dev libfmt9
/usr/include/spdlog/spdlog.h libspdlog-dev libspdlog1.10
/usr/include/nlohmann/json.hpp nlohmann-json3-dev
/usr/include/CLI/CLI.hpp libcli11-dev
LIBS
  ldconfig
}

build() {
  [ -z "${DEBS:-}" ] || unpack_missing
  # No network there: setup.sh names what is missing instead of running apt-get; only the
  # tools the stages run are built (the tests need LLVM's lit, which that machine lacks).
  export NNSC_OFFLINE=${NNSC_OFFLINE:-1}
  export NNSC_BUILD_TARGETS=${NNSC_BUILD_TARGETS:-nnsc-trace nnsc-plan nnsc-codegen nnsc-run nnsc-merge-ckpt nnsc-prepare-data}
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())'
  command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv
  scripts/setup.sh
  # The choices CMake printed (this stage's output is $W/build.log); without NCCL every
  # later stage would fail at connect.
  [ "$DEVICE" != cuda ] || grep -q "nnsc: NCCL backend ON" "$W/build.log" ||
    { echo "gpu_session.sh: no NCCL backend: $(grep -m1 'nnsc: NCCL' "$W/build.log")"; exit 1; }
}

smoke() {
  local S=$W/smoke B=build/bin
  rm -rf "$S" && mkdir -p "$S"
  "$PY" examples/nanogpt/export.py --config tiny --batch 4 --out "$S/gpt"
  $B/nnsc-trace "$S/gpt/model.pt" --inputs "$S/gpt/inputs.yaml" -o "$S/gpt"
  $B/nnsc-plan "$S/gpt/graph.pb" --policy dp --runtime-ngpus 1 -o "$S/plan.pb"
  $B/nnsc-codegen "$S/gpt/graph.pb" "$S/plan.pb" -o "$S/prog"
  "$PY" - "$S/tokens.bin" <<'PY'
import sys, numpy as np
# A learnable stream: runs of a permutation of the 65 ids, each run's start drawn at random.
rng = np.random.default_rng(0)
perm = rng.permutation(65)
np.concatenate([np.roll(perm, rng.integers(65)) for _ in range(3000)]).astype(np.uint16).tofile(sys.argv[1])
PY
  cat > "$S/cfg.yaml" <<YAML
program: $S/prog
run_dir: $S/run
device: $DEVICE
data: {train: $S/tokens.bin, val: $S/tokens.bin}
train: {steps: 20, log_every: 5, val_every: 10, val_batches: 4}
optimizer: {name: adamw, lr: 1.0e-3, weight_decay: 0.1, grad_clip: 1.0, fused: "${FUSED:-true}"}
checkpoint: {every: 10, keep_last: 2}
precision: {mode: bf16}
YAML
  $B/nnsc-run "$S/cfg.yaml" --nproc-per-node 1
  $B/nnsc-run "$S/cfg.yaml" --nproc-per-node 1 --run_dir="$S/run2" --train.steps=10 > /dev/null
  $B/nnsc-run "$S/cfg.yaml" --nproc-per-node 1 --run_dir="$S/run2"
  "$PY" - "$S/run/metrics.jsonl" "$S/run2/metrics.jsonl" <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:])
assert [r["step"] for r in a] == list(range(1, 21)), a
assert a[-1]["loss"] < a[0]["loss"], "the loss did not fall"
assert [r["loss"] for r in a] == [r["loss"] for r in b], "a resumed run differs"
print(f"smoke: 20 steps, loss {a[0]['loss']:.4f} -> {a[-1]['loss']:.4f}; resumed run equal")
PY
  $B/nnsc-merge-ckpt "$S/run" -o "$S/merged.pt"
  "$PY" - "$S/merged.pt" <<'PY'
import sys, torch
sys.path.insert(0, "examples/nanogpt")
from model import CONFIGS, GPT
print("load_state_dict:", GPT(CONFIGS["tiny"]).load_state_dict(torch.load(sys.argv[1])))
PY
  # Recompute on the device: with dropout 0.1, every Block re-run in backward must draw the
  # masks its forward drew (the device's generator replayed); in fp32 the losses then equal
  # the plain program's up to the kernels' own nondeterminism (equal on CPU). Masks drawn anew
  # would give backward other masks than forward's: gradients of another function, from step 2
  # on far beyond fp32 rounding (not measured).
  "$PY" examples/nanogpt/export.py --config tiny --batch 4 --dropout 0.1 --out "$S/gptd"
  $B/nnsc-trace "$S/gptd/model.pt" --inputs "$S/gptd/inputs.yaml" -o "$S/gptd" --no-verify
  $B/nnsc-plan "$S/gptd/graph.pb" --policy dp --runtime-ngpus 1 -o "$S/plan-d.pb"
  $B/nnsc-plan "$S/gptd/graph.pb" --policy dp --runtime-ngpus 1 --recompute-modules Block \
    -o "$S/plan-rc.pb"
  local p
  for p in d rc; do
    $B/nnsc-codegen "$S/gptd/graph.pb" "$S/plan-$p.pb" -o "$S/prog-$p"
    $B/nnsc-run "$S/cfg.yaml" --nproc-per-node 1 --program="$S/prog-$p" --run_dir="$S/run-$p" \
      --precision.mode=fp32 --checkpoint.every=0 --checkpoint.save_last=false > "$S/run-$p.txt"
  done
  "$PY" - "$S/run-d/metrics.jsonl" "$S/run-rc/metrics.jsonl" <<'PY'
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(p)] for p in sys.argv[1:])
d = max(abs(x - y) for x, y in zip(a, b))
assert len(a) == len(b) == 20 and d <= 1e-4, f"recompute moved the losses by {d:.3g}"
print(f"smoke: recompute with dropout 0.1 (fp32): losses within {d:.3g} of the plain run's")
PY
}

throughput() {
  DEVICE=$DEVICE PY=$PY bench/gpu_vs_eager.sh
  DEVICE=$DEVICE PY=$PY FUSED=1 PRECISIONS=bf16 W=out/bench/gpu_vs_eager_fused bench/gpu_vs_eager.sh
}
profile() {
  local cfg name run
  # The fused autocast run is the one throughput row below eager (0.95x on the H200).
  for run in gpu_vs_eager/fp32-megatron-false gpu_vs_eager/bf16-megatron-false \
    gpu_vs_eager_fused/bf16-autocast-false; do
    cfg=out/bench/${run%%/*}/cfg-${run#*/}.yaml
    name=${run#*/}
    [ "${run%%/*}" = gpu_vs_eager ] || name=fused-$name
    [ -e "$cfg" ] || { echo "gpu_session.sh: no $cfg: run the throughput stage first"; exit 1; }
    rm -rf "$W/profile-$name" # a run left there would resume at its end and profile nothing
    build/bin/nnsc-run "$cfg" --nproc-per-node 1 --run_dir="$W/profile-$name" --train.steps=10 \
      --profile.start_step=8 --profile.end_step=9 --profile.top=12 > "$W/profile-$name.log"
    cat "$W/profile-$name/profile/rank0.summary.txt"
  done
  # Eager's side of the fused autocast row, the same steps of the same model and batch.
  "$PY" bench/eager_reference.py --config gpt2 --mbs 8 --steps 5 --warmup 5 --device "$DEVICE" \
    --precision bf16 --fused --profile "$W/profile-eager-bf16-fused.txt" > /dev/null
  echo "eager, bf16 autocast, fused AdamW, steps 8-9:"
  cat "$W/profile-eager-bf16-fused.txt"
}
# The cost model against the throughput stage's measured steps (foreach AdamW, micro-batch 8 x
# 1024 tokens): nnsc-plan's predicted step of the same gpt2 graph on the shipped H200 spec (the
# datasheet's rates at one matmul efficiency) and on the spec nnsc-profile-device measures here
# (achieved rates per dtype, tf32 among them).
cost() {
  local G=out/bench/gpu_vs_eager spec=$W/$DEVICE-local.yaml row label args measured a b
  [ -e "$G/real/graph.pb" ] && [ -e "$W/throughput.log" ] ||
    { echo "gpu_session.sh: cost: run the throughput stage first"; exit 1; }
  # Built here, not in the build stage: it has not been built against a CUDA wheel before, and
  # a failure should fail this stage alone.
  cmake --build build --target nnsc-profile-device > "$W/cost-build.log" 2>&1 ||
    { tail -30 "$W/cost-build.log"; exit 1; }
  build/bin/nnsc-profile-device --device "$DEVICE" --out "$spec" --seconds "${PROFILE_SECONDS:-0.3}"
  predicted() { # spec args... -> the predicted step in ms
    build/bin/nnsc-plan "$G/real/graph.pb" --policy dp --runtime-ngpus 1 --device "$1" \
      "${@:2}" --print -o "$W/cost-plan.pb" |
      awk '/predicted step time:/ { v = $4; if ($5 == "us") v /= 1000; if ($5 == "s") v *= 1000; print v }'
  }
  for row in "fp32|--precision fp32" "tf32|--precision fp32 --tf32" \
    "bf16 (megatron)|--precision bf16"; do
    label=${row%%|*} args=${row#*|}
    # The first row of the label: the foreach run (the fused one follows).
    measured=$(awk -v l="$label:" 'index($0, l) == 1 { print 8192 / $3 * 1000; exit }' \
      "$W/throughput.log")
    [ -n "$measured" ] || { echo "gpu_session.sh: cost: no '$label' row in $W/throughput.log"; exit 1; }
    # shellcheck disable=SC2086 # args is a list of flags
    a=$(predicted configs/devices/h200-sxm.yaml $args)
    # shellcheck disable=SC2086
    b=$(predicted "$spec" $args)
    awk -v l="$label" -v m="$measured" -v a="$a" -v b="$b" 'BEGIN {
      printf "%s: measured step %.1f ms; predicted %.1f ms on h200-sxm.yaml (%.2fx), %.1f ms on the measured spec (%.2fx)\n",
        l, m, a, a / m, b, b / m }'
  done
}
# Both sides update with the fused AdamW, as nanoGPT's eager run does on cuda.
goal() {
  DEVICE=$DEVICE PY=$PY SEEDS=1337 FUSED=1 bench/shakespeare_char.sh
}
matched() {
  DEVICE=$DEVICE PY=$PY SEEDS=1338 FUSED=1 MATCHED=1 W=out/bench/shakespeare_char_matched \
    bench/shakespeare_char.sh
}
shakespeare() {
  goal
  matched
}
# The stages' small outputs (logs, summaries, configs, metrics; no weights, checkpoints or
# traces of 8 MiB or more) in one archive under $OUT, which the device tool brings back (it takes
# at most 8 files of 16 MiB there).
collect() {
  [ -n "${OUT:-}" ] || { echo "gpu_session.sh: collect: OUT is not set"; exit 1; }
  local tarball=$OUT/gpu_session-$(date +%H%M%S).tar.gz dirs=("$W") d
  for d in out/bench/gpu_vs_eager* out/bench/shakespeare_char*; do
    [ -d "$d" ] && dirs+=("$d")
  done
  find "${dirs[@]}" -type f -size -8192k \
    \( -name '*.log' -o -name '*.txt' -o -name '*.yaml' -o -name '*.jsonl' -o -name '*.json' \) |
    tar czf "$tarball" -T -
  ls -l "$tarball"
}

(($#)) || set -- build smoke goal
failed=()
for s in "$@"; do
  case "$s" in
    build) # every later stage needs it (not a condition either: see below)
      set +e
      (stage build build)
      rc=$?
      set -e
      ((rc == 0)) || exit 1
      grep -E "^-- nnsc: |^torch |^name" "$W/build.log" || true ;;
    smoke | throughput | profile | cost | goal | matched | shakespeare | collect)
      # Independent: a failure does not stop the next. Not called as a condition: inside
      # one bash ignores `set -e` even in the stage's subshell, and a failed command would
      # not end its stage; in a subshell of its own, whose exit status is the stage's.
      set +e
      (stage "$s" "$s")
      rc=$?
      set -e
      if ((rc)); then failed+=("$s"); elif [ "$s" = profile ] || [ "$s" = cost ] || [ "$s" = collect ]; then
        cat "$W/$s.log"
      else tail -40 "$W/$s.log"; fi ;;
    *) echo "gpu_session.sh: error: unknown stage '$s' (build, smoke, throughput, profile, cost, goal, matched, shakespeare, collect)" >&2; exit 2 ;;
  esac
done
((${#failed[@]} == 0)) || { echo "gpu_session.sh: failed: ${failed[*]}"; exit 1; }
