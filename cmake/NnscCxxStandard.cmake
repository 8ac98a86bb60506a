# The C++ standard of the whole project: C++17, or the newer one LibTorch's
# headers demand. Its umbrella headers (torch/all.h, ATen/ATen.h) stop the
# compiler below the standard they were written for (`#if __cplusplus <
# 202002L` / `#error C++20 or later compatible compiler is required`: C++20
# from PyTorch 2.12 on, C++17 on 2.x before it, C++14 on 1.13), so the standard
# is read from them rather than assumed. NNSC_CXX_STANDARD chooses one; below
# 17 or below LibTorch's it is an error here rather than a wall of errors from
# LibTorch's headers. The fuzz build has no LibTorch: C++17 or NNSC_CXX_STANDARD.
set(_nnsc_torch_std 0)
foreach(_dir ${TORCH_INCLUDE_DIRS})
  foreach(_header torch/all.h ATen/ATen.h)
    if(EXISTS ${_dir}/${_header})
      file(STRINGS ${_dir}/${_header} _line REGEX "__cplusplus < 20[0-9]+L" LIMIT_COUNT 1)
      # The year of the __cplusplus value: 201703L -> 17, 202002L -> 20.
      if(_line MATCHES "__cplusplus < 20([0-9][0-9])[0-9][0-9]L"
         AND CMAKE_MATCH_1 GREATER _nnsc_torch_std)
        set(_nnsc_torch_std ${CMAKE_MATCH_1})
        set(_nnsc_torch_header ${_dir}/${_header})
      endif()
    endif()
  endforeach()
endforeach()

if(_nnsc_torch_std GREATER 17)
  set(_nnsc_std ${_nnsc_torch_std})
  set(_nnsc_why "${_nnsc_torch_header} requires C++${_nnsc_torch_std}")
else()
  set(_nnsc_std 17)
  set(_nnsc_why "nnsc's own; LibTorch's headers accept it")
endif()
if(NNSC_CXX_STANDARD)
  if(NNSC_CXX_STANDARD LESS _nnsc_std)
    message(FATAL_ERROR "NNSC_CXX_STANDARD=${NNSC_CXX_STANDARD}: C++${_nnsc_std} is the "
                        "oldest this build can use (${_nnsc_why})")
  endif()
  set(_nnsc_std ${NNSC_CXX_STANDARD})
  set(_nnsc_why "NNSC_CXX_STANDARD")
endif()
set(CMAKE_CXX_STANDARD ${_nnsc_std})
message(STATUS "nnsc: C++${CMAKE_CXX_STANDARD} (${_nnsc_why})")
