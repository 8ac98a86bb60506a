#!/usr/bin/env bash
# Runs each libFuzzer target of fuzz/ for SECONDS (default 60), one after
# another, and prints per target the inputs executed and any finding.
#   bench/fuzz.sh [SECONDS] [TARGET...]    SECONDS=0: replay the seed corpora once
# Builds build-fuzz/ first (clang, -DNNSC_FUZZ=ON; libfuzzer-14-dev, which
# scripts/setup.sh installs). New corpus entries and crash inputs go to
# build-fuzz/fuzz-runs/<target>/; the seeds in fuzz/corpus/ are only read.
# NNSC_FUZZ_JOBS sets the build's parallelism (default 2); NNSC_FUZZ_RUNS=N stops
# each target after N inputs as well (SECONDS is then its longest run), e.g.
#   NNSC_FUZZ_RUNS=1000000 bench/fuzz.sh 900     # a million inputs each
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
all=(annotation annotation_split op_yaml plan_file constraints graph_pb plan_pb manifest_pb safetensors checkpoint_meta
     trainer_config input_spec)
targets=("${@:-${all[@]}}")

cxx=$(command -v clang++ || command -v clang++-19 || command -v clang++-14 || true)
if [ -z "$cxx" ]; then
  echo "fuzz: no clang++; scripts/setup.sh installs it (libfuzzer-14-dev or libfuzzer-19-dev)" >&2
  exit 1
fi
if [ ! -f build-fuzz/CMakeCache.txt ]; then
  cmake -S . -B build-fuzz -G Ninja -DNNSC_FUZZ=ON -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build build-fuzz -j"${NNSC_FUZZ_JOBS:-2}" >/dev/null

found=0
printf '%-16s %12s  %s\n' target executions result
for t in "${targets[@]}"; do
  bin=build-fuzz/bin/fuzz-$t
  [ -x "$bin" ] || { echo "fuzz: no target '$t'; expected one of: ${all[*]}" >&2; exit 1; }
  dir=build-fuzz/fuzz-runs/$t
  mkdir -p "$dir/corpus"
  if [ "$secs" = 0 ]; then
    args=(-runs=0)
  else
    args=(-max_total_time="$secs")
    [ -n "${NNSC_FUZZ_RUNS:-}" ] && args+=(-runs="$NNSC_FUZZ_RUNS")
  fi
  set +e
  "$bin" "${args[@]}" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$dir/" "$dir/corpus" "fuzz/corpus/$t" >"$dir/log" 2>&1
  rc=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
  if [ "$rc" = 0 ]; then
    result=ok
  else
    found=1
    artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$dir/log" | tail -1)
    what=$(grep -m1 -E 'ERROR: (AddressSanitizer|libFuzzer)|runtime error|fuzz invariant failed|terminate called' "$dir/log" || true)
    result="FINDING (exit $rc): ${what:-see $dir/log} -> ${artifact:-no input saved}"
  fi
  printf '%-16s %12s  %s\n' "$t" "${execs:-?}" "$result"
done
exit "$found"
