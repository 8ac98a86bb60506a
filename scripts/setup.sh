#!/usr/bin/env bash
# Installs every package nnsc uses (idempotent) and builds it in Release.
#   scripts/setup.sh            install + configure + build into build/
#   NNSC_SKIP_BUILD=1 scripts/setup.sh   install only
#   NNSC_UNITY_BUILD=OFF scripts/setup.sh  one object per LibTorch source (incremental work)
#
# Which LibTorch (NNSC_TORCH_PREFIX):
#   (unset)   a CUDA torch of the python3 on PATH when it has one (a GPU machine with a
#             pip-installed torch), else Debian's libtorch-dev
#   debian    Debian's libtorch-dev (what CI builds against)
#   python    the torch of the python3 on PATH, CUDA or not
#   DIR       a LibTorch's CMake prefix: a pip torch's `torch.utils.cmake_prefix_path`, or the
#             root of pytorch.org's unpacked libtorch archive (DIR/share/cmake/Torch or
#             DIR/Torch holds TorchConfig.cmake)
# With any LibTorch but Debian's, Debian's libtorch-dev, python3-torch and libgloo-dev are not
# installed, and packages that cannot be installed (a machine without network or apt) are
# named and the build goes on with what is there; without LLVM's lit and FileCheck (which
# the golden tests need) or Catch2 (the unit tests) the tests are not built, the tools are. The system's protobuf, fmt and spdlog headers take
# precedence over the copies a wheel carries (cmake/NnscSystemFirst.cmake).
#   NNSC_OFFLINE=1       do not run apt-get (a machine without network): name the missing
#                        packages and build with what is there (not with Debian's LibTorch)
#   NNSC_BUILD_DIR=DIR   build there (default build/)
#   NNSC_CXX_STANDARD=20 the C++ standard (default: 17, or the newer one LibTorch's headers
#                        demand: C++20 from PyTorch 2.12 on; cmake/NnscCxxStandard.cmake)
#   NNSC_BUILD_TARGETS="T..."  build only these targets
#   NNSC_SETUP_PRINT=1   print the choices (LibTorch, packages, CMake arguments) and stop
set -euo pipefail
cd "$(dirname "$0")/.."
die() { echo "setup: error: $*" >&2; exit 1; }

# The LibTorch: "debian", or a CMake prefix with TorchConfig.cmake under it.
python_torch() { # -> "<cmake prefix> <cuda version or ->", or nothing without a torch
  command -v python3 >/dev/null || return 0
  python3 -c 'import torch, torch.utils; print(torch.utils.cmake_prefix_path, torch.version.cuda or "-")' \
    2>/dev/null || true
}
TORCH=${NNSC_TORCH_PREFIX:-}
TORCH_WHY=""
case "$TORCH" in
  "")
    read -r prefix cuda <<<"$(python_torch)" || true
    if [ -n "${prefix:-}" ] && [ "${cuda:--}" != - ]; then
      TORCH=$prefix
      TORCH_WHY="the CUDA $cuda torch of $(command -v python3); NNSC_TORCH_PREFIX=debian for Debian's"
    else
      TORCH=debian
    fi ;;
  python)
    read -r prefix cuda <<<"$(python_torch)" || true
    [ -n "${prefix:-}" ] || die "NNSC_TORCH_PREFIX=python, but $(command -v python3 || echo 'no python3') imports no torch"
    TORCH=$prefix
    TORCH_WHY="the torch of $(command -v python3) (CUDA ${cuda:--})" ;;
esac
if [ "$TORCH" != debian ]; then
  [ -d "$TORCH" ] || die "NNSC_TORCH_PREFIX: no such directory: $TORCH"
  found=""
  for dir in share/cmake/Torch Torch lib/cmake/Torch; do
    [ -f "$TORCH/$dir/TorchConfig.cmake" ] && found=$dir
  done
  [ -n "$found" ] ||
    die "NNSC_TORCH_PREFIX: no TorchConfig.cmake under $TORCH (looked in share/cmake/Torch, Torch, lib/cmake/Torch)"
  TORCH=$(cd "$TORCH" && pwd)
fi

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  libopenblas0-pthread
  libprotobuf-dev protobuf-compiler libyaml-cpp-dev libcli11-dev
  libspdlog-dev libfmt-dev nlohmann-json3-dev catch2 libjemalloc-dev coinor-libcbc-dev
  python3-yaml python3-numpy
)
# Debian's LibTorch, its Python twin (the tests' oracle) and Gloo's headers.
[ "$TORCH" = debian ] && PACKAGES+=(libtorch-dev python3-torch libgloo-dev)
# lit and FileCheck come with the release's own LLVM: 14 on Debian 12, 19 on
# Debian 13, 18 on Ubuntu 24.04 (CMake finds whichever is installed, newest first).
# On Debian 12 also libFuzzer (with clang-14) for the fuzz targets (bench/fuzz.sh).
. /etc/os-release
case "${VERSION_CODENAME:-}" in
  bookworm) PACKAGES+=(llvm-14-tools libfuzzer-14-dev) ;;
  trixie) PACKAGES+=(llvm-19-tools) ;;
  noble) PACKAGES+=(llvm-18-tools) ;;
  *) echo "setup: warning: untested release '${PRETTY_NAME:-unknown}'; trying llvm-19-tools" >&2
     PACKAGES+=(llvm-19-tools) ;;
esac

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

BUILD=${NNSC_BUILD_DIR:-build}
CMAKE_ARGS=(-S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release
            -DNNSC_UNITY_BUILD="${NNSC_UNITY_BUILD:-ON}")
[ -n "${NNSC_CXX_STANDARD:-}" ] && CMAKE_ARGS+=(-DNNSC_CXX_STANDARD="$NNSC_CXX_STANDARD")
if [ "$TORCH" != debian ]; then
  CMAKE_ARGS+=(-DCMAKE_PREFIX_PATH="$TORCH")
  # Without LLVM's tools the golden tests cannot run, without Catch2 (v2 or v3 headers)
  # the unit tests cannot build: build the rest.
  tools=""
  for f in /usr/lib/llvm-*/bin/FileCheck; do [ -x "$f" ] && tools=$f; done
  [ -n "$tools" ] || ! command -v FileCheck >/dev/null || tools=FileCheck
  catch2=""
  for f in /usr/include/catch2/catch.hpp /usr/include/catch2/catch_all.hpp \
           /usr/local/include/catch2/catch.hpp /usr/local/include/catch2/catch_all.hpp; do
    [ -e "$f" ] && catch2=$f
  done
  [ -n "$tools" ] && [ -n "$catch2" ] || CMAKE_ARGS+=(-DNNSC_BUILD_TESTS=OFF)
fi

if [ "${NNSC_SETUP_PRINT:-0}" = 1 ]; then
  echo "torch: $TORCH${TORCH_WHY:+ ($TORCH_WHY)}"
  echo "packages: ${PACKAGES[*]}"
  echo "missing: ${missing[*]:-none}"
  echo "cmake ${CMAKE_ARGS[*]}"
  exit 0
fi
[ "$TORCH" != debian ] && echo "setup: LibTorch from $TORCH${TORCH_WHY:+ ($TORCH_WHY)}"

if ((${#missing[@]})); then
  echo "setup: missing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  if [ "${NNSC_OFFLINE:-0}" = 1 ]; then
    [ "$TORCH" = debian ] && die "NNSC_OFFLINE=1, but Debian's LibTorch needs ${missing[*]}"
    echo "setup: warning: NNSC_OFFLINE=1: not installing ${missing[*]}; building with what is here" >&2
  elif ! { $SUDO apt-get update -qq &&
         DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"; }; then
    [ "$TORCH" = debian ] && die "apt-get could not install ${missing[*]}"
    echo "setup: warning: could not install ${missing[*]} (no network or no apt?); building with what is here" >&2
  fi
fi

[ "${NNSC_SKIP_BUILD:-0}" = 1 ] && exit 0
# Let ccache hit across clones of the repository (paths under it are hashed relative).
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
# The LibTorch units in batches (unity build: a fresh build about a third faster);
# NNSC_UNITY_BUILD=OFF rebuilds less after an edit of one file.
cmake "${CMAKE_ARGS[@]}"
# NNSC_BUILD_TARGETS: only these (a test builds one object this way).
cmake --build "$BUILD" ${NNSC_BUILD_TARGETS:+--target $NNSC_BUILD_TARGETS}
