#!/bin/sh
# A trainer whose workers die: nnsc-run with a training file that is not there.
exec nnsc-run "$@" --data.train=/nonexistent/train.safetensors
