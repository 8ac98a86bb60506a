#!/usr/bin/env bash
# fake_python.sh DIR PREFIX CUDA: writes DIR/python3, a stand-in for the python3 on a
# machine's PATH whose torch has CMake prefix PREFIX and CUDA version CUDA ("-" for a CPU
# build, "none" for a python3 without torch), as scripts/setup.sh asks it.
set -euo pipefail
mkdir -p "$1"
if [ "$3" = none ]; then
  printf '#!/bin/sh\necho "ModuleNotFoundError: No module named torch" >&2\nexit 1\n' > "$1/python3"
else
  printf '#!/bin/sh\necho "%s %s"\n' "$2" "$3" > "$1/python3"
fi
chmod +x "$1/python3"
