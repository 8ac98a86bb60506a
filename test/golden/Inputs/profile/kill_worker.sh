#!/bin/sh
# kill_worker.sh LOG CMD...: runs CMD (a launcher of 2 workers) in the
# background, kills its last worker with SIGKILL once both have run for a
# second, and prints the launcher's exit status and how long it took to exit.
log=$1; shift
"$@" > "$log" 2>&1 &
launcher=$!
i=0
while [ "$(pgrep -P $launcher | wc -l)" -lt 2 ]; do
  i=$((i + 1)); [ $i -gt 100 ] && { echo "no workers"; kill $launcher; exit 1; }
  sleep 0.1
done
sleep 1
worker=$(pgrep -P $launcher | tail -n 1)
start=$(date +%s)
kill -9 "$worker"
wait $launcher
rc=$?
echo "launcher exit status $rc after $(( $(date +%s) - start )) s"
