# NNSC_FUZZ=ON: every library built here is instrumented for libFuzzer
# (coverage only, fuzzer-no-link) and checked by AddressSanitizer and
# UndefinedBehaviorSanitizer; UB aborts rather than recovers so the fuzzer
# sees it. The targets in fuzz/ add -fsanitize=fuzzer (libFuzzer's main).
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "NNSC_FUZZ=ON needs clang (libFuzzer): configure with "
                      "-DCMAKE_CXX_COMPILER=clang++ (package libfuzzer-14-dev on Debian 12)")
endif()
set(NNSC_SANITIZE address,undefined)
add_compile_options(-fsanitize=fuzzer-no-link,${NNSC_SANITIZE} -fno-sanitize-recover=all
                    -fno-omit-frame-pointer -g)
add_link_options(-fsanitize=${NNSC_SANITIZE})
