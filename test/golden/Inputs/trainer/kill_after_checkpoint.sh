#!/bin/sh
# kill_after_checkpoint.sh LOG RUN_DIR STEP CMD...: runs CMD (an nnsc-run
# launcher) in the background, waits until RUN_DIR holds a complete checkpoint
# step-STEP, kills the last worker with SIGKILL and prints the launcher's exit
# status and how long it took to exit (never waits more than 120 s).
log=$1 run=$2 step=$3; shift 3
"$@" > "$log" 2>&1 &
launcher=$!
i=0
while [ ! -e "$run/checkpoints/step-$step/COMPLETE" ]; do
  i=$((i + 1)); [ $i -gt 1200 ] && { echo "no checkpoint"; kill $launcher; exit 1; }
  sleep 0.1
done
worker=$(pgrep -P $launcher | tail -n 1)
start=$(date +%s)
kill -9 "$worker"
i=0
while kill -0 $launcher 2>/dev/null; do
  i=$((i + 1)); [ $i -gt 1200 ] && { echo "launcher still alive after 120 s"; kill -9 $launcher; exit 1; }
  sleep 0.1
done
wait $launcher
rc=$?
echo "launcher exit status $rc after $(( $(date +%s) - start )) s"
echo "workers left: $(pgrep -P $launcher | wc -l)"
