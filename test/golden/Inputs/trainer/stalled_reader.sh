#!/bin/sh
# stalled_reader.sh RUN_DIR STEP CMD...: signal_after_checkpoint.sh's SIGTERM to the launcher
# (CMD) once RUN_DIR holds a complete checkpoint step-STEP, with the launcher's stdout and stderr
# into a FIFO that nobody drains (held open read-write here, so its writes neither fail nor get
# read; the FIFO's 64 KiB are full long before: a progress line a step). Prints what that
# script prints: the launcher's exit status, how long it took and the workers it left.
run=$1 step=$2; shift 2
fifo=$run.fifo
rm -f "$fifo" && mkfifo "$fifo" || exit 1
exec 3<>"$fifo"
exec "$(dirname "$0")/signal_after_checkpoint.sh" "$fifo" "$run" "$step" TERM launcher "$@"
