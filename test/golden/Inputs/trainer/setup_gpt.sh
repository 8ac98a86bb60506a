#!/bin/sh
# setup_gpt.sh PYTHON EXAMPLES INPUTS WORK: the tiny nanoGPT exported, traced,
# planned for 2 data-parallel ranks and generated into WORK/prog; the 20 KB
# shakespeare excerpt tokenized into WORK/data; WORK/cfg.yaml from gpt-dp2.yaml.
# Attention in its explicit form on every torch (load_merged.py builds that).
set -e
python=$1 examples=$2 inputs=$3 work=$4
"$python" "$examples/nanogpt/export.py" --config tiny --batch 2 --attention explicit --out "$work/gpt" \
  > /dev/null
nnsc-trace "$work/gpt/model.pt" --inputs "$work/gpt/inputs.yaml" -o "$work/gpt" > /dev/null
nnsc-plan "$work/gpt/graph.pb" --policy dp --runtime-ngpus 2 -o "$work/gpt/plan.pb" > /dev/null
nnsc-codegen "$work/gpt/graph.pb" "$work/gpt/plan.pb" -o "$work/prog" > /dev/null
nnsc-prepare-data "$inputs/trainer/shakespeare-20k.txt" -o "$work/data" > /dev/null
sed "s#@WORK@#$work#g" "$inputs/trainer/gpt-dp2.yaml" > "$work/cfg.yaml"
