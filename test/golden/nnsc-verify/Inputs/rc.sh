#!/bin/sh
# rc.sh OUT ERR CMD...: runs CMD with its stdout in OUT and stderr in ERR and
# prints its exit code (lit's shell has no $?).
out=$1 err=$2; shift 2
"$@" > "$out" 2> "$err"
echo "exit code $?"
