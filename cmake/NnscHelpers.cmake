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
    target_precompile_headers(${target} PRIVATE <torch/script.h>)
  elseif(NNSC_SANITIZE)
    # The sanitizer build is -O0 (scripts/sanitize.sh) for its LibTorch-heavy units,
    # whose work is in LibTorch; the planner's own loops at -O0 under ASan run 50 to
    # 80 times slower than in Release, at -O1 a few times: a clean pass in minutes.
    target_compile_options(${target} PRIVATE -O1)
  endif()
endfunction()
