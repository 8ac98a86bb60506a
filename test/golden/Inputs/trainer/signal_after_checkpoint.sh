#!/bin/sh
# signal_after_checkpoint.sh LOG RUN_DIR STEP SIG WHO CMD...: runs CMD (an nnsc-run
# launcher) in the background, waits until RUN_DIR holds a complete checkpoint
# step-STEP, sends SIG (KILL, USR1, ...) to WHO (launcher: the launcher; worker:
# its last worker alone) and prints the launcher's exit status, how long it
# took to exit after the signal and how many workers it left (never waits more
# than 120 s).
log=$1 run=$2 step=$3 sig=$4 who=$5; shift 5
"$@" > "$log" 2>&1 &
launcher=$!
i=0
while [ ! -e "$run/checkpoints/step-$step/COMPLETE" ]; do
  i=$((i + 1)); [ $i -gt 1200 ] && { echo "no checkpoint"; kill $launcher; exit 1; }
  sleep 0.1
done
if [ "$who" = launcher ]; then target=$launcher; else target=$(pgrep -P $launcher | tail -n 1); fi
workers=$(pgrep -P $launcher)
start=$(date +%s)
kill -s "$sig" "$target"
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
