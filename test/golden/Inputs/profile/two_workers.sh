#!/bin/sh
# Starts two nnsc-profile-comm workers the way torchrun would (its
# environment variables, no --nproc) and prints each one's exit status.
#   two_workers.sh OUT.yaml
set -u
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
common="WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port"
args="--out $1 --sizes 1KiB:4KiB --iters 2 --warmup 1 --collectives all_reduce,send_recv"
env $common RANK=1 LOCAL_RANK=1 nnsc-profile-comm $args > /dev/null &
pid1=$!
env $common RANK=0 LOCAL_RANK=0 nnsc-profile-comm $args
echo "rank 0 exit $?" > "$1.rank0"
wait $pid1
echo "rank 1 exit $?"
cat "$1.rank0"
