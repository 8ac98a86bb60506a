#!/bin/bash
cd /nnsc/src
export ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:detect_odr_violation=0:verify_asan_link_order=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir build/asan -R "every pair of layouts on 8|3-d tensors on 12" 2>&1 | grep -E "Test +#|Total"
lit=$(ls /usr/lib/llvm-*/build/utils/lit/lit.py | tail -1)
/usr/bin/python3 $lit -sv build/asan/test --filter "$1" --time-tests 2>&1 | grep -E "^ *[0-9.]+s: |Passed|Unsupp|Fail"
