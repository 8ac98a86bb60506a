#!/usr/bin/env bash
# make_wheel.sh DIR: a LibTorch laid out as a pip wheel's (DIR/torch/share/cmake/Torch,
# DIR/torch/include, DIR/torch/lib) over Debian's, whose include/ also carries protobuf, fmt
# and spdlog headers of its own, as a wheel's does, made to stop the compiler when included:
# a build that lets them win over the system's fails. Its umbrella headers (torch/all.h,
# ATen/ATen.h) demand C++20, as PyTorch's do from 2.12 on: a build in C++17 fails.
set -euo pipefail
T=$1/torch
DEBIAN=/usr/lib/x86_64-linux-gnu/cmake/Torch/TorchConfig.cmake
[ -f "$DEBIAN" ] || { echo "make_wheel.sh: no Debian LibTorch ($DEBIAN)" >&2; exit 1; }
mkdir -p "$T/share/cmake/Torch" "$T/include" "$T/lib"
cat > "$T/share/cmake/Torch/TorchConfig.cmake" <<CMAKE
# Debian's TorchConfig.cmake with this directory as the install prefix.
set(ENV{TORCH_INSTALL_PREFIX} "\${CMAKE_CURRENT_LIST_DIR}/../../..")
include($DEBIAN)
CMAKE
for d in c10 caffe2; do
  [ -e "/usr/include/$d" ] && ln -s "/usr/include/$d" "$T/include/$d"
done
# ATen and torch as trees of links, in which the two umbrella headers are copies whose
# standard check says C++20.
cp -rs /usr/include/ATen /usr/include/torch "$T/include/"
for h in ATen/ATen.h torch/csrc/api/include/torch/all.h; do
  rm "$T/include/$h"
  sed -E 's/__cplusplus < 20[0-9]+L/__cplusplus < 202002L/; s/C\+\+1[0-9] or later/C++20 or later/' \
    "/usr/include/$h" > "$T/include/$h"
  grep -q '__cplusplus < 202002L' "$T/include/$h" ||
    { echo "make_wheel.sh: no standard check in /usr/include/$h" >&2; exit 1; }
done
for lib in libtorch.so libtorch_cpu.so libc10.so; do
  [ -e "/usr/lib/x86_64-linux-gnu/$lib" ] && ln -s "/usr/lib/x86_64-linux-gnu/$lib" "$T/lib/$lib"
done
poison() { # header
  mkdir -p "$(dirname "$T/include/$1")"
  printf '#error "the LibTorch copy of <%s> was included instead of the system'"'"'s"\n' "$1" \
    > "$T/include/$1"
}
poison google/protobuf/port_def.inc
poison google/protobuf/stubs/common.h
poison fmt/core.h
poison fmt/format.h
poison spdlog/spdlog.h
