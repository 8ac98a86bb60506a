#!/usr/bin/env bash
# Installs every package nnsc uses (idempotent) and builds it in Release.
#   scripts/setup.sh            install + configure + build into build/
#   NNSC_SKIP_BUILD=1 scripts/setup.sh   install only
#   NNSC_UNITY_BUILD=OFF scripts/setup.sh  one object per LibTorch source (incremental work)
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  libtorch-dev python3-torch libgloo-dev libopenblas0-pthread
  libprotobuf-dev protobuf-compiler libyaml-cpp-dev libcli11-dev
  libspdlog-dev libfmt-dev nlohmann-json3-dev catch2 libjemalloc-dev coinor-libcbc-dev
  python3-yaml python3-numpy
)
# lit and FileCheck come with the release's own LLVM: 14 on Debian 12, 19 on
# Debian 13 (CMake finds whichever is installed, newest first). On Debian 12
# also libFuzzer (with clang-14) for the fuzz targets (bench/fuzz.sh).
. /etc/os-release
case "${VERSION_CODENAME:-}" in
  bookworm) PACKAGES+=(llvm-14-tools libfuzzer-14-dev) ;;
  trixie) PACKAGES+=(llvm-19-tools) ;;
  *) echo "setup: warning: untested release '${PRETTY_NAME:-unknown}'; trying llvm-19-tools" >&2
     PACKAGES+=(llvm-19-tools) ;;
esac

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

[ "${NNSC_SKIP_BUILD:-0}" = 1 ] && exit 0
# Let ccache hit across clones of the repository (paths under it are hashed relative).
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
# The LibTorch units in batches (unity build: a fresh build about a third faster);
# NNSC_UNITY_BUILD=OFF rebuilds less after an edit of one file.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DNNSC_UNITY_BUILD="${NNSC_UNITY_BUILD:-ON}"
cmake --build build
