# nnsc_add_library(<Module> SOURCES ... DEPS ... [TORCH])
# Declares library nnsc_<module> from lib/<Module>; public headers live in
# include/nnsc/<Module>. TORCH marks the few modules allowed to see LibTorch.
function(nnsc_add_library module)
  cmake_parse_arguments(ARG "TORCH" "" "SOURCES;DEPS" ${ARGN})
  string(TOLOWER ${module} lower)
  set(target nnsc_${lower})
  add_library(${target} STATIC ${ARG_SOURCES})
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR}/include
                                         PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(${target} PUBLIC ${ARG_DEPS})
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  if(ARG_TORCH)
    # Before LibTorch's own copies (cmake/NnscSystemFirst.cmake), here and in users.
    target_include_directories(${target} SYSTEM BEFORE PUBLIC ${NNSC_SYSTEM_FIRST})
    target_link_libraries(${target} PUBLIC ${TORCH_LIBRARIES})
    nnsc_torch_pch(${target})
    nnsc_unity_build(${target})
  elseif(NNSC_SANITIZE)
    # The sanitizer build is -O0 (scripts/sanitize.sh) for its LibTorch-heavy units,
    # whose work is in LibTorch; the planner's own loops at -O0 under ASan run 50 to
    # 80 times slower than in Release, at -O1 a few times: a clean pass in minutes.
    target_compile_options(${target} PRIVATE -O1)
  endif()
endfunction()

# The LibTorch modules share one precompiled <torch/script.h> (about 50 s to
# build, 75 s under ASan): Runtime's, which the others reuse, so Runtime is
# declared first (lib/CMakeLists.txt).
function(nnsc_torch_pch target)
  if(target STREQUAL "nnsc_runtime")
    target_precompile_headers(${target} PRIVATE <torch/script.h>)
  else()
    target_precompile_headers(${target} REUSE_FROM nnsc_runtime)
    # GCC uses a precompiled header only under the -D flags it was built with.
    target_compile_definitions(${target} PRIVATE
                               $<TARGET_PROPERTY:nnsc_runtime,COMPILE_DEFINITIONS>)
  endif()
endfunction()

# NNSC_UNITY_BUILD: the LibTorch units compiled in batches of 8 files. Even
# with the precompiled header each unit pays 3.5 to 5 s to instantiate the
# templates LibTorch's headers leave for the end of every translation unit
# (`-ftime-report`: "phase lang. deferred"); a batch pays it once.
# scripts/setup.sh turns it on for a fresh build; OFF rebuilds less after an edit.
option(NNSC_UNITY_BUILD "Compile the LibTorch units in batches (unity build)" OFF)
function(nnsc_unity_build target)
  if(NNSC_UNITY_BUILD)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  endif()
endfunction()
