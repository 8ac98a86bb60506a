#!/usr/bin/env bash
# The sanitizer pass (.ci/run runs it after the test command): builds the whole
# project with AddressSanitizer and UndefinedBehaviorSanitizer into build-asan/
# and runs the unit suites and the golden suite under them (and, alone, the
# hostile-input corpus). Any
# report fails the test that caused it (UBSan halts at the first, ASan always
# does). Leak detection is off: LibTorch's and Python's
# process-lifetime allocations would drown ours.
#   scripts/sanitize.sh                      # unit, runtime and golden suites
#   scripts/sanitize.sh -L 'unit|torch2'     # ctest arguments choose the tests instead
# Inside the Debian 13 root (scripts/debian13.sh scripts/sanitize.sh, as .ci/run
# does) the build goes to build/asan, which is the root's own, not the tree's.
#   NNSC_CXX_STANDARD=20 scripts/sanitize.sh  # in C++20 (default: what LibTorch's headers ask)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build-asan
[ "${NNSC_DEBIAN13:-0}" = 1 ] && dir=build/asan
select=(-R '^(unit:|runtime:|golden-[0-9]+$|hostile)')
(($#)) && select=("$@")
NNSC_SKIP_BUILD=1 scripts/setup.sh
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
# -O0 without debug info: the cheapest build; LibTorch, which does the heavy
# work, is not rebuilt, so the tests run nearly as fast as in Release.
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O0" \
  -DNNSC_SANITIZE=ON -DNNSC_UNITY_BUILD="${NNSC_UNITY_BUILD:-ON}" \
  -DNNSC_CXX_STANDARD="${NNSC_CXX_STANDARD:-}" >/dev/null
cmake --build "$dir"
export ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:detect_odr_violation=0:verify_asan_link_order=0:${ASAN_OPTIONS:-}
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}
ctest --test-dir "$dir" --output-on-failure -j "$(nproc)" "${select[@]}"
