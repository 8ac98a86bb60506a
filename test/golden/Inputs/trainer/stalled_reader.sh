#!/bin/sh
# stalled_reader.sh RUN_DIR STEP CMD...: runs CMD (an nnsc-run launcher) with its stdout and
# stderr into a FIFO that nobody drains (held open read-write here, so the launcher's writes
# neither fail nor get read), waits until RUN_DIR holds a complete checkpoint step-STEP (the
# FIFO's 64 KiB are full long before: a progress line a step), sends SIGTERM to the launcher
# and prints its exit status, how long it took to exit after the signal and how many workers
# it left (never waits more than 120 s for either).
run=$1 step=$2; shift 2
fifo=$run.fifo
rm -f "$fifo" && mkfifo "$fifo" || exit 1
exec 3<>"$fifo"
"$@" > "$fifo" 2>&1 &
launcher=$!
i=0
while [ ! -e "$run/checkpoints/step-$step/COMPLETE" ]; do
  i=$((i + 1)); [ $i -gt 1200 ] && { echo "no checkpoint"; kill -9 $launcher; exit 1; }
  sleep 0.1
done
workers=$(pgrep -P $launcher)
start=$(date +%s)
kill -s TERM $launcher
i=0
while kill -0 $launcher 2>/dev/null; do
  i=$((i + 1)); [ $i -gt 1200 ] && { echo "launcher still alive after 120 s"; kill -9 $launcher; exit 1; }
  sleep 0.1
done
wait $launcher
rc=$?
echo "launcher exit status $rc after $(( $(date +%s) - start )) s"
left=0 # the workers are the init process's children by now: each looked up by its pid
for w in $workers; do kill -0 "$w" 2>/dev/null && left=$((left + 1)); done
echo "workers left: $left"
exec 3>&-
rm -f "$fifo"
