#!/bin/sh
# kill_worker.sh LOG CMD...: runs CMD (an nnsc-run launcher) in the background,
# waits for its first progress line in LOG, kills one worker with SIGKILL and
# prints the launcher's exit status and how long it took to exit.
log=$1; shift
"$@" > "$log" 2>&1 &
launcher=$!
i=0
while ! grep -q "^step" "$log" 2>/dev/null; do
  i=$((i + 1)); [ $i -gt 600 ] && { echo "no progress"; kill $launcher; exit 1; }
  sleep 0.1
done
worker=$(pgrep -P $launcher | tail -n 1)
start=$(date +%s)
kill -9 "$worker"
wait $launcher
rc=$?
echo "launcher exit status $rc after $(( $(date +%s) - start )) s"
